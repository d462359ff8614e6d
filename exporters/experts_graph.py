"""Expert formulations in the exported graph: the placeholder nodes that ``models.experts`` emits
(domain ``DOMAIN``: ``RoutedExperts`` on token-major rows, ``ExpertSegments`` on rows sorted by
expert) replaced by the nodes of the chosen formulation (``FORMULATIONS``; ``exporters.export(...,
experts=...)`` picks one, ``expand`` rewrites the graph).

- ``ort``: an ``If`` on the routed rows (T·k; the expert-parallel block: its rows); up to
  ``OWN_KERNEL_MAX_ROWS`` of them the library's ``MoeRoutedExperts`` (each selected expert read
  once per call), above it ONNX Runtime's ``com.microsoft.MoE`` contrib op (CPU kernel from ORT
  1.23, also CUDA); both read the same interleaved weights.
  It does its own softmax top-k, so it is fed pseudo-logits that select exactly our experts with
  exactly our weights: ``log(Σ w)`` per chosen expert (a hash table may name an expert twice),
  ``-1e30`` elsewhere; softmax turns that into ``w / Σw``, so the op's output rows are multiplied
  by ``Σw`` afterwards (routed_scaling_factor and unnormalised weights included). A block's shared
  expert of width s·I runs in the same call as s more experts (one slot of weight 1 per token
  each), so one kernel reads all the block's expert weights. Gate/up rows are interleaved
  (``swiglu_fusion=1``), ``activation_alpha=1, activation_beta=0``; DeepSeek-V4's clamp is the op's
  ``swiglu_limit`` (the same asymmetric clamp). The op runs in float32 for every block dtype (no
  bfloat16 kernel; the float16 kernel is wrong on ORT 1.23): float16 / bfloat16 weights are cast
  once, at session creation, and the output is rounded once.
- ``onnx``: standard ONNX ops only (any runtime): sort the T·k routed rows by expert (TopK), then
  one ``If`` per expert, in expert order: an expert that received rows runs on its contiguous
  segment with MatMuls on its own initializers, read in place (ONNX has no view of one expert of a
  stacked weight, so a ``Loop`` would have to copy it out with ``Gather``); one without rows gives
  an empty block; the blocks are concatenated and the rows put back in order. One graph serves
  decode and prefill; no buffer grows with E·C.
- ``padded``: zero-padded ``[E, C, H]`` buckets (C = the largest expert load), kept for comparison
  in the benchmarks; never the default.

This module knows nothing of the project's blocks: ``using`` switches any submodule that has an
``experts_formulation`` attribute. docs/models.md has the formulations' measurements.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from ascend_moe_onnx.onnx_schemas._common import DOMAIN as OWN_DOMAIN
from ascend_moe_onnx.onnx_schemas._common import walk_graphs
from ascend_moe_onnx.onnx_schemas.moe_routed_experts import OP_TYPE as OWN_KERNEL_OP

from . import ge_chain, quantized_chain
from .experts_builder import Builder, ExpertsError, node_attributes, refuse_biased, stored_arrays

if TYPE_CHECKING:
    from .weights_quant import WeightsQuant

FORMULATIONS = ("ort", "onnx", "padded")
DEFAULT = "ort"
DOMAIN = "ascend.moe.experts"  # placeholder nodes only; never left in an exported model
OP_ROUTED, OP_SEGMENTS = "RoutedExperts", "ExpertSegments"
_NEVER = -1e30  # pseudo-logit of the experts a row did not choose
# ``ort``: routed rows (T·k) up to which the library's MoeRoutedExperts runs instead of ORT's MoE op
# (where the two cross in benchmarks/experts_threshold.py; docs/models.md has the figures).
OWN_KERNEL_MAX_ROWS = 2048


def check(formulation: str) -> str:
    """``formulation`` if known, else an ExpertsError naming the known ones."""
    if formulation not in FORMULATIONS:
        raise ExpertsError(f"experts: unknown formulation '{formulation}' (known: {', '.join(FORMULATIONS)})")
    return formulation


@contextlib.contextmanager
def using(module: torch.nn.Module, formulation: str | None) -> Iterator[torch.nn.Module]:
    """Inside the block, every submodule with an ``experts_formulation`` uses ``formulation``
    (None: keep theirs); restored on exit."""
    if formulation is None:
        yield module
        return
    check(formulation)
    owners = [m for m in module.modules() if hasattr(m, "experts_formulation")]
    before = [m.experts_formulation for m in owners]
    for m in owners:
        m.experts_formulation = formulation  # type: ignore[assignment]  # torch's stub: Module attributes are tensors or modules
    try:
        yield module
    finally:
        for m, f in zip(owners, before):
            m.experts_formulation = f


def _swiglu_nodes(b: Builder, x: str, project, a: dict) -> str:
    """SwiGLU on rows ``x``; ``project(rows, which)`` is ``rows`` through the expert's ``gate``,
    ``up`` or ``down`` projection. Every result rounded to the block dtype when it is bfloat16
    (models.layers)."""
    bf16 = a["dtype"] == TensorProto.BFLOAT16
    compute = TensorProto.FLOAT if bf16 else a["dtype"]

    def rnd(v):
        return b.cast(b.cast(v, TensorProto.BFLOAT16), TensorProto.FLOAT) if bf16 else v

    g, u = rnd(project(x, "gate")), rnd(project(x, "up"))
    act_fp32 = a["act_fp32"] and compute != TensorProto.FLOAT
    if act_fp32:
        g, u = b.cast(g, TensorProto.FLOAT), b.cast(u, TensorProto.FLOAT)
    limit = a["limit"]
    if limit:
        ftype = TensorProto.FLOAT if act_fp32 else compute
        npt = np.float32 if ftype == TensorProto.FLOAT else np.float16
        u = b.op("Clip", [u, b.const(-limit, npt), b.const(limit, npt)])
        g = b.op("Min", [g, b.const(limit, npt)])
    silu = b.op("Mul", [g, b.op("Sigmoid", [g])])
    if act_fp32:
        h = b.cast(b.op("Mul", [silu, u]), compute)
    elif a["act_fp32"]:  # bfloat16 emulation: the activation is rounded once
        h = rnd(b.op("Mul", [silu, u]))
    else:
        h = rnd(b.op("Mul", [rnd(silu), u]))
    return rnd(project(h, "down"))


def _weights(b: Builder, gate: str, up: str, down: str, a: dict, to: int, shared=(), slices: int = 0):
    """Stacked expert weights in the MoE layout both `ort` branches read: fc1 [E, 2I, H] with gate/up
    rows interleaved, fc2 [E, H, I] as stored. ``shared``: the shared expert's (gate [sI, H], up,
    down [H, sI]), appended as ``slices`` = s more experts (``shared_slices``).

    Written as new initializers when the weights are initializers (always, for exported blocks):
    ONNX Runtime 1.27+ does not constant-fold results over 1 GiB, so layout nodes on a full-size
    block's weights would run again on every call. Otherwise (weights fed at run time) as nodes."""
    arrays = stored_arrays(b, (gate, up, down, *shared))
    if arrays is not None:
        g, u, d, *sh = (x.astype(helper.tensor_dtype_to_np_dtype(to), copy=False) for x in arrays)
        if sh:
            s, (_, I, H) = slices, g.shape
            g = np.concatenate((g, sh[0].reshape(s, I, H)))
            u = np.concatenate((u, sh[1].reshape(s, I, H)))
            d = np.concatenate((d, sh[2].reshape(H, s, I).transpose(1, 0, 2)))
        fc1 = np.stack((g, u), axis=2).reshape(g.shape[0], -1, g.shape[2])
        return b.initializer(fc1, "fc1"), down if d is arrays[2] else b.initializer(d, "fc2")
    if a["dtype"] != to:
        gate, up, down, *shared = (b.cast(t, to) for t in (gate, up, down, *shared))
    if shared:
        i_dim, h_dim = (b.dims(gate, i, i + 1) for i in (1, 2))
        s_dim = b.const([slices])
        gate, up = (b.op("Concat", [w, b.op("Reshape", [sw, b.op("Concat", [s_dim, i_dim, h_dim], axis=0)])], axis=0)
                    for w, sw in ((gate, shared[0]), (up, shared[1])))
        per_slice = b.op("Transpose", [b.op("Reshape", [shared[2], b.op("Concat", [h_dim, s_dim, i_dim], axis=0)])],
                         perm=[1, 0, 2])
        down = b.op("Concat", [down, per_slice], axis=0)
    pair = b.op("Concat", [b.op("Unsqueeze", [gate, b.const([2])]), b.op("Unsqueeze", [up, b.const([2])])], axis=2)
    shape = b.op("Concat", [b.op("Shape", [gate], start=0, end=1), b.const([-1]),
                            b.op("Shape", [gate], start=2, end=3)], axis=0)
    return b.op("Reshape", [pair, shape]), down


