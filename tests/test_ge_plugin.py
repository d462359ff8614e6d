"""The graph-engine (GE) parser plugin (ge_plugin) without CANN: its generated tables are current and
map every schema input and attribute onto GE's recorded IR in GE's order; its mapping core (compiled
here from ge_plugin/src, driven through ctypes) turns the attribute JSON GE's parser writes for our own
exported nodes into the expected plan (GE op, input positions, index casts, attribute kinds and
values) and refuses what GE cannot express; every preset's FLOAT attributes survive the parser's
``%g``; the install lays out a vendor package. The plugin itself is checked against GE's real ONNX
parser outside CI (docs/ascend.md says how to build it on an Ascend host)."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.defs import OpSchema

from ascend_moe_onnx import ge_plugin, onnx_schemas
from ascend_moe_onnx.ge_plugin import ge_ir, generate, mapping

SRC = Path(ge_plugin.__file__).resolve().parent / "src"


def test_generated_tables_are_current():
    assert generate.HEADER_PATH.read_text() == generate.generate(), \
        "ge_plugin/src/mapping.gen.h is stale: run python -m ascend_moe_onnx.ge_plugin.generate"


def test_every_op_is_mapped_or_refused():
    mapping.check_complete()
    assert set(mapping.MAPPINGS) | set(mapping.REFUSED_OPS) == set(onnx_schemas.SCHEMAS)


@pytest.mark.parametrize("op", sorted(mapping.MAPPINGS))
def test_every_schema_input_and_attribute_maps_in_ge_order(op):
    """Each variant's GE inputs are GE's IR inputs in GE's order; every schema input is one of them
    (same name), refused, or excluded by the variant; every schema attribute lands on a GE attribute
    of a compatible kind."""
    schema, m = onnx_schemas.SCHEMAS[op], mapping.MAPPINGS[op]
    attrs = set(schema.attributes)
    for v in m.variants:
        ge = ge_ir.GE_OPS[v.ge_op]
        ge_inputs = [i.name for i in ge.inputs]
        mapped = [p.name for p in schema.inputs if p.name in ge_inputs]
        # GE wires by position: only GroupedMatmul (group_list 3rd here, 8th in GE) is out of GE's
        # order, and it is expanded, never registered directly (test_registrations_...)
        assert (mapped == sorted(mapped, key=ge_inputs.index)) == (op != "GroupedMatmul"), op
        for p in schema.inputs:
            assert p.name in ge_inputs or p.name in m.refused_inputs or p.name in v.absent, (op, p.name)
        ge_attrs = {a.name: a for a in ge.attrs}
        combined = {s for srcs in m.combined.values() for s in srcs}
        for name in attrs - combined:
            ga = ge_attrs[m.renames.get(name, name)]
            kind = schema.attributes[name].type
            assert (kind, ga.kind) in {(OpSchema.AttrType.INT, ge_ir.INT), (OpSchema.AttrType.INT, ge_ir.BOOL),
                                       (OpSchema.AttrType.FLOAT, ge_ir.FLOAT)}, (op, name, ga.kind)
        for ge_name in m.combined:
            assert ge_attrs[ge_name].kind == ge_ir.LIST_INT
        assert len(ge.outputs) == len(schema.outputs)


def test_the_attribute_kinds_that_differ_from_ge():
    """The five ops whose attribute kinds differ: INT flags GE declares Bool, the expert range."""
    bools = {(op, a.name) for op, m in mapping.MAPPINGS.items() for v in m.variants
             for a in ge_ir.GE_OPS[v.ge_op].attrs
             if a.kind == ge_ir.BOOL and a.name in onnx_schemas.SCHEMAS[op].attributes}
    assert bools == {("MoeGatingTopKHash", "out_flag"), ("MoeInitRoutingV3", "expert_tokens_num_flag"),
                     ("MoeTokenPermute", "padded_mode"), ("MoeTokenUnpermute", "padded_mode"),
                     ("GroupedMatmul", "transpose_weight")}
    assert mapping.MAPPINGS["MoeInitRoutingV3"].combined == {
        "active_expert_range": ("active_expert_start", "active_expert_end")}


def test_every_recorded_ge_op_names_its_source():
    for op in ge_ir.GE_OPS.values():
        assert op.source.repo.startswith("hicann/") and len(op.source.commit) == 40 and op.source.path


# ---- the mapping core through ctypes -----------------------------------------------------------

@pytest.fixture(scope="module")
def core(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("needs g++")
    lib = tmp_path_factory.mktemp("ge_core") / "libge_core.so"
    proc = subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                           "-fvisibility=hidden", str(SRC / "mapping_core.cc"), str(SRC / "core_capi.cc"),
                           "-o", str(lib)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ctypes.CDLL(str(lib))


def _plan(core, origin: str, attr_json: str, inputs: list[str]) -> str:
    arr = (ctypes.c_char_p * max(1, len(inputs)))(*[s.encode() for s in inputs])
    cap = 1 << 14
    buf = ctypes.create_string_buffer(cap)
    n = core.ascend_moe_ge_plan(origin.encode(), attr_json.encode(), arr, len(inputs), buf, cap)
    assert 0 <= n < cap, n
    return buf.value.decode()


def _node_plan(core, node: onnx.NodeProto) -> str:
    return _plan(core, mapping.origin_type(node.op_type, 1), mapping.ge_attribute_json(node.attribute),
                 list(node.input))


def expected_plan(node: onnx.NodeProto) -> str:
    """The plan the recorded facts give for ``node`` (independently of the C++ core)."""
    schema, m = onnx_schemas.SCHEMAS[node.op_type], mapping.MAPPINGS[node.op_type]
    names = [p.name for p in schema.inputs]
    given = {names[i] for i, v in enumerate(node.input) if v}
    variant = next(v for v in m.variants if set(v.present) <= given and not set(v.absent) & given)
    ge = ge_ir.GE_OPS[variant.ge_op]
    attrs = onnx_schemas.attribute_defaults(schema) | {a.name: helper.get_attribute_value(a)
                                                             for a in node.attribute}
    partitioned = len(m.variants) > 1 or any(i.kind == ge_ir.DYNAMIC for i in ge.inputs) or any(
        mapping.index_cast(schema, schema.inputs[names.index(i.name)], i) >= 0 for i in ge.inputs if i.name in names) \
        or any(names.index(i.name) != k for k, i in enumerate(ge.inputs) if i.name in names)
    lines = [f"op {variant.ge_op} {'partitioned' if partitioned else 'direct'}"]
    for i in ge.inputs:
        k = names.index(i.name) if i.name in given else -1
        cast = mapping.index_cast(schema, schema.inputs[k], i) if k >= 0 else -1
        lines.append(f"input {i.name} <- {k} cast {cast}")
    src = {m.renames.get(n, n): n for n in schema.attributes}
    for a in ge.attrs:
        if a.name in m.fixed:
            value = str(m.fixed[a.name])
        elif a.name in m.combined:
            start, end = (attrs[n] for n in m.combined[a.name])
            rng = [] if (start, end) == (0, -1) else [start, attrs["expert_num"] if end == -1 else end]
            value = "[" + ",".join(map(str, rng)) + "]"
        elif a.name in src:
            v = attrs[src[a.name]]
            if a.kind == ge_ir.FLOAT:
                value = f"{mapping.g_value(v):.9g}"
            else:
                value = str(m.value_maps.get(src[a.name], {}).get(v, v))
        else:
            continue
        lines.append(f"attr {a.name} {a.kind} {value}")
    lines += [f"output {o.name} -> {k}" for k, o in enumerate(ge.outputs)]
    return "\n".join(lines) + "\n"


def test_registrations_one_per_op_and_domain_version(core):
    buf = ctypes.create_string_buffer(1 << 14)
    core.ascend_moe_ge_registrations(buf, 1 << 14)
    rows = [line.split() for line in buf.value.decode().splitlines()]
    assert [r[1] for r in rows] == [mapping.origin_type(op, v) for v in mapping.DOMAIN_VERSIONS
                                    for op in onnx_schemas.SCHEMAS]
    types = dict((r[1].split("::")[-1], r[0]) for r in rows)
    # GE's order and types as they are: a direct registration; index casts, lists, variants: a graph
    assert types["MoeReRouting"] == "MoeReRouting" and types["MoeInitRouting"] == "MoeInitRouting"
    assert types["GroupedMatmul"] == types["MoeInitRoutingV3"] == types["MoeGatingTopKHash"] == "PartitionedCall"


def _ge_exports() -> tuple[dict, dict]:
    """Every preset exported for ge (tiny): the models, and the refusals' messages."""
    from ascend_moe_onnx.exporters.targets import TargetError
    from ascend_moe_onnx.models import presets
    from ascend_moe_onnx.models.runtime import export_block

    out, refused = {}, {}
    for name in presets.PRESETS:
        block = presets.build(name, "tiny", seed=1)
        try:
            out[name] = onnx.load_from_string(export_block(block, target="ge"))
        except TargetError as e:
            refused[name] = str(e)
    return out, refused


