"""``moe-onnx info`` on the MoE op family's nodes: each says whether its CANN kernel runs natively
and through which ACLNN call(s), or takes the host fallback and why (the kernels' own blocker
functions, asked through AscendMoeCannPath). The kernels themselves: tests/cann."""

from __future__ import annotations

import onnx
from onnx import TensorProto as T
from onnx import helper

from ascend_moe_onnx.cli import main as cli
from ascend_moe_onnx.ort_custom_ops.cann import family_path


def test_family_path_predictions():
    assert family_path("GroupedMatmul", {"x_type": "bfloat16", "bias_type": "float", "experts": 8}) \
        == ("aclnnGroupedMatmulV4", "")
    call, why = family_path("GroupedMatmul", {"x_type": "float16", "bias_type": "float", "experts": 8})
    assert call is None and why == "aclnnGroupedMatmulV4 takes a float16 bias with float16 x, got float"
    assert family_path("GroupedMatmul", {"experts": 1025})[0] is None
    # the quantized calls aclnnGroupedMatmulV4 takes (W8A8 pairings, W8A16 with an offset); others on the host
    w8a8 = {"x_type": "int8", "weight_type": "int8", "experts": 8}
    assert family_path("GroupedMatmul", {**w8a8, "output_dtype": 16, "scale_type": "bfloat16"})[0] \
        == "aclnnGroupedMatmulV4"
    assert family_path("GroupedMatmul", {**w8a8, "output_dtype": 10, "scale_type": "float"})[0] \
        == "aclnnGroupedMatmulV4"
    assert family_path("GroupedMatmul", {**w8a8, "output_dtype": 16, "scale_type": "float"})[1] == (
        "aclnnGroupedMatmulV4 dequantizes int8 x to bfloat16 y with a bfloat16 scale or to float16 y with a "
        "float scale, got bfloat16 y with a float scale")
    assert "int32 y" in family_path("GroupedMatmul", {**w8a8, "output_dtype": 6})[1]
    w4a16 = {"x_type": "bfloat16", "weight_type": "int32", "experts": 8}
    assert family_path("GroupedMatmul", {**w4a16, "antiquant_groups": 4})[0] == "aclnnGroupedMatmulV4"
    assert "int4 weights with float16 or bfloat16 x, got float x" in \
        family_path("GroupedMatmul", {**w4a16, "x_type": "float"})[1]
    w8a16 = {"x_type": "bfloat16", "weight_type": "int8", "experts": 8}
    assert family_path("GroupedMatmul", w8a16)[0] == "aclnnGroupedMatmulV4"
    assert "per-channel antiquant scales [E, N] only" in family_path("GroupedMatmul",
                                                                     {**w8a16, "antiquant_groups": 2})[1]
    assert "float16 or bfloat16 x, got float x" in family_path("GroupedMatmul", {**w8a16, "x_type": "float"})[1]
    assert family_path("MoeRoutedExperts", {"swiglu_limit": 0.0, "experts": 256})[0].startswith("aclnnMoeInitRoutingV3")
    for bits in (8, 4):
        call, why = family_path("MoeRoutedExperts", {"swiglu_limit": 0.0, "experts": 256, "weight_type": "int8",
                                                     "weight_bits": bits})
        assert call is None and f"weight_bits {bits}" in why and "x is float32" in why
    assert family_path("MoeRoutedExperts", {"swiglu_limit": 0.0, "weight_type": "float"})[0] is not None
    assert "swiglu_limit > 0" in family_path("MoeRoutedExperts", {"swiglu_limit": 7.0, "experts": 256})[1]
    assert family_path("MoeInitRoutingV3", {"expert_num": 256})[0] == "aclnnMoeInitRoutingV3"
    assert family_path("MoeInitRoutingV3", {"expert_num": 256, "quant_mode": 1})[0] is None
    assert family_path("MoeFinalizeRoutingV2", {"x_type": "bfloat16", "scales_type": "float", "k": 8})[0] \
        == "aclnnMoeFinalizeRoutingV2"
    assert family_path("MoeTokenPermute", {"k": 513})[1] == "aclnnMoeTokenPermute takes K <= 512, got 513"
    assert family_path("MoeTokenUnpermute", {"k": 8})[0] == "aclnnMoeTokenUnpermute"
    assert family_path("MoeInitRouting", {"active_num": 4})[0] == "aclnnMoeInitRouting"


def test_info_names_the_calls_or_the_fallback(capsys, tmp_path):
    nodes = [
        helper.make_node("GroupedMatmul", ["x", "w", "g"], ["y"], domain="ascend.moe", name="gmm"),
        helper.make_node("MoeRoutedExperts", ["h", "idx", "rw", "gu", "dn"], ["o"], domain="ascend.moe",
                         name="clamped", swiglu_limit=7.0),
        helper.make_node("MoeRoutedExperts", ["h", "idx", "rw", "gq", "dq", "gs", "ds"], ["q"], domain="ascend.moe",
                         name="int4", weight_bits=4),
    ]
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "g",
        [vi("x", T.FLOAT16, ["M", 16]), vi("w", T.FLOAT16, [4, 16, 8]), vi("g", T.INT64, [4]),
         vi("h", T.FLOAT, ["T", 16]), vi("idx", T.INT32, ["T", 2]), vi("rw", T.FLOAT, ["T", 2]),
         vi("gu", T.FLOAT, [4, 8, 16]), vi("dn", T.FLOAT, [4, 16, 4]), vi("gq", T.INT8, [4, 8, 8]),
         vi("dq", T.INT8, [4, 16, 2]), vi("gs", T.FLOAT, [4, 8]), vi("ds", T.FLOAT, [4, 16])],
        [helper.make_value_info(n, onnx.TypeProto()) for n in ("y", "o", "q")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("ascend.moe", 1)]), str(path))
    assert cli.main(["info", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    cann = {n: next(line for line in out[next(i for i, x in enumerate(out) if f"'{n}'" in x):]
                    if "CANNExecutionProvider" in line) for n in ("gmm", "clamped", "int4")}
    assert "custom-op library kernel, native: aclnnGroupedMatmulV4" in cann["gmm"]
    assert "host fallback (CPU kernel, with copies): swiglu_limit > 0" in cann["clamped"]
    assert "host fallback (CPU kernel, with copies): quantized expert weights (weight_bits 4)" in cann["int4"]
