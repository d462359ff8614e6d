"""bfloat16 arithmetic of standard ONNX ops computed in float32: Casts around each such node.

ONNX Runtime's CPU execution provider has no bfloat16 kernel for MatMul, Gemm or the elementwise
arithmetic ops (checked on ORT 1.32: MatMul, Gemm, Add, Sub, Mul, Div, Sigmoid, Softmax, ReduceSum,
Sqrt, Exp, ... all NOT_IMPLEMENTED; data movement such as Reshape, Transpose, Concat, Slice has
one), so a model written in bfloat16 (e.g. the Ascend code's shared expert, ``torch.matmul`` on
bfloat16 weights) exports to a graph that no CPU session can open. Each such node is rewritten to
cast its bfloat16 inputs to float32, run in float32 and cast its bfloat16 outputs back: the
result Ascend's bfloat16 MatMul gives (float32 accumulation, one rounding), and for the
elementwise ops the correctly rounded bfloat16 result (float32 carries more than twice
bfloat16's precision, so the double rounding is exact). A bfloat16 initializer feeding a Cast is
folded into a float32 constant by ONNX Runtime when the session is created.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

# Standard ops whose bfloat16 form ORT's CPU EP cannot run and that compute the same in float32.
FLOAT32_OPS = frozenset({
    "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Sqrt", "Reciprocal", "Pow", "Exp", "Log",
    "Sigmoid", "Tanh", "Relu", "Erf", "Softmax", "LogSoftmax", "ReduceSum", "ReduceMean", "ReduceMax",
    "ReduceMin", "Max", "Min", "Sum", "Mean", "Clip",
})


def _elem_types(graph: onnx.GraphProto) -> dict[str, int]:
    types = {i.name: i.data_type for i in graph.initializer}
    for v in (*graph.input, *graph.output, *graph.value_info):
        if v.type.HasField("tensor_type"):
            types[v.name] = v.type.tensor_type.elem_type
    return types


def compute_bfloat16_in_float32(model: onnx.ModelProto) -> int:
    """Rewrite, in place, every main-graph node of FLOAT32_OPS with a bfloat16 input or output to
    compute in float32 between Casts; returns how many nodes were rewritten. Needs the element
    types of the node's values (the dynamo exporter records them; else run shape inference first)."""
    graph = model.graph
    types = _elem_types(graph)
    nodes, rewritten = [], 0
    for node in graph.node:
        bf16_in = [bool(n) and types.get(n) == TensorProto.BFLOAT16 for n in node.input]
        bf16_out = [types.get(n) == TensorProto.BFLOAT16 for n in node.output]
        if node.domain not in ("", "ai.onnx") or node.op_type not in FLOAT32_OPS or not (any(bf16_in) or any(bf16_out)):
            nodes.append(node)
            continue
        base = node.name or f"{node.op_type}_{rewritten}"
        inputs = list(node.input)
        for i, is_bf16 in enumerate(bf16_in):
            if is_bf16:
                cast = f"{base}_in{i}_float32"
                nodes.append(helper.make_node("Cast", [inputs[i]], [cast], name=cast, to=TensorProto.FLOAT))
                inputs[i] = cast
        outputs = list(node.output)
        casts_back = []
        for i, is_bf16 in enumerate(bf16_out):
            if is_bf16:
                wide = f"{base}_out{i}_float32"
                casts_back.append(helper.make_node("Cast", [wide], [outputs[i]], name=f"{wide}_to_bfloat16",
                                                   to=TensorProto.BFLOAT16))
                outputs[i] = wide
        del node.input[:]
        node.input.extend(inputs)
        del node.output[:]
        node.output.extend(outputs)
        nodes += [node, *casts_back]
        rewritten += 1
    if rewritten:
        del graph.node[:]
        graph.node.extend(nodes)
    return rewritten