def test_every_presets_ge_export(core):
    """Every preset's --target ge export (one pass, the export is the slow part): image-token routing
    (DeepSeek-V4's additional_bias / additional_token_mask, no GE input) is refused with the reason,
    every other preset exports; each ascend.moe node, through the attribute JSON GE's parser writes
    for it, plans into the GE op, input positions, casts and attribute values the tables give; and
    every FLOAT attribute survives the parser's %g (the core reads back what the exporter wrote)."""
    exported, refused = _ge_exports()
    assert set(refused) == {n for n in exported.keys() | refused.keys() if n.endswith("-image")}, refused
    assert all("additional_bias' is given" in r for r in refused.values()), refused
    seen, floats = set(), 0
    for name, model in exported.items():
        for node in model.graph.node:
            if node.domain != onnx_schemas.DOMAIN:
                continue
            got = _node_plan(core, node)
            assert got == expected_plan(node), f"{name} {node.name}:\n{got}"
            seen.add(got.split()[1])
            for a in node.attribute:
                if a.type == onnx.AttributeProto.FLOAT:
                    assert mapping.g_value(a.f) == np.float32(a.f), (name, node.name, a.name, a.f)
                    ge_name = mapping.MAPPINGS[node.op_type].renames.get(a.name, a.name)
                    assert f"attr {ge_name} Float {f'{np.float32(a.f):.9g}'}\n" in got, got
                    floats += 1
    assert {"MoeGatingTopK", "MoeGatingTopKHash", "GroupedMatmul", "MoeInitRoutingV3", "SwiGlu",
            "MoeFinalizeRoutingV2", "MoeReRouting"} <= seen, seen
    assert floats > 0


