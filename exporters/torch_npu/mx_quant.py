"""torch_npu.npu_dynamic_mx_quant: MX (microscaling) quantisation with e8m0 block scales, as
aclnnDynamicMxQuant defines it (hicann ops-nn ``quant/dynamic_mx_quant``).

Along the last axis, each block of ``block_size`` values ``V`` shares one power-of-two scale:

- ``scale_alg=0`` (OCP MX): ``shared_exp = floor(log2(max|V|)) - emax`` (emax: FLOAT8_E4M3FN 8,
  FLOAT8_E5M2 15, FLOAT4_E2M1 2), clamped to [-127, 127]; an all-zero block gives -127;
- ``scale_alg=1`` (float8 only): ``S = max|V| / DTYPE_MAX`` and ``shared_exp = ceil(log2 S)`` in
  the operator's words (the exponent of S, plus one when its mantissa is non-zero; a subnormal S
  rounds to 2^-126 above 2^-127, else 2^-127), at most 127;

then ``P = cast(V / 2^shared_exp)`` rounding half to even and saturating at the type's largest
finite value (448, 57344, 6). ``mxscale`` holds ``shared_exp + 127`` as uint8 (the e8m0 bits),
shaped ``[..., ceil(ceil(n / block_size) / 2), 2]`` (the block count padded to even with 0).
float8 results are torch float8 tensors; float4_e2m1 results are uint8 with two codes a byte
(element 2i in the low nibble), as torch_npu returns them.

``npu_swiglu_mx_quant`` (aclnnSwigluMxQuant, hicann ops-nn ``quant/swiglu_mx_quant``) is SwiGLU
computed in float32 followed by this quantisation of its result.

Written in torch; exports as standard ONNX (Abs, ReduceMax, Log, Floor, Pow, Div, Clip, Cast to
FLOAT8E4M3FN / FLOAT8E5M2, comparisons and integer arithmetic for the float4 codes).
"""

from __future__ import annotations

import math

import torch

from ._args import describe, require, unsupported

# torch_npu's own dtype codes (c10_npu::DType: ACL type + 256) and torch's ScalarType codes
HIFLOAT8, FLOAT8_E5M2, FLOAT8_E4M3FN, FLOAT8_E8M0, FLOAT4_E2M1, FLOAT4_E1M2 = 290, 291, 292, 293, 296, 297
_SCALAR_TYPE_CODES: dict[int, object] = {23: torch.float8_e5m2, 24: torch.float8_e4m3fn}


class MxFormat:
    """One MX element type: its emax, largest finite value, and the torch dtype of the result."""

    def __init__(self, name: str, emax: int, max_value: float, torch_dtype):
        self.name, self.emax, self.max_value, self.torch_dtype = name, emax, max_value, torch_dtype


E4M3 = MxFormat("float8_e4m3fn", 8, 448.0, torch.float8_e4m3fn)
E5M2 = MxFormat("float8_e5m2", 15, 57344.0, torch.float8_e5m2)
E2M1 = MxFormat("float4_e2m1fn_x2", 2, 6.0, torch.uint8)
# the magnitudes of the float4_e2m1 codes 0..7
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def mx_format(fn: str, dst_type, name: str = "dst_type") -> MxFormat:
    """The MX element type ``dst_type`` (the argument ``name``) names: a torch float8 dtype,
    torch_npu's dtype codes (``torch_npu.float8_e4m3fn`` 292, ``float8_e5m2`` 291,
    ``float4_e2m1fn_x2`` 296) or ScalarType codes (23, 24)."""
    dst: object = dst_type
    if isinstance(dst_type, int) and not isinstance(dst_type, bool):
        dst = _SCALAR_TYPE_CODES.get(dst_type, dst_type)
    if dst in (torch.float8_e4m3fn, FLOAT8_E4M3FN):
        return E4M3
    if dst in (torch.float8_e5m2, FLOAT8_E5M2):
        return E5M2
    if dst in (FLOAT4_E2M1, getattr(torch, "float4_e2m1fn_x2", FLOAT4_E2M1)):
        return E2M1
    if dst == FLOAT4_E1M2:
        unsupported(fn, name, dst_type, "float4_e1m2 has no ONNX element type and no MoE path uses it; "
                    "use float4_e2m1fn_x2 or a float8 type")
    if dst == HIFLOAT8:
        unsupported(fn, name, dst_type, "hifloat8 has no ONNX element type")
    raise ValueError(f"{fn}: argument '{name}' must be float8_e4m3fn, float8_e5m2 or float4_e2m1fn_x2 "
                     f"(torch_npu codes 292, 291, 296), got {describe(dst_type)}")


