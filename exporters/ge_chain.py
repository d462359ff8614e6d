"""Routed experts for the graph-engine target (``--target ge``): the op family's chain, which GE's
ONNX parser reads through the project's plugin (ge_plugin) as GE's own operators.

GE has no operator for MoeRoutedExperts, so a routed block exports, in the block's dtype,

    MoeInitRoutingV3 (dropless, counts per expert)
      -> GroupedMatmul (gate and up stacked: weight [E, H, 2I], transpose_weight 0)
      -> SwiGlu (first half gate, second half up)
      -> GroupedMatmul (down: weight [E, I, H])
      -> MoeFinalizeRoutingV2 (token-major index, the routing weights as scales)

with the counts as both grouped matmuls' group list (``group_list_type`` 1). A clamped SwiGLU
(``swiglu_limit``: GE's SwiGlu has no clamp) is Slice / Clip / Min / Sigmoid / Mul in float32 instead
of SwiGlu. The weights are stored
[E, K, N] once at export: GE's GroupedMatmul takes no transposed weight (its ``transpose_weight`` is
reserved, not enabled). A shared expert of width s·I is a second chain over its s slices as s
experts (each token routed to all s, weight 1), and its result is the routed finalize's residual
``x1``, as in exporters.quantized_chain (the CANN EP's quantized form of the same chain).
"""

from __future__ import annotations

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from ascend_moe_onnx.onnx_schemas._common import DOMAIN

from .experts_builder import Builder, ExpertsError, node_attributes, refuse_biased, stored_arrays
from .quantized_chain import _finalize_scale_types, _routing_scales

_TORCH: dict[int, torch.dtype] = {TensorProto.FLOAT: torch.float32, TensorProto.FLOAT16: torch.float16,
                                  TensorProto.BFLOAT16: torch.bfloat16}


def _weight(b: Builder, array: np.ndarray, dtype: int, hint: str) -> str:
    """``array`` (float32) in ``dtype`` (rounded to nearest even) as a new initializer."""
    t = torch.from_numpy(np.ascontiguousarray(array, np.float32)).to(_TORCH[dtype]).contiguous()
    name = b.name(hint)
    if dtype == TensorProto.FLOAT:
        b.new_initializers.append(onnx.numpy_helper.from_array(t.numpy(), name))
    else:
        b.new_initializers.append(helper.make_tensor(name, dtype, list(t.shape), t.view(torch.int16).numpy().tobytes(),
                                                     raw=True))
    return name


def _stacks(b: Builder, gate: np.ndarray, up: np.ndarray, down: np.ndarray, dtype: int, hint: str) -> tuple[str, str]:
    """GroupedMatmul's [E, K, N] weights: gate/up [E, I, H] as fc1 [E, H, 2I] (gate columns first),
    down [E, H, I] as fc2 [E, I, H]."""
    fc1 = np.concatenate((gate, up), axis=1).transpose(0, 2, 1)
    return _weight(b, fc1, dtype, f"{hint}fc1"), _weight(b, down.transpose(0, 2, 1), dtype, f"{hint}fc2")


def _activation(b: Builder, h: str, width: int, limit: float, dtype: int) -> str:
    """SwiGLU over ``h`` [P, 2I] (gate columns first): GE's SwiGlu, or with a clamp (``limit``) the
    standard ops of exporters.experts_graph's SwiGLU (up clipped to [-limit, limit], gate to at most
    limit) in float32, back in ``dtype``."""
    if not limit:
        return b.op("SwiGlu", [h], domain=DOMAIN, dim=-1)
    hf = h if dtype == TensorProto.FLOAT else b.cast(h, TensorProto.FLOAT)
    g, u = (b.op("Slice", [hf, b.const([lo]), b.const([lo + width]), b.const([-1])]) for lo in (0, width))
    u = b.op("Clip", [u, b.const(-limit, np.float32), b.const(limit, np.float32)])
    g = b.op("Min", [g, b.const(limit, np.float32)])
    act = b.op("Mul", [b.op("Mul", [g, b.op("Sigmoid", [g])]), u])
    return act if dtype == TensorProto.FLOAT else b.cast(act, dtype)


