"""GroupedMatmul on the real onnxruntime-cann EP against the fake CANN runtime: the node is placed on
CANN, its output is bit-identical to the CPU EP's (the fake computes with the CPU kernel, so this
checks the argument mapping: tensor lists, the transposed-weight view, the int64 group list, the
zeroed rows past the last group), aclnnGroupedMatmulV4 runs where its limits allow (host fallback
elsewhere, logged once with the reason), and bad group lists fail with the CPU's message. The
quantized forms (tests/ops/grouped_matmul/grouped_matmul_cases.py's samples and the antiquant grid below) equal the CPU
EP, natively where aclnnGroupedMatmulV4 takes them (W8A8, W8A16 per channel, W4A16 as ACL_INT4,
a zero antiquant offset when none is given) and on the host fallback otherwise, and break their
rules with the CPU's messages (the shared validation)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

from ascend_moe_onnx.ort_custom_ops.cann import soc_name
from tests.cann import helpers as cann

TYPES = cann.FLOAT_TYPES
GMM = "aclnnGroupedMatmulV4"
NATIVE_SOC = cann.moe_kernels_on_this_soc(GMM)  # e.g. not on FAKE_ACL_SOC_NAME=Ascend910_9599 (no 950 kernels)
ON_310P = soc_name().lower().startswith("ascend310p")


def native_soc(x_type="float16", bias_type=None, quantized=False) -> bool:
    """Whether this SoC runs aclnnGroupedMatmulV4 for these types: on Ascend310P float16 only,
    without quantisation (aclnn_grouped_matmul.cpp, Check310PlatformForFunction)."""
    fp16_only = x_type == "float16" and bias_type in (None, "float16") and not quantized
    return NATIVE_SOC and (fp16_only or not ON_310P)


def gmm_model(x, w, g, bias=None, **attrs) -> bytes:
    inputs = {"x": (x.dtype, ["M", x.shape[1]]), "w": (w.dtype, list(w.shape)), "g": (g.dtype, list(g.shape))}
    if bias is not None:
        inputs["b"] = (bias.dtype, list(bias.shape))
    node = helper.make_node("GroupedMatmul", list(inputs), ["y"], domain="ascend.moe", **attrs)
    return cann.model([node], inputs, ["y"])


def case(rng, dtype, m=12, k=16, n=8, e=3, transpose=0, group_list_type=0, gtype=np.int64, bias=None, rows=None):
    """Feeds with `rows` grouped rows (default m) split at random over the e groups."""
    rows = m if rows is None else rows
    cuts = np.sort(rng.integers(0, rows + 1, e - 1))
    ends = np.append(cuts, rows)
    g = ends if group_list_type == 0 else np.diff(np.concatenate([[0], ends]))
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32).astype(dtype),
             "w": rng.standard_normal((e, n, k) if transpose else (e, k, n)).astype(np.float32).astype(dtype),
             "g": g.astype(gtype)}
    if bias is not None:
        feeds["b"] = rng.standard_normal((e, n)).astype(np.float32).astype(bias)
    return feeds


def compare(feeds, **attrs):
    """Run on CANN and CPU (bit-equal); returns (y, whether aclnnGroupedMatmulV4 ran)."""
    got, native = cann.compare_eps(gmm_model(feeds["x"], feeds["w"], feeds["g"], feeds.get("b"), **attrs), feeds, GMM)
    return got[0], native


def test_placed_on_cann_and_native(tmp_path):
    feeds = case(np.random.default_rng(0), np.float16)
    data = gmm_model(feeds["x"], feeds["w"], feeds["g"])
    assert cann.placement(data, feeds, tmp_path) == {"GroupedMatmul": {"CANNExecutionProvider"}}
    assert compare(feeds)[1] is NATIVE_SOC


# (x type, bias type or None) -> native: aclnnGroupedMatmulV4 takes a float bias with bfloat16 x and
# a bias of x's type otherwise (aclnn_grouped_matmul.cpp, CheckNonQuantMatmulDataType).
BIAS_CASES = [(t, None, True) for t in TYPES] + [
    ("float", "float", True), ("float16", "float16", True), ("bfloat16", "float", True),
    ("float16", "float", False), ("bfloat16", "bfloat16", False)]


@pytest.mark.parametrize("transpose", [0, 1])
@pytest.mark.parametrize("group_list_type", [0, 1])
@pytest.mark.parametrize("x_type,bias_type,native", BIAS_CASES, ids=[f"{a}-{b}" for a, b, _ in BIAS_CASES])
def test_bit_identical_to_cpu_native_where_allowed(x_type, bias_type, native, transpose, group_list_type):
    rng = np.random.default_rng(transpose + 2 * group_list_type + len(x_type))
    for gtype in (np.int64, np.int32):
        feeds = case(rng, TYPES[x_type], transpose=transpose, group_list_type=group_list_type, gtype=gtype,
                     bias=bias_type and TYPES[bias_type])
        _, ran = compare(feeds, transpose_weight=transpose, group_list_type=group_list_type)
        assert ran == (native and native_soc(x_type, bias_type))


def test_rows_past_the_last_group_are_zero_on_the_native_path():
    rng = np.random.default_rng(1)
    full = case(rng, np.float32, m=32, rows=32)
    short = dict(full, g=np.array([3, 5, 9], np.int64))
    data = gmm_model(full["x"], full["w"], full["g"])
    s = cann.session(data, "cann")
    for _ in range(2):
        cann.run(s, full)  # the arena's output block holds non-zero rows now
        (y,) = cann.run(s, short)
        assert not y[9:].any()
        cann.assert_bits_equal([y], cann.run(cann.session(data, "cpu"), short))


def test_empty_groups_and_zero_rows():
    rng = np.random.default_rng(2)
    feeds = case(rng, np.float16)
    feeds["g"] = np.array([0, 0, 12], np.int64)
    assert compare(feeds)[1] is NATIVE_SOC
    feeds = case(rng, np.float16, m=0, rows=0)
    y, _ = compare(feeds)
    assert y.shape == (0, 8)


def test_more_than_1024_groups_fall_back():
    rng = np.random.default_rng(3)
    assert compare(case(rng, np.float32, m=8, k=4, n=4, e=1025))[1] is False
    assert compare(case(rng, np.float32, m=8, k=4, n=4, e=1024))[1] is native_soc("float")


def test_fallback_logged_once_with_reason(capfd):
    feeds = case(np.random.default_rng(4), np.float16, bias=np.float32)
    err = cann.fallback_log(capfd, gmm_model(feeds["x"], feeds["w"], feeds["g"], feeds["b"]), feeds)
    assert err.count("GroupedMatmul runs on the host fallback") == 1, err
    assert "aclnnGroupedMatmulV4 takes a float16 bias with float16 x, got float" in err


BAD = [(0, [5, 3, 12]), (0, [3, 5, 13]), (1, [4, -1, 9]), (1, [4, 4, 5])]


@pytest.mark.parametrize("group_list_type,values", BAD, ids=["decreasing", "past-m", "negative", "sum"])
def test_bad_group_list_same_message_as_cpu(group_list_type, values):
    feeds = case(np.random.default_rng(5), np.float16, group_list_type=group_list_type)
    feeds["g"] = np.array(values, np.int64)
    data = gmm_model(feeds["x"], feeds["w"], feeds["g"], group_list_type=group_list_type)
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("GroupedMatmul: input 'group_list'")


def _quant_samples():
    from tests.ops.grouped_matmul.grouped_matmul_cases import samples

    return [s for s in samples() if s.id.startswith(("w8a16", "w4a16", "w8a8"))]


def _native(sample) -> bool:
    """The quantized calls aclnnGroupedMatmulV4 takes (aclnn_grouped_matmul.cpp): W8A8 with bfloat16 y
    and a bfloat16 scale or float16 y and a float scale (CheckQuantParamsDtype); W8A16 with float16 /
    bfloat16 x and per-channel scales, W4A16 with float16 / bfloat16 x per channel or per group
    (CheckGroupedMatmulAntiQuant; an absent antiquant_offset is passed as zeros), with the
    non-quantized bias rule. Float x, int8 weights per group and int32 y run on the host."""
    inputs, out = sample.inputs, sample.attrs.get("output_dtype")
    x, w, scale, bias = inputs["x"].dtype, inputs["weight"].dtype, inputs.get("scale"), inputs.get("bias")
    if x == np.int8:
        return scale is not None and ((out == 16 and scale.dtype == ml_dtypes.bfloat16)
                                      or (out == 10 and scale.dtype == np.float32))
    native_bias = np.float32 if x == ml_dtypes.bfloat16 else x
    aq = inputs["antiquant_scale"]
    per_channel = aq.ndim == 2 or aq.shape[1] == 1
    return (x in (np.float16, ml_dtypes.bfloat16) and (w == np.int32 or per_channel)
            and (bias is None or bias.dtype == native_bias))


@pytest.mark.parametrize("sample", _quant_samples(), ids=lambda s: s.id)
def test_quantized_forms_equal_the_cpu_ep_native_where_allowed(sample):
    from tests.op_table import node_model

    data = node_model("GroupedMatmul", sample.inputs, sample.attrs).SerializeToString()
    feeds = {n: v for n, v in sample.inputs.items() if v is not None}
    before = cann.calls(GMM)
    got = cann.run(cann.session(data, "cann"), feeds)
    assert (cann.calls(GMM) > before) == (_native(sample) and native_soc(quantized=True))
    cann.assert_bits_equal(got, cann.run(cann.session(data, "cpu"), feeds))


def test_quantized_samples_cover_both_paths():
    """The quantized samples cover native W8A8, W8A16 and W4A16, and the host fallback."""
    native = {s.id.split("-")[0] for s in _quant_samples() if _native(s)}
    assert native == {"w8a8", "w8a16", "w4a16"} and not all(_native(s) for s in _quant_samples())


def _quant_bad():
    from tests.ops.grouped_matmul.grouped_matmul_cases import _quant_bad_cases

    return [b for b in _quant_bad_cases() if b.ort]


@pytest.mark.parametrize("bad", _quant_bad(), ids=lambda b: b.id)
def test_quantized_bad_input_same_message_as_cpu(bad):
    from tests.op_table import node_model

    data = node_model("GroupedMatmul", bad.inputs, bad.attrs).SerializeToString()
    feeds = {n: v for n, v in bad.inputs.items() if v is not None}
    expected = "GroupedMatmul: " + (bad.ort_message or bad.message)
    for provider in ("cann", "cpu"):
        try:
            text = cann.error_text(cann.session(data, provider), feeds)
        except cann.errors() as e:  # the type rules fail at session creation
            text = str(e)
        assert expected in text, (provider, text)


ANTIQUANT = [(w, t, tr, g, off) for w in ("int8", "int4") for t in ("float16", "bfloat16") for tr in (0, 1)
             for g in (1, 4) for off in (False, True)]


@pytest.mark.parametrize("weight,x_type,transpose,groups,offset", ANTIQUANT,
                         ids=["-".join(map(str, a)) for a in ANTIQUANT])
def test_antiquant_grid_native_unless_int8_per_group(monkeypatch, weight, x_type, transpose, groups, offset):
    """W8A16 / W4A16 over both weight layouts, per channel and per group, with and without
    antiquant_offset: native (one aclnnGroupedMatmulV4 call) except int8 per group, and equal to the
    CPU EP. New device memory holds 0x5A bytes (FAKE_ACL_DIRTY_MALLOC), so a zero offset that was
    never written, or weights read in another nibble order, give other results."""
    from tests.op_table import node_model
    from tests.ops.grouped_matmul.grouped_matmul_cases import make_quant_inputs

    monkeypatch.setenv("FAKE_ACL_DIRTY_MALLOC", "1")
    rng = np.random.default_rng(len(ANTIQUANT) + groups + 2 * transpose + 4 * offset)
    inputs = make_quant_inputs(rng, [3, 0, 4], 64, 24, weight, x_type, rows=9, transpose_weight=transpose,
                               groups=groups, offset=offset)
    attrs = dict(group_list_type=1, transpose_weight=transpose)
    data = node_model("GroupedMatmul", inputs, attrs).SerializeToString()
    s = cann.session(data, "cann")
    for _ in range(2):  # the second call reuses the arena's blocks
        before = cann.calls(GMM)
        got = cann.run(s, inputs)
        assert cann.calls(GMM) - before == int((weight == "int4" or groups == 1) and native_soc(quantized=True))
        cann.assert_bits_equal(got, cann.run(cann.session(data, "cpu"), inputs))
    assert not got[0][7:].any()  # rows past the last group


def test_int8_per_group_fallback_says_why(capfd):
    from tests.op_table import node_model
    from tests.ops.grouped_matmul.grouped_matmul_cases import make_quant_inputs

    inputs = make_quant_inputs(np.random.default_rng(6), [2, 2], 32, 8, "int8", "float16", groups=2)
    data = node_model("GroupedMatmul", inputs, dict(group_list_type=1)).SerializeToString()
    err = cann.fallback_log(capfd, data, inputs, runs=1)
    if native_soc(quantized=False) and not ON_310P:
        assert "takes int8 weights with per-channel antiquant scales [E, N] only" in err, err