def _glu_attributes(a: dict) -> dict:
    """MoeRoutedExperts' activation_alpha / activation_beta of a placeholder's attributes (only
    where not SiLU's, so the nodes of every other block stay as they were)."""
    if "alpha" not in a:
        return {}
    return {"activation_alpha": float(a["alpha"]), "activation_beta": float(a["beta"])}


def _split_inputs(node, a: dict) -> tuple[list, list]:
    """A routed placeholder's inputs after down: (biases: gate [E, I], up [E, I], down [E, H] or
    none, the shared expert's weights or none)."""
    rest = list(node.input[6:])
    return (rest[:3], rest[3:]) if a.get("biased") else ([], rest)


def _bias_inputs(b: Builder, biases: list) -> tuple[str, str]:
    """(gate_up_bias [E, 2I] interleaved like the rows, down_bias [E, H]) in float32 from the
    placeholder's (gate [E, I], up [E, I], down [E, H]): new initializers where they are ones."""
    arrays = stored_arrays(b, biases)
    if arrays is not None:
        g, u, d = (x.astype(np.float32, copy=False) for x in arrays)
        return b.initializer(np.stack((g, u), axis=2).reshape(g.shape[0], -1), "fc1_bias"), b.initializer(d, "fc2_bias")
    gate, up, down = (b.cast(t, TensorProto.FLOAT) for t in biases)
    pair = b.op("Concat", [b.op("Unsqueeze", [gate, b.const([2])]), b.op("Unsqueeze", [up, b.const([2])])], axis=2)
    shape = b.op("Concat", [b.op("Shape", [gate], start=0, end=1), b.const([-1])], axis=0)
    return b.op("Reshape", [pair, shape]), down