def floor_log2(a: torch.Tensor) -> torch.Tensor:
    """Exact ``floor(log2(a))`` (float32) of positive float32 ``a``: log2 corrected by powers of two,
    which are exact, so that a value within an ulp of a power of two lands on the right side."""
    e = torch.floor(torch.log2(a))
    p = torch.pow(2.0, e)
    e = e - (p > a).to(e.dtype)
    return e + (2.0 * torch.pow(2.0, e) <= a).to(e.dtype)


def shared_exponents(amax: torch.Tensor, fmt: MxFormat, scale_alg: int) -> torch.Tensor:
    """float32 block exponents in [-127, 127] from the blocks' max |V| (float32)."""
    positive = amax > 0
    safe = torch.where(positive, amax, torch.ones_like(amax))
    if scale_alg == 0:
        e = floor_log2(safe) - fmt.emax
    else:
        s = safe / fmt.max_value
        e = floor_log2(s)
        e = e + (torch.pow(2.0, e) < s).to(e.dtype)  # round the exponent up unless S is a power of two
        # subnormal S (below 2^-126): 2^-126 when S > 2^-127, else 2^-127
        tiny = s < 2.0 ** -126
        e = torch.where(tiny, torch.where(s > 2.0 ** -127, torch.full_like(e, -126.0), torch.full_like(e, -127.0)), e)
    e = torch.where(positive, e, torch.full_like(e, -127.0))
    return e.clamp(-127.0, 127.0)


def e2m1_codes(v: torch.Tensor) -> torch.Tensor:
    """int32 float4_e2m1 codes (sign bit 8) of float32 ``v``: nearest magnitude, ties to the even
    code, saturating at 6; a negative value keeps its sign bit when it rounds to 0, as a cast does."""
    a = v.abs().clamp(max=6.0)
    # spacing 0.5 below 2, 1 in [2, 4), 2 in [4, 6]: round half to even on that grid is the
    # tie-to-even-mantissa rounding of the format
    step = torch.where(a < 2.0, torch.full_like(a, 0.5), torch.where(a < 4.0, torch.ones_like(a),
                                                                    torch.full_like(a, 2.0)))
    q = torch.round(a / step) * step
    code = torch.zeros_like(q, dtype=torch.int32)
    for value in E2M1_VALUES[1:]:
        code = code + (q >= value).to(torch.int32)
    return code + 8 * (v < 0).to(torch.int32)


