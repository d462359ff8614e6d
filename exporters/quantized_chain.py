"""Quantized routed experts for the CANN target: the op family's chain in the block's 16-bit dtype.

aclnnGroupedMatmulV4 dequantizes int8 / int4 weights (antiquant W8A16 / W4A16) with float16 /
bfloat16 activations only, so MoeRoutedExperts with quantized weights (float32 x) runs on the
host under the CANN EP. A float16 / bfloat16 block exported with ``--target cann
--weights-quant`` therefore gets, in its own dtype,

    MoeInitRoutingV3 (dropless, counts per expert)
      -> GroupedMatmul (gate and up rows stacked: [E, 2I, H] quantized, transpose_weight 1)
      -> SwiGlu (first half gate, second half up)
      -> GroupedMatmul (down [E, H, I] quantized, transpose_weight 1)
      -> MoeFinalizeRoutingV2 (token-major index, the routing weights as scales)

with the counts as both grouped matmuls' group list (``group_list_type`` 1). Every node of it has
a native CANN path (docs/ascend.md). The quantized integers are the ``[E, N, K]`` stack of
onnx_schemas.weight_quant, stored once and unchanged (int4: the same bytes read as int32 words of
8 values); the antiquant scales have x's dtype (Ascend's rule), so the float32 scales are rounded
to float16 / bfloat16 (docs/quantization.md measures what that adds). A shared expert of width
s·I is a second chain over its s slices as s experts (each token routed to all s, weight 1), and
its result is the routed finalize's residual ``x1``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from ascend_moe_onnx.onnx_schemas._common import DOMAIN

from .experts_builder import Builder, ExpertsError, node_attributes, refuse_biased, stored_arrays

if TYPE_CHECKING:
    from .weights_quant import WeightsQuant

HALF_TYPES: dict[int, torch.dtype] = {TensorProto.FLOAT16: torch.float16, TensorProto.BFLOAT16: torch.bfloat16}


def _scale_initializer(b: Builder, scales: np.ndarray, to: int, hint: str) -> str:
    """float32 ``scales`` rounded to ``to`` (float16 / bfloat16, round to nearest even) as a new
    initializer: the antiquant scale GroupedMatmul takes in x's dtype."""
    t = torch.from_numpy(np.ascontiguousarray(scales, np.float32)).to(HALF_TYPES[to])
    name = b.name(hint)
    b.new_initializers.append(helper.make_tensor(name, to, list(t.shape), t.view(torch.int16).numpy().tobytes(),
                                                 raw=True))
    return name


def _gmm_weight(b: Builder, q: np.ndarray, bits: int, hint: str) -> str:
    """Quantized ``[E, N, K]`` integers as GroupedMatmul's weight (``transpose_weight`` 1): int8 as
    they are; int4 (int8 [E, N, K/2], two per byte) as int32 words [E, N, K/8], the same bytes."""
    q = np.ascontiguousarray(q)
    if bits == 4:
        if q.shape[-1] % 4:
            raise ExpertsError(f"experts: the CANN target packs int4 weights 8 per int32 word along K; "
                               f"K = {2 * q.shape[-1]} is not a multiple of 8")
        q = q.view(np.int32)
    return b.initializer(q, hint)


def _gmm_scales(scales: np.ndarray, block_size: int) -> np.ndarray:
    """weight_quant scales ([E, N] per channel, [E, N, G] per group) in GroupedMatmul's antiquant
    layout ([E, N], [E, G, N])."""
    return scales if block_size == 0 else scales.transpose(0, 2, 1)


def _chain(b: Builder, rows: str, idx: str, scales: str, experts: int, weights: tuple, dtype: int,
           skip: str = "", outputs=None) -> str:
    """The op-family chain on ``rows`` [T, H] (``dtype``) routed by ``idx`` [T, k] with routing
    weights ``scales`` [T, k]; ``weights`` = (gate/up q, gate/up scales, down q, down scales) names;
    ``skip`` [T, H] is added to the result (finalize's x1)."""
    fc1, fc1_s, fc2, fc2_s = weights
    xs, row_idx, counts, _ = b.op("MoeInitRoutingV3", [rows, idx], n_out=4, domain=DOMAIN, expert_num=experts,
                                  expert_tokens_num_type=1, expert_tokens_num_flag=1)
    gmm = dict(domain=DOMAIN, group_list_type=1, transpose_weight=1)
    h = b.op("GroupedMatmul", [xs, fc1, counts, "", "", "", fc1_s], **gmm)
    act = b.op("SwiGlu", [h], domain=DOMAIN, dim=-1)
    y = b.op("GroupedMatmul", [act, fc2, counts, "", "", "", fc2_s], **gmm)
    return b.op("MoeFinalizeRoutingV2", [y, row_idx, skip, "", "", scales], domain=DOMAIN, drop_pad_mode=2,
                outputs=outputs)