def _ort_moe(b: Builder, x: str, pseudo: str, fc1: str, fc2: str, k: int, a: dict, outputs=None,
             biases: tuple[str, str] = ("", "")) -> str:
    """``com.microsoft.MoE`` in float32 on float32 rows ``x`` with float32 ``pseudo``-logits and the
    interleaved weights ``fc1`` / ``fc2`` (``_weights``) and optional ``biases`` (``_bias_inputs``)
    -> float32 rows."""
    glu = _glu_attributes(a)
    attrs: dict[str, Any] = dict(k=k, activation_type="swiglu", swiglu_fusion=1,
                                 activation_alpha=glu.get("activation_alpha", 1.0),
                                 activation_beta=glu.get("activation_beta", 0.0), normalize_routing_weights=0)
    if a["limit"]:
        attrs["swiglu_limit"] = float(a["limit"])
    return b.op("MoE", [x, pseudo, fc1, biases[0], fc2, biases[1]] if biases[0] else [x, pseudo, fc1, "", fc2],
                domain="com.microsoft", outputs=outputs, **attrs)


def _own_inputs(rows: str, idx: str, weights: str, fc1: str, fc2: str, biases: tuple[str, str] = ("", ""),
                scales: tuple[str, str] = ("", "")) -> list[str]:
    """MoeRoutedExperts' inputs: the routed rows, the weights, and the optional scales and biases
    (absent middle inputs as "", trailing ones dropped)."""
    inputs = [rows, idx, weights, fc1, fc2, *scales, *biases]
    while inputs[-1] == "":
        inputs.pop()
    return inputs


def _float_rows(b: Builder, x: str, a: dict) -> str:
    """The rows in float32 (bfloat16 blocks already hand their experts float32 rows)."""
    return x if a["dtype"] in (TensorProto.FLOAT, TensorProto.BFLOAT16) else b.cast(x, TensorProto.FLOAT)


def _branch(b: Builder, name: str, output: str, elem_type: int = TensorProto.FLOAT) -> onnx.GraphProto:
    """The nodes of ``b`` as an ``If`` branch whose one output is ``output`` (float32 by default)."""
    return helper.make_graph(b.nodes, name, [], [helper.make_tensor_value_info(output, elem_type, None)])


def _own_kernel_or_moe(b: Builder, rows: str, idx: str, weights: str, fc1: str, fc2: str, a: dict,
                       moe: Builder, moe_out: str, outputs: list, routed: str | None = None,
                       biases: tuple[str, str] = ("", "")) -> None:
    """An ``If`` on the routed rows (the size of ``routed``, by default ``idx``; the shared
    expert's slots do not count, as in the measured threshold): up to ``OWN_KERNEL_MAX_ROWS`` the
    library's MoeRoutedExperts on ``rows`` / ``idx`` / ``weights`` (reads each selected expert once,
    at the memory's rate), above it the ``moe`` branch (``com.microsoft.MoE``, ``moe_out``). Both
    read the same interleaved weights ``fc1`` / ``fc2``."""
    from ascend_moe_onnx import onnx_schemas

    own = Builder(b.prefix + "own_")
    own_out = own.op(OWN_KERNEL_OP, _own_inputs(rows, idx, weights, fc1, fc2, biases), domain=onnx_schemas.DOMAIN,
                     swiglu_limit=float(a["limit"]), **_glu_attributes(a))
    small = b.op("LessOrEqual", [b.op("Size", [routed or idx]), b.const(OWN_KERNEL_MAX_ROWS)])
    b.op("If", [small], outputs=outputs, then_branch=_branch(own, "own_kernel", own_out),
         else_branch=_branch(moe, "ort_moe", moe_out))