def _node(op, inputs, **attrs):
    return helper.make_node(op, inputs, ["y"], domain=onnx_schemas.DOMAIN, **attrs)


def test_hash_gating_keeps_its_op_and_plain_gating_takes_the_builtin(core):
    hashed = _node("MoeGatingTopKHash", ["x", "b", "ids", "t2e"], k=2, out_flag=1, routed_scaling_factor=2.5)
    plain = _node("MoeGatingTopKHash", ["x", "", "", ""], k=8, k_group=4, group_count=8, eps=1e-20)
    got = _node_plan(core, hashed)
    assert got.startswith("op MoeGatingTopKHash partitioned") and "attr out_flag Bool 1" in got
    assert "input input_ids <- 2 cast -1" in got and "attr routed_scaling_factor Float 2.5" in got
    got = _node_plan(core, plain)
    assert got.startswith("op MoeGatingTopK partitioned") and "input bias <- -1 cast -1" in got
    assert "attr eps Float 9.99999968e-21" in got and got == expected_plan(plain)


def test_index_inputs_get_the_ge_type_and_lists_stay_in_ir_order(core):
    gmm = _node("GroupedMatmul", ["x", "w", "counts", "", "", "", "aq_scale"], group_list_type=1)
    got = _node_plan(core, gmm).splitlines()
    assert got[1:10] == ["input x <- 0 cast -1", "input weight <- 1 cast -1", "input bias <- -1 cast -1",
                         "input scale <- -1 cast -1", "input offset <- -1 cast -1",
                         "input antiquant_scale <- 6 cast -1", "input antiquant_offset <- -1 cast -1",
                         "input group_list <- 2 cast 9", "input per_token_scale <- -1 cast -1"]
    assert "attr split_item Int 3" in got and "attr group_type Int 0" in got and "attr dtype Int 0" in got
    init = _node("MoeInitRoutingV3", ["x", "idx"], expert_num=16, active_expert_start=4, expert_tokens_num_flag=1)
    got = _node_plan(core, init)
    assert "input expert_idx <- 1 cast 3" in got and "attr active_expert_range ListInt [4,16]" in got
    assert "attr expert_tokens_num_flag Bool 1" in got
    assert "attr active_expert_range ListInt []" in _node_plan(core, _node("MoeInitRoutingV3", ["x", "idx"]))
    fin = _node("MoeFinalizeRoutingV2", ["y", "rows", "", "", "", "w", "e"], drop_pad_mode=2)
    got = _node_plan(core, fin)
    assert "input expanded_row_idx <- 1 cast 3" in got and "input expert_idx <- 6 cast 3" in got
    assert "input x1 <- -1 cast -1" in got and "input scales <- 5 cast -1" in got