def _quantized_stacks(b: Builder, arrays: list, slices: int, dtype: int) -> tuple[tuple, tuple | None]:
    """The routed experts' (and the shared expert's slices', or None) GroupedMatmul inputs from the
    float32 weights ``arrays`` (gate, up, down[, shared gate, up, down]), quantized as
    ``b.weights_quant`` says (or as recorded for them)."""
    wq = b.weights_quant
    assert wq is not None  # the quantized chain runs only for quantized weights
    _, I, H = arrays[0].shape

    def stacks(gate, up, down, layouts=(None, None, None), hint=""):
        (gq, gs), (uq, us), (dq, ds) = (wq.quantized(w, st) for w, st in zip((gate, up, down), layouts))
        fc1 = _gmm_weight(b, np.concatenate((gq, uq), axis=1), wq.bits, f"{hint}fc1_q")
        fc1_s = _scale_initializer(b, _gmm_scales(np.concatenate((gs, us), axis=1), wq.block_size), dtype,
                                   f"{hint}fc1_scales")
        fc2 = _gmm_weight(b, dq, wq.bits, f"{hint}fc2_q")
        fc2_s = _scale_initializer(b, _gmm_scales(ds, wq.block_size), dtype, f"{hint}fc2_scales")
        return fc1, fc1_s, fc2, fc2_s

    routed = stacks(*arrays[:3])
    if len(arrays) == 3:
        return routed, None
    s = slices
    sg, su, sd = arrays[3:]
    layouts = (sg.reshape(s, I, H), su.reshape(s, I, H), sd.reshape(H, s, I).transpose(1, 0, 2))
    return routed, stacks(sg, su, sd, layouts, "shared_")


def _finalize_scale_types(dtype: int) -> tuple[int, ...]:
    """The scale types MoeFinalizeRoutingV2's CANN path takes with ``dtype`` rows (the rows' type, or
    float32 with bfloat16 rows: docs/ascend.md), the last one the type to cast to."""
    return (dtype, TensorProto.FLOAT) if dtype == TensorProto.BFLOAT16 else (dtype,)


def _routing_scales(b: Builder, w: str, dtype: int) -> str:
    """The routing weights ``w`` as MoeFinalizeRoutingV2's scales; a Cast only where needed."""
    accepted = _finalize_scale_types(dtype)
    return w if b.types.get(w) in accepted else b.cast(w, accepted[-1])


def check_chain(a: dict, weights_quant: WeightsQuant) -> None:
    """An ExpertsError when a block's quantized experts cannot run as the CANN chain."""
    if a["dtype"] not in HALF_TYPES:
        raise ExpertsError("experts: --target cann with --weights-quant needs a float16 / bfloat16 block "
                           "(aclnnGroupedMatmulV4 dequantizes int8 / int4 weights for 16-bit activations "
                           "only); export with --dtype bfloat16 (or float16)")
    if a["limit"]:
        raise ExpertsError(f"experts: --target cann with --weights-quant: SwiGlu has no clamp, so swiglu_limit "
                           f"{a['limit']} cannot run in the CANN chain")
    if weights_quant.bits == 8 and weights_quant.block_size:
        raise ExpertsError(f"experts: --target cann with int8 weights needs per-channel scales (block size 0, got "
                           f"{weights_quant.block_size}): aclnnGroupedMatmulV4 refuses per-group scales with int8 "
                           f"weights; use int4 for per-group scales")


def expand_routed_quantized_cann(b: Builder, node: onnx.NodeProto) -> None:
    """RoutedExperts (``ort`` formulation) with quantized weights for the CANN target: the
    op-family chain in the block's dtype (module docstring), the result cast to the placeholder's
    float32."""
    refuse_biased(node, "the CANN target's quantized chain")
    a = node_attributes(node)
    assert b.weights_quant is not None  # the quantized chain runs only for quantized weights
    check_chain(a, b.weights_quant)
    x, w, idx, gate, up, down, *shared = node.input
    arrays = stored_arrays(b, (gate, up, down, *shared))
    if arrays is None:
        raise ExpertsError("experts: --weights-quant needs the expert weights as in-memory initializers")
    arrays = [v.astype(np.float32, copy=False) for v in arrays]
    dtype, E = a["dtype"], a["experts"]
    routed, shared_stacks = _quantized_stacks(b, arrays, a.get("shared_slices", 0), dtype)
    # bfloat16 blocks hand their experts float32 rows holding bfloat16 values: this Cast is exact.
    rows = b.cast(x, dtype) if dtype == TensorProto.BFLOAT16 else x
    scale_type = _finalize_scale_types(dtype)[-1]  # the shared slots' weights 1
    skip = ""
    if shared_stacks is not None:  # each token to all s slices, weight 1: shape bookkeeping only
        s = a["shared_slices"]
        rows_s = b.op("Concat", [b.op("Shape", [x], start=0, end=1), b.const([s])], axis=0)
        ids = b.op("Expand", [b.const([list(range(s))], np.int32), rows_s])
        one = helper.make_tensor("one", scale_type, [1], [1.0])
        ones = b.op("ConstantOfShape", [rows_s], value=one)
        skip = _chain(b, rows, ids, ones, s, shared_stacks, dtype)
    y = _chain(b, rows, idx, _routing_scales(b, w, dtype), E, routed, dtype, skip)
    b.op("Cast", [y], to=TensorProto.FLOAT, outputs=[node.output[0]])
    b.widened[node.output[0]] = (y, dtype)  # a Cast back to dtype reads y instead (experts_graph.expand)