def _expand_routed_ort(b: Builder, node) -> None:
    """MoeRoutedExperts or, past ``OWN_KERNEL_MAX_ROWS`` routed rows, ``com.microsoft.MoE`` on
    pseudo-logits (``_own_kernel_or_moe``)."""
    a = node_attributes(node)
    x, w, idx, gate, up, down = node.input[:6]
    bias_in, shared = _split_inputs(node, a)
    routed = idx
    wf = b.cast(w, TensorProto.FLOAT)
    E, slices = a["experts"], a.get("shared_slices", 0)
    k = a["k"] + slices
    if shared:  # s more experts E .. E+s-1, one slot of weight 1 per token each (folds_shared)
        rows_s = b.op("Concat", [b.op("Shape", [x], start=0, end=1), b.const([slices])], axis=0)
        ids = b.op("Expand", [b.const([list(range(E, E + slices))]), rows_s])
        idx = b.op("Concat", [b.cast(idx, TensorProto.INT64), ids], axis=1)
        wf = b.op("Concat", [wf, b.op("ConstantOfShape", [rows_s], value=helper.make_tensor(
            "one", TensorProto.FLOAT, [1], [1.0]))], axis=1)
    xin = _float_rows(b, x, a)
    biases = _bias_inputs(b, bias_in) if bias_in else ("", "")
    if b.weights_quant is not None:
        _quantized_experts(b, xin, idx, wf, gate, up, down, shared, slices, a, node.output[0], biases)
        return
    fc1, fc2 = _weights(b, gate, up, down, a, TensorProto.FLOAT, shared, slices)
    moe = Builder(b.prefix + "moe_")
    shape = moe.op("Concat", [moe.op("Shape", [x], start=0, end=1), moe.const([E + slices])], axis=0)
    zeros = moe.op("ConstantOfShape", [shape], value=helper.make_tensor("z", TensorProto.FLOAT, [1], [0.0]))
    summed = moe.op("ScatterElements", [zeros, moe.cast(idx, TensorProto.INT64), wf], axis=1, reduction="add")
    pseudo = moe.op("Max", [moe.op("Log", [summed]), moe.const(_NEVER, np.float32)])
    y = _ort_moe(moe, xin, pseudo, fc1, fc2, k, a, biases=biases)
    total = moe.op("ReduceSum", [wf, moe.const([1])], keepdims=1)
    _own_kernel_or_moe(b, xin, idx, wf, fc1, fc2, a, moe, moe.op("Mul", [y, total]), [node.output[0]], routed,
                       biases)


def _shared_as_experts(b: Builder, shared, slices: int) -> tuple[str, str]:
    """The shared expert (gate [sI, H], up [sI, H], down [H, sI] initializers) as ``slices`` = s
    experts of width I in MoeRoutedExperts' layout: new float32 initializers fc1 [s, 2I, H] (gate/up
    rows interleaved) and fc2 [s, H, I]."""
    arrays = stored_arrays(b, shared)
    if arrays is None:
        raise ExpertsError("experts: the CANN target needs the shared expert's weights as in-memory initializers")
    g, u, d = (x.astype(np.float32, copy=False) for x in arrays)
    S, H = g.shape
    I = S // slices
    g, u = g.reshape(slices, I, H), u.reshape(slices, I, H)
    fc1 = np.stack((g, u), axis=2).reshape(slices, 2 * I, H)
    fc2 = d.reshape(H, slices, I).transpose(1, 0, 2)
    return b.initializer(fc1, "shared_fc1"), b.initializer(fc2, "shared_fc2")