@pytest.mark.parametrize("node, reason", [
    (_node("MoeGatingTopKHash", ["x", "", "", "", "extra"], k=2), "input 'additional_bias' is given"),
    (_node("MoeGatingTopKHash", ["x", "", "ids"], k=2), "no GE operator takes this combination"),
    (_node("GroupedMatmul", ["x", "w", "g"], transpose_weight=1), "transpose_weight is reserved"),
    (_node("GroupedMatmul", ["x", "w", "g"], output_dtype=7), "'output_dtype' = 7 has no GE dtype code"),
    (_node("MoeRoutedExperts", ["x", "i", "w", "gu", "d"]), "no GE operator computes it"),
    (_node("MoeReRouting", ["t", "n"], unknown=1), "attribute 'unknown' is not an attribute"),
    (_node("MoeReRouting", ["t", "n"], idx_type=0.5), "must be an INT"),
    (_node("MoeInitRouting", ["x", "r", "e"]), "required attribute 'active_num' is missing"),
    (_node("MoeInitRouting", ["x", "", "e"], active_num=4), "required input 'row_idx' is missing"),
    (_node("MoeTokenPermute", ["t", "i"], padded_mode=2), "GE's padded_mode is a Bool"),
    (_node("MoeInitRoutingV3", ["x", "i"], active_expert_start=2), "needs expert_num"),
])
def test_what_ge_cannot_express_is_refused_with_the_reason(core, node, reason):
    got = _node_plan(core, node)
    assert got.startswith(f"refused ascend.moe::1::{node.op_type}: ") and reason in got, got


@pytest.mark.parametrize("text", ['{"attribute": [', '{"attribute": {"name": "k"}}', '{"attribute": [{"i": 3}]}',
                                  '{"attribute": [{"name": "k", "i": "x3", "type": 2}]}'])
def test_malformed_attribute_json_is_refused_not_crashed(core, text):
    got = _plan(core, "ascend.moe::1::MoeGatingTopKHash", text, ["x"])
    assert got.startswith("refused ascend.moe::1::MoeGatingTopKHash: "), got


def test_an_unknown_op_or_domain_version_is_not_found(core):
    buf = ctypes.create_string_buffer(64)
    arr = (ctypes.c_char_p * 1)(b"x")
    assert core.ascend_moe_ge_plan(b"ascend.moe::2::MoeReRouting", b"{}", arr, 1, buf, 64) == -1


def test_g_format_is_the_parsers():
    assert mapping.g_format(1.2345678) == '"1.23457"' and mapping.g_value(1.2345678) == np.float32(1.23457)
    assert mapping.g_format(1e-20) == '"1e-20"'
    # sprintf_s into 10 bytes fails for longer text: the parser then writes the number itself
    assert mapping.g_format(np.float32(-1.2345678e-20)) == repr(float(np.float32(-1.2345678e-20)))


# ---- build and install ---------------------------------------------------------------------------

def test_install_lays_out_a_vendor_package(tmp_path):
    lib = tmp_path / ge_plugin.LIBRARY_NAME
    lib.write_bytes(b"\x7fELF")
    opp = tmp_path / "opp"
    (opp / "vendors").mkdir(parents=True)
    (opp / "vendors" / "config.ini").write_text("# vendors\nload_priority=customize,mdc\n")
    installed = ge_plugin.install(lib, opp)
    assert installed == opp / "vendors" / "ascend_moe" / "framework" / "onnx" / ge_plugin.LIBRARY_NAME
    assert installed.read_bytes() == b"\x7fELF"
    # GE's loader reads the first line only
    assert (opp / "vendors" / "config.ini").read_text() == "load_priority=ascend_moe,customize,mdc\n# vendors\n"
    ge_plugin.install(lib, opp)  # again: listed once
    assert (opp / "vendors" / "config.ini").read_text() == "load_priority=ascend_moe,customize,mdc\n# vendors\n"
    custom = ge_plugin.install(lib, custom_opp_path=tmp_path / "custom")
    assert custom == tmp_path / "custom" / "framework" / "onnx" / ge_plugin.LIBRARY_NAME


def test_build_without_cann_says_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    with pytest.raises(ge_plugin.PluginError, match="no CANN toolkit"):
        ge_plugin.build(tmp_path / "b")
    with pytest.raises(ge_plugin.PluginError, match="has no include/register/register.h"):
        ge_plugin.build(tmp_path / "b", tmp_path)
    with pytest.raises(ge_plugin.PluginError, match="no plugin library"):
        ge_plugin.install(tmp_path / "missing.so", tmp_path)


def test_cli_cann_plugin_build_without_cann_exits_2(tmp_path, monkeypatch, capsys):
    from ascend_moe_onnx.cli.main import EXIT_USAGE, main

    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    monkeypatch.delenv("ASCEND_HOME_PATH", raising=False)
    assert main(["cann", "plugin", "build", "--build-dir", str(tmp_path / "b")]) == EXIT_USAGE
    assert "no CANN toolkit" in capsys.readouterr().err
    lib = tmp_path / "p.so"
    lib.write_bytes(b"x")
    assert main(["cann", "plugin", "install", "--library", str(lib), "--custom-opp-path", str(tmp_path / "c")]) == 0
    assert "ASCEND_CUSTOM_OPP_PATH=" in capsys.readouterr().out
