"""One-node MoeRoutedExperts models for the kernel tests of the quantized and bfloat16 weights."""

from __future__ import annotations

from onnx import TensorProto, helper, numpy_helper

from ascend_moe_onnx.onnx_schemas import moe_routed_experts as spec

WEIGHTS = ("gate_up_weights", "down_weights", "gate_up_scales", "down_scales")


def experts_model(inputs: dict, attrs: dict, constant_weights: bool) -> bytes:
    """One MoeRoutedExperts node on the given ``inputs`` (schema input name -> array); the weights
    and scales as initializers (constant: read once at session creation, repacked there where the
    kernel repacks) or as graph inputs (read per call)."""
    names = [n for n in spec.INPUT_NAMES if n in inputs]
    fed = [n for n in names if not (constant_weights and n in WEIGHTS)]
    node_inputs = [n if n in inputs else "" for n in spec.INPUT_NAMES]  # absent middle inputs: ""
    while node_inputs[-1] == "":
        node_inputs.pop()
    node = helper.make_node("MoeRoutedExperts", node_inputs, ["y"], domain="ascend.moe", **attrs)
    graph = helper.make_graph(
        [node], "experts",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(inputs[n].dtype), list(inputs[n].shape))
         for n in fed],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(inputs[n], n) for n in names if n not in fed])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ascend.moe", 1)])
    m.ir_version = 10
    return m.SerializeToString()