def _expand_routed_cann(b: Builder, node) -> None:
    """The CANN target: MoeRoutedExperts on the routed rows at every size (no If, no
    ``com.microsoft.MoE``: the CANN EP has no kernel for either). A shared expert of width s·I is a
    second MoeRoutedExperts call over s experts whose slots (expert j, weight 1) are built from x's
    shape alone, added to the routed sum: every node but that shape bookkeeping has a CANN kernel,
    and no routed data leaves the device (docs/ascend.md)."""
    a = node_attributes(node)
    x, w, idx, gate, up, down = node.input[:6]
    bias_in, shared = _split_inputs(node, a)
    fc1, fc2 = _weights(b, gate, up, down, a, TensorProto.FLOAT)
    xin = _float_rows(b, x, a)
    wf = b.cast(w, TensorProto.FLOAT)
    limit = float(a["limit"])
    out = node.output[0]
    biases = _bias_inputs(b, bias_in) if bias_in else ("", "")
    routed = b.op(OWN_KERNEL_OP, _own_inputs(xin, idx, wf, fc1, fc2, biases), domain=OWN_DOMAIN,
                  swiglu_limit=limit, outputs=None if shared else [out], **_glu_attributes(a))
    if not shared:
        return
    slices = a["shared_slices"]
    sfc1, sfc2 = _shared_as_experts(b, shared, slices)
    rows_s = b.op("Concat", [b.op("Shape", [x], start=0, end=1), b.const([slices])], axis=0)
    ids = b.op("Expand", [b.const([list(range(slices))]), rows_s])
    ones = b.op("ConstantOfShape", [rows_s], value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))
    y_shared = b.op(OWN_KERNEL_OP, [xin, ids, ones, sfc1, sfc2], domain=OWN_DOMAIN, swiglu_limit=limit)
    b.op("Add", [routed, y_shared], outputs=[out])


def _quantized_experts(b: Builder, rows: str, idx: str, weights: str, gate: str, up: str, down: str, shared,
                       slices: int, a: dict, output: str, biases: tuple[str, str] = ("", "")) -> None:
    """MoeRoutedExperts on the block's expert weights quantized as ``b.weights_quant`` says (the
    shared expert's s slices as s more experts), at every routed-row count: one copy of the
    quantized weights, read in place by the library's kernel (docs/quantization.md)."""
    from ascend_moe_onnx import onnx_schemas

    wq = b.weights_quant
    assert wq is not None  # the caller takes this path only for quantized weights
    arrays = stored_arrays(b, (gate, up, down, *shared))
    if arrays is None:
        raise ExpertsError("experts: --weights-quant needs the expert weights as in-memory initializers")
    arrays = [x.astype(np.float32, copy=False) for x in arrays]
    (gq, gs), (uq, us), (dq, ds) = (wq.quantized(w) for w in arrays[:3])
    if shared:
        s, (_, I, H) = slices, arrays[0].shape
        sg, su, sd = arrays[3:]
        extra = [wq.quantized(sg, sg.reshape(s, I, H)), wq.quantized(su, su.reshape(s, I, H)),
                 wq.quantized(sd, sd.reshape(H, s, I).transpose(1, 0, 2))]
        (gq, gs), (uq, us), (dq, ds) = ((np.concatenate((q, eq)),
                                         None if sc is None or es is None else np.concatenate((sc, es)))
                                        for (q, sc), (eq, es) in zip(((gq, gs), (uq, us), (dq, ds)), extra))

    def interleave(g, u):  # gate row i, up row i, ... ([E, I, ...] twice -> [E, 2I, ...])
        return np.stack((g, u), axis=2).reshape(g.shape[0], -1, *g.shape[2:])

    if wq.bfloat16:  # bfloat16 weights, no scales: the op's bfloat16 products
        inputs = _own_inputs(rows, idx, weights, b.initializer(interleave(gq, uq), "fc1_bf16"),
                             b.initializer(dq, "fc2_bf16"), biases)
        b.op(OWN_KERNEL_OP, inputs, domain=onnx_schemas.DOMAIN, outputs=[output], swiglu_limit=float(a["limit"]),
             **_glu_attributes(a))
        return
    assert ds is not None  # integers come with their scales (WeightsQuant.encode)
    if wq.act_quant and (biases[0] or _glu_attributes(a)):
        raise ExpertsError("experts: act_quant 1 (W8A8 / W4A8) takes no expert biases and only SiLU; these experts "
                           "have biases or g sigmoid(alpha g) (u + beta) (gpt-oss): quantize their weights only")
    inputs = _own_inputs(rows, idx, weights, b.initializer(interleave(gq, uq), "fc1_q"), b.initializer(dq, "fc2_q"),
                         biases, (b.initializer(interleave(gs, us), "fc1_scales"), b.initializer(ds, "fc2_scales")))
    b.op(OWN_KERNEL_OP, inputs, domain=onnx_schemas.DOMAIN, outputs=[output], swiglu_limit=float(a["limit"]),
         weight_bits=wq.bits, block_size=wq.block_size, **({"act_quant": 1} if wq.act_quant else {}),
         **_glu_attributes(a))


