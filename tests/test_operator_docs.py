"""docs/operators.md: its generated reference blocks match the ONNX schemas."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import docgen

DOC = Path(__file__).resolve().parent.parent / "docs" / "operators.md"


@pytest.mark.skipif(not DOC.is_file(), reason="needs the source tree's docs/")
def test_generated_blocks_are_fresh():
    text = DOC.read_text(encoding="utf-8")
    assert docgen.update(text) == text, (
        "docs/operators.md is stale: run python -m ascend_moe_onnx.onnx_schemas.docgen docs/operators.md")


def test_rendering_covers_every_input_output_and_attribute():
    for name, schema in onnx_schemas.SCHEMAS.items():
        block = docgen.render_op(schema)
        for p in list(schema.inputs) + list(schema.outputs):
            assert f"`{p.name}`" in block, (name, p.name)
        for attr in schema.attributes:
            assert f"| `{attr}` |" in block, (name, attr)
        assert name in docgen.SHAPE_EXAMPLES and "→" in block, name


def test_a_changed_schema_makes_the_doc_stale():
    text = docgen.update("".join(f"{docgen.BEGIN.format(op=op)}\nSTALE-BLOCK\n{docgen.END.format(op=op)}\n"
                                 for op in docgen.SCHEMAS))
    assert "STALE-BLOCK" not in text and "| `k` | INT | required |" in text
    with pytest.raises(ValueError, match="no generated block for MoeReRouting"):
        docgen.update(f"{docgen.BEGIN.format(op='MoeGatingTopKHash')}\n{docgen.END.format(op='MoeGatingTopKHash')}\n")


def test_the_repository_refers_to_nothing_outside_it():
    root = DOC.parent.parent
    if not (root / ".git").exists():
        pytest.skip("needs a git checkout")
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    # Spelled in pieces so that this file does not match itself.
    shared, spec, arch = "sha" + "red", "SP" + "EC.md", "ARCHI" + "TECTURE.md"
    needles = (f"../{shared}", f"/work/{shared}", spec, arch)
    offenders = [f"{f}: {n}" for f in files if (root / f).is_file()
                 for n in needles if n in (root / f).read_text(encoding="utf-8", errors="replace")]
    assert not offenders, offenders


def _arguments(signature: str) -> list[tuple[str, str | None]]:
    """``(name, default)`` of each argument of a torch signature or schema text, ``*`` left out."""
    inner = signature[signature.index("(") + 1:signature.index(")")]
    out = []
    for part in (p.strip() for p in inner.split(",")):
        if part == "*":
            continue
        out.append((part.split("=")[0].split()[-1], part.partition("=")[2] or None))
    return out


@pytest.mark.skipif(not DOC.is_file(), reason="needs the source tree's docs/")
def test_documented_torch_signatures_are_the_schemas():
    """The hand-written torch front-end signatures in docs/operators.md: names, order and defaults
    as the torch schemas (built from the ONNX schemas' defaults) state them."""
    import importlib
    import re

    def front_end(name):
        return importlib.import_module(f"ascend_moe_onnx.exporters.{name}")

    text = " ".join(DOC.read_text(encoding="utf-8").split())
    gating = front_end("moe_gating_top_k_hash")
    for op, schema in (("custom.npu_moe_gating_top_k", gating.CUSTOM_SCHEMA),
                       ("npu.npu_moe_gating_top_k", gating.NPU_SCHEMA),
                       *((f"{ns}.{name}", front_end(module).SCHEMA) for ns, name, module in (
                           ("npu", "npu_moe_re_routing", "moe_re_routing"),
                           ("ascend_moe", "grouped_matmul", "grouped_matmul"),
                           ("ascend_moe", "moe_init_routing_v3", "moe_init_routing_v3"),
                           ("ascend_moe", "moe_token_permute", "moe_token_permute"),
                           ("ascend_moe", "moe_init_routing", "moe_init_routing"),
                           ("ascend_moe", "moe_finalize_routing_v2", "moe_finalize_routing_v2"),
                           ("ascend_moe", "moe_token_unpermute", "moe_token_unpermute")))):
        documented = re.search(rf"`torch\.ops\.{re.escape(op)}(\([^)]*\))", text)
        assert documented, op
        assert _arguments(documented.group(1)) == _arguments(schema), op


def _documented_body_blind() -> dict:
    """docs/operators.md's table of what each function body does not check: {op: {bad case ids}}."""
    text = DOC.read_text(encoding="utf-8")
    table = text[text.index("<!-- BODY-BLIND:"):].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[3:] if line.startswith("| ")]
    out = {}
    for row in rows:
        op, _, cases = (cell.strip() for cell in row.strip("|").split("|"))
        out[op] = set(re.findall(r"`([\w-]+)`", cases))
    return out


@pytest.mark.skipif(not DOC.is_file(), reason="needs the source tree's docs/")
def test_documented_body_limits_are_the_op_tables_xfails():
    """The list of what a function body cannot check is exactly the bad cases that run as strict
    xfails through the bodies (tests/op_table.py: ``body=False`` or the op's ``body_blind``)."""
    from tests.op_table import OPS, bad_case_params

    blind = {op.name: set() for op in OPS}
    for op, case in bad_case_params():
        if not case.body:
            blind[op.name].add(case.id)
    assert _documented_body_blind() == blind