def npu_dynamic_mx_quant(input, *, axis=-1, round_mode="rint", dst_type=FLOAT4_E2M1, block_size=32, scale_alg=0,
                         dst_type_max=0.0, max_low_bound=0.0):
    """torch_npu.npu_dynamic_mx_quant: ``(y, mxscale uint8 [..., ceil(n / block_size / 2), 2])``
    along the last axis (module docstring)."""
    fn = "npu_dynamic_mx_quant"
    x = input
    fmt = mx_format(fn, dst_type)
    require(isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16, torch.float32), fn, "input",
            "must be a float16, bfloat16 or float32 tensor", x)
    dims = x.dim()
    require(dims >= 1, fn, "input", "must have at least 1 dim", x)
    require(-dims <= axis < dims, fn, "axis", lambda: f"must be in [{-dims}, {dims - 1}]", axis)
    if axis % dims != dims - 1:
        unsupported(fn, "axis", axis, "only the last axis exports here (the MoE paths quantise along it; "
                    "other axes interleave the scale rows)")
    require(block_size > 0 and block_size % 32 == 0 and block_size <= 1024, fn, "block_size",
            "must be a multiple of 32 in [32, 1024]", block_size)
    scale_alg = 0 if scale_alg is None else scale_alg
    require(scale_alg in (0, 1, 2), fn, "scale_alg", "must be 0, 1 or 2", scale_alg)
    if scale_alg == 2:
        unsupported(fn, "scale_alg", scale_alg, "only 0 (OCP) and 1 (rounded-up exponent) export here")
    require(not (scale_alg == 1 and fmt is E2M1), fn, "scale_alg", "must be 0 for float4 outputs", scale_alg)
    if round_mode != "rint":
        unsupported(fn, "round_mode", round_mode, "only 'rint' (round half to even) exports here")
    if dst_type_max not in (0, 0.0) or max_low_bound not in (0, 0.0):
        unsupported(fn, "dst_type_max" if dst_type_max not in (0, 0.0) else "max_low_bound",
                    dst_type_max if dst_type_max not in (0, 0.0) else max_low_bound,
                    "the V3 scale bounds are not exported here; pass 0.0")
    n = x.shape[-1]
    if fmt is E2M1:
        require(n % 2 == 0, fn, "input", "must have an even last dim for float4 outputs", x)
    blocks = math.ceil(n / block_size) if isinstance(n, int) else -(-n // block_size)
    lead = x.shape[:-1]
    v = x.float()
    padded = torch.nn.functional.pad(v, (0, blocks * block_size - n)).reshape(*lead, blocks, block_size)
    amax = padded.abs().amax(dim=-1)
    e = shared_exponents(amax, fmt, scale_alg)
    scaled = (padded / torch.pow(2.0, e)[..., None]).reshape(*lead, blocks * block_size)[..., :n]
    if fmt is E2M1:
        codes = e2m1_codes(scaled).reshape(*lead, n // 2, 2)
        y = (codes[..., 0] + 16 * codes[..., 1]).to(torch.uint8)
    else:
        y = scaled.clamp(-fmt.max_value, fmt.max_value).to(fmt.torch_dtype)
    scale = (e + 127.0).to(torch.uint8)
    pairs = (blocks + 1) // 2
    scale = torch.nn.functional.pad(scale, (0, 2 * pairs - blocks)).reshape(*lead, pairs, 2)
    return y, scale


def npu_swiglu_mx_quant(x, *, group_index=None, activate_dim=-1, activate_left=False, swiglu_mode=0, clamp_limit=7.0,
                        glu_alpha=1.702, glu_bias=1.0, group_mode=0, axis=-1, dst_type=FLOAT4_E2M1, round_mode="rint",
                        scale_alg=0, max_dtype_value=0.0):
    """torch_npu.npu_swiglu_mx_quant: ``(y, mxscale)`` of ``npu_dynamic_mx_quant(swiglu(x))``.

    ``swiglu_mode=0``: ``A, B`` the halves of the last axis; ``activate_left``: ``Swish(A) · B``, else
    ``A · Swish(B)``; computed in float32 and quantised without rounding in between. ``group_index``
    (int64 [G], 1 ≤ G ≤ 256; ``group_mode`` 0 counts, 1 cumulative ends): rows past the groups'
    total are not computed by the operator; here their ``y`` and ``mxscale`` are 0."""
    fn = "npu_swiglu_mx_quant"
    require(isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16), fn, "x",
            "must be a float16 or bfloat16 tensor", x)
    require(2 <= x.dim() <= 7, fn, "x", "must have 2 to 7 dims", x)
    dims = x.dim()
    for name, value in (("activate_dim", activate_dim), ("axis", axis)):
        require(value in (-1, -2, dims - 2, dims - 1), fn, name, lambda: f"must be -1, -2, {dims - 2} or {dims - 1}",
                value)
        if value % dims != dims - 1:
            unsupported(fn, name, value, "only the last axis exports here (the MoE paths use it)")
    require(x.shape[-1] % 2 == 0, fn, "x", "must have an even last dim", x)
    require(swiglu_mode in (0, 1), fn, "swiglu_mode", "must be 0 or 1", swiglu_mode)
    if swiglu_mode == 1:
        unsupported(fn, "swiglu_mode", swiglu_mode, "the interleaved variant's activate_left reading is not "
                    "stated by its documentation; only 0 (halves) exports here")
    require(group_mode in (0, 1), fn, "group_mode", "must be 0 (counts) or 1 (cumulative ends)", group_mode)
    require(scale_alg in (0, 1), fn, "scale_alg", "must be 0 or 1 (the operator's supported values)", scale_alg)
    require(isinstance(max_dtype_value, (int, float)) and max_dtype_value >= 0, fn, "max_dtype_value",
            "must be a number >= 0", max_dtype_value)
    if mx_format(fn, dst_type) is E2M1:
        require(x.shape[-1] % 4 == 0, fn, "x", "must have a last dim divisible by 4 for float4 outputs (an even "
                "swiglu width H)", x)
    if group_index is not None:
        require(isinstance(group_index, torch.Tensor) and group_index.dim() == 1 and group_index.dtype == torch.int64,
                fn, "group_index", "must be 1-D int64 [G]", group_index)
        require(1 <= group_index.shape[0] <= 256, fn, "group_index", "must hold 1 to 256 groups", group_index)
    first, second = x.float().chunk(2, dim=-1)
    act, lin = (first, second) if activate_left else (second, first)
    out = torch.nn.functional.silu(act) * lin
    if group_index is not None:
        # zero rows quantise to y 0 with the all-zero block's scale code 0
        ends = group_index if group_mode == 1 else group_index.cumsum(0)
        flat = out.reshape(-1, out.shape[-1])   # the tokens: every axis but the last, merged
        rows = torch.arange(flat.shape[0], dtype=torch.int64, device=x.device)
        out = torch.where((rows < ends[-1])[:, None], flat, torch.zeros_like(flat)).reshape(out.shape)
    return npu_dynamic_mx_quant(out, dst_type=dst_type, round_mode=round_mode, scale_alg=scale_alg)


def e8m0_bits(scale: torch.Tensor) -> torch.Tensor:
    """The e8m0 bits (uint8) of an MX scale held as uint8 (as npu_dynamic_mx_quant returns it) or as a
    ``torch.float8_e8m0fnu`` tensor (the same byte, read as its bits)."""
    return scale.view(torch.uint8) if scale.dtype == torch.float8_e8m0fnu else scale


def mx_dequantize(y: torch.Tensor, mxscale: torch.Tensor, fmt: MxFormat, block_size: int = 32) -> torch.Tensor:
    """float32 values of an MX result along the last axis (``y`` as npu_dynamic_mx_quant returns it):
    each value times ``2^(e - 127)`` with e the e8m0 scale of its block (``mxscale``
    ``[..., ceil(blocks / 2), 2]``); float4_e2m1 values are the bytes' two codes, the low nibble first."""
    mxscale = e8m0_bits(mxscale)
    if fmt is E2M1:
        b = y.to(torch.int64)  # int64: the table lookup exports as Gather, which takes int64 indices
        codes = torch.stack([b % 16, b // 16], dim=-1).reshape(*y.shape[:-1], 2 * y.shape[-1])
        mags = torch.tensor(E2M1_VALUES)[codes % 8]
        v = torch.where(codes >= 8, -mags, mags)
    else:
        v = y.float()
    n = v.shape[-1]
    e = mxscale.reshape(*mxscale.shape[:-2], -1).float() - 127.0
    per_value = torch.repeat_interleave(torch.pow(2.0, e), block_size, dim=-1)[..., :n]
    return v * per_value


__all__ = ["e8m0_bits", "mx_dequantize", "npu_dynamic_mx_quant", "npu_swiglu_mx_quant"]