def _expand_segments_ort(b: Builder, node) -> None:
    """Each row through its segment's expert: MoeRoutedExperts with one slot of weight 1 per row
    or, past ``OWN_KERNEL_MAX_ROWS`` rows, ``com.microsoft.MoE`` on one-hot pseudo-logits."""
    a = node_attributes(node)
    x, counts, gate, up, down = node.input
    ends = b.op("CumSum", [b.cast(counts, TensorProto.INT64), b.const(0)])
    rows = b.op("Range", [b.const(0), b.op("Squeeze", [b.op("Shape", [x], start=0, end=1)]), b.const(1)])
    # expert of row r = number of segment ends <= r ([A, E] compare: E is a rank's few local experts)
    expert = b.op("ReduceSum", [b.cast(b.op("GreaterOrEqual", [b.op("Unsqueeze", [rows, b.const([1])]),
                                                             b.op("Unsqueeze", [ends, b.const([0])])]),
                                       TensorProto.INT64), b.const([1])], keepdims=1)
    ones = b.op("ConstantOfShape", [b.op("Shape", [expert])],
                value=helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0]))
    fc1, fc2 = _weights(b, gate, up, down, a, TensorProto.FLOAT)
    xin = _float_rows(b, x, a)
    moe = Builder(b.prefix + "moe_")
    shape = moe.op("Concat", [moe.op("Shape", [x], start=0, end=1), b.dims(gate, 0, 1)], axis=0)
    never = moe.op("ConstantOfShape", [shape], value=helper.make_tensor("n", TensorProto.FLOAT, [1], [_NEVER]))
    zero = moe.op("ConstantOfShape", [moe.op("Shape", [expert])],
                  value=helper.make_tensor("z", TensorProto.FLOAT, [1], [0.0]))
    pseudo = moe.op("ScatterElements", [never, expert, zero], axis=1)  # one-hot: weight 1, k = 1
    moe_out = _ort_moe(moe, xin, pseudo, fc1, fc2, 1, a)
    y = b.name("y")
    _own_kernel_or_moe(b, xin, expert, ones, fc1, fc2, a, moe, moe_out, [y])
    if a["dtype"] == TensorProto.FLOAT16:  # back to the rows' dtype (bfloat16 blocks compute in float32)
        b.op("Cast", [y], to=TensorProto.FLOAT16, outputs=[node.output[0]])
    else:
        b.op("Identity", [y], outputs=[node.output[0]])


def _expert_weights(b: Builder, gate: str, up: str, down: str, a: dict, to: int, experts: int) -> dict:
    """``gate`` / ``up`` / ``down`` ([E, N, K], torch's layout) as one MatMul-layout matrix [K, N]
    per expert: name -> list of E names. New initializers when the weights are in-memory
    initializers (as in ``_weights``), else Gather + Transpose nodes per expert (constant-folded by
    ONNX Runtime at session creation)."""
    arrays = stored_arrays(b, (gate, up, down))
    out = {}
    for i, (which, w) in enumerate((("gate", gate), ("up", up), ("down", down))):
        if arrays is not None:
            arr = arrays[i].astype(helper.tensor_dtype_to_np_dtype(to), copy=False)
            out[which] = [b.initializer(arr[e].T, f"w_{which}") for e in range(experts)]
            continue
        full = w if a["dtype"] == to else b.cast(w, to)
        out[which] = [b.op("Transpose", [b.op("Gather", [full, b.const(e)])], perm=[1, 0]) for e in range(experts)]
    return out


def _segment_unrolled(b: Builder, xs: str, counts: str, weights: dict, a: dict, compute: int) -> str:
    """One ``If`` per expert, in expert order: an expert with rows runs on its segment [start_e,
    end_e) of ``xs`` with its own weights (``_expert_weights``: MatMul reads the initializer in
    place, no copy), an expert without rows gives a [0, H] block; the blocks are concatenated
    (rows stay in ``xs`` order)."""
    ends = b.op("CumSum", [counts, b.const(0)])
    starts = b.op("Sub", [ends, counts])
    active = b.op("Greater", [counts, b.const(0)])
    empty = b.op("Slice", [xs, b.const([0]), b.const([0]), b.const([0])])  # [0, H]
    parts = []
    for e in range(len(weights["gate"])):
        run = Builder(f"{b.prefix}e{e}_")
        at = (run.const([e]), run.const([e + 1]))
        seg = run.op("Slice", [xs, run.op("Slice", [starts, *at]), run.op("Slice", [ends, *at]), run.const([0])])
        y = _swiglu_nodes(run, seg, lambda rows, which, run=run, e=e: run.op("MatMul", [rows, weights[which][e]]), a)
        skip = Builder(f"{b.prefix}s{e}_")
        none = skip.op("Identity", [empty])
        parts.append(b.op("If", [b.op("Gather", [active, b.const(e)])],
                          then_branch=_branch(run, f"expert{e}", y, compute),
                          else_branch=_branch(skip, f"no_rows{e}", none, compute)))
    return b.op("Concat", parts, axis=0)


