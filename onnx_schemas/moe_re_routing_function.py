"""Pure-ONNX function body of MoeReRouting (docs/operators.md §2.2), specialised for one node.

The attributes are baked in and ``per_token_scales`` is referenced only when the node has it, so
each node gets a small, branch-free graph of standard default-domain ops (opset >= 18). How it
works: the destination row ``d`` lies in block ``k(d)`` = the number of blocks (in expert-major
order) whose inclusive end is <= d, found with one ScatterElements(add) + CumSum over A + 1 slots;
then ``gather_idx[d] = d + src[k] - dst[k]`` and every output is a Gather. A = 0 and zero counts
need no special case. On counts that break docs/operators.md §2.3 a Gather or ScatterElements index falls out
of range and the runtime reports an error (the body does not produce a validation message).

Not bit for bit in two respects: ONNX has no Gather for float8 and a function body cannot branch
on element types, so token rows go through float32 (Cast, Gather, CastLike back). float32 holds
every value of every token type, but
- NaNs of float16 / bfloat16 / float8 tokens come back as the runtime's canonical NaN (payload and
  sign bits are not kept);
- float8e5m2 +-inf comes back as +-57344 (CastLike saturates float8, and ONNX Runtime refuses
  ``saturate=0`` on a cast to any other type, so a type-generic body cannot turn it off).
float32, int8 and uint8 tokens and all scales are copied bit for bit. The C++ kernel moves bytes
and has neither caveat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ._function_body import BodyBuilder, make_function, start_body
from .moe_re_routing import (
    COUNT,
    GATHER,
    INPUT_NAMES,
    OUTPUT_NAMES,
    SCHEMA,
    validate_attributes,
)


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::MoeReRouting`` body for one node's attributes and present inputs.

    The body uses default-domain ops of ``opset`` (18 or newer) and always produces the 4 outputs.
    """
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    tokens, counts, scales = INPUT_NAMES
    out_tokens, out_scales, out_idx, out_etn = OUTPUT_NAMES

    g = BodyBuilder()

    def op(op_type: str, *inputs: str, output: str | None = None, **kw: Any) -> str:
        return g.op(op_type, *inputs, outputs=1 if output is None else [output], **kw)

    const = g.const

    def filled(shape: str, value: int) -> str:
        return op("ConstantOfShape", shape, value=numpy_helper.from_array(np.array([value], np.int64)))

    zero, one, minus_one = const(0, np.int64), const(1, np.int64), const([-1], np.int64)
    axis0 = const([0], np.int64)

    # Block offsets, blocks in destination (expert-major) order k = e * N + r.
    c64 = op("Cast", counts, to=TensorProto.INT64)  # [N, E]
    cnt = op("Reshape", op("Transpose", c64, perm=[1, 0]), minus_one)  # [N*E]
    src_rm = op("CumSum", op("Reshape", c64, minus_one), zero, exclusive=1)  # row-major
    src = op("Reshape", op("Transpose", op("Reshape", src_rm, op("Shape", c64)), perm=[1, 0]), minus_one)
    dst = op("CumSum", cnt, zero, exclusive=1)
    dst_end = op("Add", dst, cnt)
    delta = op("Sub", src, dst)

    # Block of each destination row: k(d) = #{k : dst_end[k] <= d}.
    # Rows travel as float32 (see the module docstring); ONNX Runtime has no Shape kernel for
    # float8 either, so A is read from the float32 copy.
    tokens_f32 = op("Cast", tokens, to=TensorProto.FLOAT)
    # The ranks and dims the body sees that its Reshapes would not refuse (docs/operators.md §2.3):
    # tokens [A, H >= 1], counts with N >= 1 and E >= 1, scales [A] or [A, S]
    checks = [g.check("Equal", g.rank(tokens_f32), 2), g.check("GreaterOrEqual", g.dim(tokens_f32, 1), 1),
              g.check("GreaterOrEqual", g.dim(counts, 0), 1), g.check("GreaterOrEqual", g.dim(counts, 1), 1)]
    if has[scales]:
        s_rank = g.rank(scales)
        checks.append(op("Or", g.check("Equal", s_rank, 1), g.check("Equal", s_rank, 2)))
    tokens_f32 = g.require(tokens_f32, g.all_of(*checks))
    a_1d = op("Shape", tokens_f32, start=0, end=1)  # [A]
    # ScatterElements takes indices in [-(A+1), 0) as counting from the end: a negative count's
    # block end goes to A + 1, out of range, so that negative counts fail instead of routing.
    a_plus_1 = op("Add", a_1d, one)
    dst_end = op("Where", op("Less", cnt, zero), a_plus_1, dst_end)
    marks = op("ScatterElements", filled(a_plus_1, 0), dst_end,
               filled(op("Shape", dst_end), 1), axis=0, reduction="add")  # [A + 1]
    block = op("Slice", op("CumSum", marks, zero), axis0, a_1d)  # [A]
    rows = op("Range", zero, op("Squeeze", a_1d, axis0), one)  # [A]: d
    gather_idx = op("Add", rows, op("Gather", delta, block, axis=0))

    op("CastLike", op("Gather", tokens_f32, gather_idx, axis=0), tokens, output=out_tokens)
    if has[scales]:
        op("Gather", scales, gather_idx, axis=0, output=out_scales)
    else:
        g.empty_float(out_scales)
    if attrs["idx_type"] == GATHER:
        op("Cast", gather_idx, to=TensorProto.INT32, output=out_idx)
    else:  # scatter index: idx[gather_idx[d]] = d
        inverse = op("ScatterElements", filled(a_1d, 0), gather_idx, rows, axis=0)
        op("Cast", inverse, to=TensorProto.INT32, output=out_idx)
    # keepdims=1 + Squeeze: ReduceSum(keepdims=0) with an empty dim gives the wrong shape on ORT <= 1.31.1
    per_expert = op("Squeeze", op("ReduceSum", c64, axis0, keepdims=1), axis0)  # [E]
    if attrs["expert_token_num_type"] != COUNT:
        per_expert = op("CumSum", per_expert, zero)
    op("CastLike", per_expert, counts, output=out_etn)

    return make_function(SCHEMA, attrs, has, g, opset)