def _chain(b: Builder, rows: str, idx: str, scales: str, experts: int, weights: tuple[str, str], a: dict,
           width: int, skip: str = "", outputs=None) -> str:
    """The chain on ``rows`` [T, H] routed by ``idx`` [T, k] with routing weights ``scales`` [T, k];
    ``skip`` [T, H] is added to the result (finalize's x1)."""
    fc1, fc2 = weights
    xs, row_idx, counts, _ = b.op("MoeInitRoutingV3", [rows, idx], n_out=4, domain=DOMAIN, expert_num=experts,
                                  expert_tokens_num_type=1, expert_tokens_num_flag=1)
    h = b.op("GroupedMatmul", [xs, fc1, counts], domain=DOMAIN, group_list_type=1)
    act = _activation(b, h, width, float(a["limit"]), a["dtype"])
    y = b.op("GroupedMatmul", [act, fc2, counts], domain=DOMAIN, group_list_type=1)
    return b.op("MoeFinalizeRoutingV2", [y, row_idx, skip, "", "", scales], domain=DOMAIN, drop_pad_mode=2,
                outputs=outputs)


def _check_float(b: Builder) -> None:
    if b.weights_quant is not None:
        raise ExpertsError("experts: --target ge exports float expert weights only (GE's GroupedMatmul takes "
                           "int8 / int4 weights as [E, K, N] DT_INT8 / DT_INT4, which the library's kernel does "
                           "not read); export without --weights-quant")


def expand_routed_ge(b: Builder, node: onnx.NodeProto) -> None:
    """RoutedExperts (``ort`` formulation) for the graph-engine target: the chain in the block's
    dtype (module docstring), the result cast to the placeholder's float32."""
    refuse_biased(node, "--target ge (the op family's chain: GE's SwiGlu)")
    a = node_attributes(node)
    _check_float(b)
    x, w, idx, gate, up, down, *shared = node.input
    arrays = stored_arrays(b, (gate, up, down, *shared))
    if arrays is None:
        raise ExpertsError("experts: --target ge needs the expert weights as in-memory initializers")
    g, u, d, *sh = (v.astype(np.float32, copy=False) for v in arrays)
    dtype, E = a["dtype"], a["experts"]
    # bfloat16 blocks hand their experts float32 rows holding bfloat16 values: this Cast is exact.
    rows = b.cast(x, dtype) if dtype == TensorProto.BFLOAT16 else x
    skip = ""
    if sh:
        s = a["shared_slices"]
        _, I, H = g.shape
        sg, su, sd = sh[0].reshape(s, I, H), sh[1].reshape(s, I, H), sh[2].reshape(H, s, I).transpose(1, 0, 2)
        rows_s = b.op("Concat", [b.op("Shape", [x], start=0, end=1), b.const([s])], axis=0)
        ids = b.op("Expand", [b.const([list(range(s))], np.int32), rows_s])
        one = helper.make_tensor("one", _finalize_scale_types(dtype)[-1], [1], [1.0])
        ones = b.op("ConstantOfShape", [rows_s], value=one)
        skip = _chain(b, rows, ids, ones, s, _stacks(b, sg, su, sd, dtype, "shared_"), a, I)
    y = _chain(b, rows, idx, _routing_scales(b, w, dtype), E, _stacks(b, g, u, d, dtype, ""), a, g.shape[1], skip)
    if dtype == TensorProto.FLOAT:
        b.op("Identity", [y], outputs=[node.output[0]])
        return
    b.op("Cast", [y], to=TensorProto.FLOAT, outputs=[node.output[0]])
    b.widened[node.output[0]] = (y, dtype)  # a Cast back to dtype reads y instead (experts_graph.expand)


def expand_segments_ge(b: Builder, node: onnx.NodeProto) -> None:
    """ExpertSegments (rows already sorted by expert, ``counts`` rows per expert: the receiving side
    of expert parallelism) for the graph-engine target: GroupedMatmul -> SwiGlu -> GroupedMatmul with
    the counts as group list, in the rows' dtype."""
    a = node_attributes(node)
    _check_float(b)
    x, counts, gate, up, down = node.input
    arrays = stored_arrays(b, (gate, up, down))
    if arrays is None:
        raise ExpertsError("experts: --target ge needs the expert weights as in-memory initializers")
    g, u, d = (v.astype(np.float32, copy=False) for v in arrays)
    dtype = a["dtype"]
    rows = b.cast(x, dtype) if dtype == TensorProto.BFLOAT16 else x
    fc1, fc2 = _stacks(b, g, u, d, dtype, "")
    h = b.op("GroupedMatmul", [rows, fc1, counts], domain=DOMAIN, group_list_type=1)
    act = _activation(b, h, g.shape[1], float(a["limit"]), dtype)
    y = b.op("GroupedMatmul", [act, fc2, counts], domain=DOMAIN, group_list_type=1)
    if dtype == TensorProto.BFLOAT16:  # the placeholder's rows are float32 (bfloat16 values)
        b.op("Cast", [y], to=TensorProto.FLOAT, outputs=[node.output[0]])
        b.widened[node.output[0]] = (y, dtype)
    else:
        b.op("Identity", [y], outputs=[node.output[0]])