def _expand_routed_onnx(b: Builder, node) -> None:
    refuse_biased(node, "the 'onnx' formulation")
    a = node_attributes(node)
    x, w, idx, gate, up, down = node.input
    bf16 = a["dtype"] == TensorProto.BFLOAT16
    compute = TensorProto.FLOAT if bf16 else a["dtype"]
    k = a["k"]
    weights = _expert_weights(b, gate, up, down, a, compute, a["experts"])
    flat = b.op("Reshape", [b.cast(idx, TensorProto.INT64), b.const([-1])])
    P = b.op("Size", [flat])
    # sort the (token, slot) rows by expert; row p = token p // k
    order = b.op("TopK", [flat, b.op("Reshape", [P, b.const([1])])], n_out=2, largest=0, sorted=1)[1]
    xs = b.op("Gather", [x, b.op("Div", [order, b.const(k)])])  # [P, H]
    counts = b.op("ScatterElements", [b.const(np.zeros(a["experts"])), flat,
                                      b.op("Expand", [b.const(1), b.op("Shape", [flat])])], axis=0, reduction="add")
    ys = _segment_unrolled(b, xs, counts, weights, a, compute)
    inv = b.op("ScatterElements", [order, order, b.op("Range", [b.const(0), P, b.const(1)])], axis=0)
    y = b.op("Gather", [ys, inv])
    yk = b.op("Reshape", [b.cast(y, TensorProto.FLOAT) if compute != TensorProto.FLOAT else y,
                          b.op("Concat", [b.const([-1, k]), b.op("Shape", [x], start=1, end=2)], axis=0)])
    wk = b.op("Unsqueeze", [b.cast(w, TensorProto.FLOAT), b.const([2])])
    summed = b.op("ReduceSum", [b.op("Mul", [yk, wk]), b.const([1])], keepdims=1)
    b.op("Squeeze", [summed, b.const([1])], outputs=[node.output[0]])


def _expand_segments_onnx(b: Builder, node) -> None:
    a = node_attributes(node)
    x, counts, gate, up, down = node.input
    compute = TensorProto.FLOAT if a["dtype"] == TensorProto.BFLOAT16 else a["dtype"]
    weights = _expert_weights(b, gate, up, down, a, compute, a["experts"])
    y = _segment_unrolled(b, x, b.cast(counts, TensorProto.INT64), weights, a, compute)
    b.op("Identity", [y], outputs=[node.output[0]])


@dataclass(frozen=True)
class Expansion:
    """How a placeholder op (``OP_ROUTED``, ``OP_SEGMENTS``) is written in one formulation for one
    target, and whether it takes quantized expert weights (``expand_quantized``; None: it does not)."""

    op_type: str
    formulation: str
    target: str  # exporters.targets: "cpu" serves every target without an expansion of its own
    expand: Callable[[Builder, onnx.NodeProto], None]
    expand_quantized: Callable[[Builder, onnx.NodeProto], None] | None = None


# The formulation × target × quantization matrix, in one place. ``padded`` has no expansion: the
# blocks compute it in torch (models.layers.GroupedExperts), never through a placeholder.
ROUTED_ORT = Expansion(OP_ROUTED, "ort", "cpu", _expand_routed_ort, expand_quantized=_expand_routed_ort)
ROUTED_ONNX = Expansion(OP_ROUTED, "onnx", "cpu", _expand_routed_onnx)
SEGMENTS_ORT = Expansion(OP_SEGMENTS, "ort", "cpu", _expand_segments_ort)
SEGMENTS_ONNX = Expansion(OP_SEGMENTS, "onnx", "cpu", _expand_segments_onnx)
# the CANN EP's: no If and no com.microsoft.MoE; quantized weights as the op family's chain
ROUTED_ORT_CANN = Expansion(OP_ROUTED, "ort", "cann", _expand_routed_cann,
                            expand_quantized=quantized_chain.expand_routed_quantized_cann)
# the graph engine's: the op family's chain (quantized weights refused there, saying why)
ROUTED_ORT_GE = Expansion(OP_ROUTED, "ort", "ge", ge_chain.expand_routed_ge, expand_quantized=ge_chain.expand_routed_ge)
SEGMENTS_ORT_GE = Expansion(OP_SEGMENTS, "ort", "ge", ge_chain.expand_segments_ge,
                            expand_quantized=ge_chain.expand_segments_ge)
EXPANSIONS = {(e.op_type, e.formulation, e.target): e
              for e in (ROUTED_ORT, ROUTED_ONNX, SEGMENTS_ORT, SEGMENTS_ONNX, ROUTED_ORT_CANN, ROUTED_ORT_GE,
                        SEGMENTS_ORT_GE)}


def expansion(op_type: str, formulation: str, target: str, quantized: bool) -> Callable:
    """The expander of a placeholder ``op_type`` node in ``formulation`` for ``target``, or an
    ExpertsError naming what is not supported."""
    e = EXPANSIONS.get((op_type, formulation, target)) or EXPANSIONS.get((op_type, formulation, "cpu"))
    if e is None:
        raise ExpertsError(f"experts: no '{formulation}' formulation for {op_type}")
    if not quantized:
        return e.expand
    if e.expand_quantized is None:
        raise ExpertsError(f"experts: quantized expert weights run in the 'ort' formulation of routed "
                           f"blocks only, not in '{formulation}' {op_type}")
    return e.expand_quantized


def expand(model: onnx.ModelProto, target: str = "cpu", weights_quant: WeightsQuant | None = None) -> onnx.ModelProto:
    """Replace every placeholder node of ``DOMAIN`` by its formulation's nodes (in place; returned);
    ``target`` "cann" takes the CANN EP's variant of a formulation where one exists, "ge" the op
    family's chain for routed blocks (exporters.ge_chain).
    ``weights_quant`` (exporters.weights_quant.WeightsQuant): the routed blocks' expert weights
    are stored quantized (``ort`` formulation only; for "cann" the op family's chain in the block's
    16-bit dtype, exporters.quantized_chain).

    Adds the ``com.microsoft`` opset import when a ``com.microsoft.MoE`` node is emitted and the
    ascend.moe import for MoeRoutedExperts, and removes the placeholder domain's import."""
    graph = model.graph
    if not any(n.domain == DOMAIN for n in graph.node):
        return model
    initializers = {t.name: t for t in graph.initializer}
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.value_info, *graph.output)}
    nodes, new_initializers, uses_ms, uses_own, widened = [], [], False, False, {}
    for count, node in enumerate(graph.node):
        if node.domain != DOMAIN:
            nodes.append(node)
            continue
        a = node_attributes(node)
        formulation = a["formulation"].decode() if isinstance(a["formulation"], bytes) else a["formulation"]
        expander = expansion(node.op_type, formulation, target, quantized=weights_quant is not None)
        b = Builder(f"experts{count}_", initializers, weights_quant, types)
        expander(b, node)
        widened.update(b.widened)
        nodes.extend(b.nodes)
        new_initializers.extend(b.new_initializers)
        emitted = {n.domain for g in walk_graphs(helper.make_graph(b.nodes, "b", [], [])) for n in g.node}
        uses_ms |= "com.microsoft" in emitted
        uses_own |= OWN_DOMAIN in emitted
    del graph.node[:]
    graph.node.extend(_narrowed_directly(nodes, widened, {o.name for o in graph.output}))
    graph.initializer.extend(new_initializers)
    _drop_unused_initializers(graph)
    imports = [o for o in model.opset_import if o.domain != DOMAIN]
    if uses_ms and not any(o.domain == "com.microsoft" for o in imports):
        imports.append(helper.make_opsetid("com.microsoft", 1))
    if uses_own and not any(o.domain == OWN_DOMAIN for o in imports):
        from ascend_moe_onnx import onnx_schemas

        imports.append(onnx_schemas.opset_import())
    del model.opset_import[:]
    model.opset_import.extend(imports)
    return model


def _narrowed_directly(nodes: list, widened: dict, graph_outputs: set) -> list:
    """``nodes`` with each Cast back to the 16-bit type of a value that ``widened`` names as an exact
    float32 widening replaced by an Identity of the 16-bit value (float32 holds every float16 /
    bfloat16 value, so the pair is the identity), and a widening no one reads any more dropped: the
    CANN EP has no Cast kernel for bfloat16 inputs, an Identity it has."""
    if not widened:
        return nodes
    out = []
    for n in nodes:
        src = widened.get(n.input[0]) if n.op_type == "Cast" and n.domain in ("", "ai.onnx") and n.input else None
        if src is not None and node_attributes(n).get("to") == src[1]:
            n = helper.make_node("Identity", [src[0]], list(n.output), name=n.name)
        out.append(n)
    read = {i for g in walk_graphs(helper.make_graph(out, "g", [], [])) for n in g.node for i in n.input}
    return [n for n in out if not (n.op_type == "Cast" and n.output[0] in widened and n.output[0] not in read
                                   and n.output[0] not in graph_outputs)]


def _names_read(graph: onnx.GraphProto) -> set[str]:
    """Every name a node of ``graph`` or of its subgraphs (Loop/If bodies) reads, plus its outputs."""
    return {o.name for o in graph.output} | {i for g in walk_graphs(graph) for n in g.node for i in n.input}


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    """Drop the weights only the placeholders read (now stored again in their final layout)."""
    used = _names_read(graph)
    kept = [t for t in graph.initializer if t.name in used]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)
