"""What docs/operators.md §1.3 / §2.3 say about a concrete case: valid (must run and match the NumPy
reference) or invalid (must fail with a message naming one of the faulty inputs/attributes).

Written from the contract, independently of the library's and the reference's validation code,
so that the fuzzer does not inherit their mistakes."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tests.fuzz import oracle_ops
from tests.fuzz.cases import (
    EXPERTS,
    EXPERTS_DEFAULTS,
    EXPERTS_INPUTS,
    EXPERTS_QUANT_DEFAULTS,
    EXPERTS_SCALES,
    FLOAT_TYPES,
    GATING,
    GATING_DEFAULTS,
    GATING_FLOAT_ATTRS,
    GATING_INT_ATTRS,
    REROUTING_DEFAULTS,
    TOKEN_TYPES,
    Case,
    type_name,
)
from tests.fuzz.cases_ops import PIPELINE_OPS

MAX_K = 64
MAX_EXPERTS = 2048
MAX_TOKENS = 2**31 - 1
INT_TYPES = ("int32", "int64")


@dataclass
class Expectation:
    valid: bool
    names: set = field(default_factory=set)   # an error must name at least one of these
    reasons: list = field(default_factory=list)
    attribute_fault: bool = False             # a bad attribute (kind, name or value)
    reference_applies: bool = True            # the NumPy reference can judge the case too


class _Faults:
    def __init__(self):
        self.names: set = set()
        self.reasons: list = []
        self.attribute = False
        self.python_level = False  # a fault the NumPy reference's Python arguments can express
        self.model_level = False   # a fault of the model, not of the arrays and attributes

    def add(self, reason: str, *names: str, attribute: bool = False, python_level: bool = True,
            model_level: bool = False) -> None:
        self.reasons.append(reason)
        self.names.update(names)
        self.attribute |= attribute
        self.python_level |= python_level
        self.model_level |= model_level


def attribute_kind(value) -> str:
    """The ONNX attribute kind a Python value becomes (int→INT, float→FLOAT, ...)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "INT"
    if isinstance(value, float):
        return "FLOAT"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, list):
        if value and not isinstance(value[0], (int, float)):
            return "OTHER"  # STRINGS, TENSORS, GRAPHS, TYPE_PROTOS
        return "FLOATS" if value and isinstance(value[0], float) else "INTS"
    return type(value).__name__  # TensorProto, GraphProto, AttributeProto (an empty list), ...


def _attributes(case: Case, f: _Faults, kinds: dict, defaults: dict, required: tuple) -> dict:
    """Resolved attribute values; kind / name faults recorded, broken ones replaced by defaults."""
    out = dict(defaults)
    for name, value in case.attrs.items():
        if name not in kinds:
            f.add(f"unknown attribute '{name}'", name, attribute=True)
        elif attribute_kind(value) != kinds[name]:
            # k=2.0 or eps=0 are fine Python arguments of the reference; strings and lists are not.
            numeric = {attribute_kind(value), kinds[name]} == {"INT", "FLOAT"}
            f.add(f"attribute '{name}' is {attribute_kind(value)}, not {kinds[name]}", name, attribute=True,
                  python_level=not numeric)
            out[name] = None
        else:
            out[name] = value
    for name in required:
        if name not in case.attrs:
            f.add(f"required attribute '{name}' missing", name, attribute=True)
            out[name] = None
    return out


def _common(case: Case, f: _Faults) -> None:
    if case.opset != 1:
        f.add(f"ascend.moe opset {case.opset} (only 1 exists)", "opset", "version", case.op, python_level=False,
              model_level=True)


def expect(case: Case) -> Expectation:
    """The contract's verdict on ``case``."""
    f = _Faults()
    _common(case, f)
    if case.op in PIPELINE_OPS:
        oracle_ops.check(case, f, _attributes)
    else:
        {GATING: _gating, EXPERTS: _experts}.get(case.op, _rerouting)(case, f)
    # The reference is a function of arrays and attributes: it cannot judge model-level faults.
    model_level = f.model_level or any(r.startswith("required input") for r in f.reasons)
    return Expectation(not f.reasons, f.names, f.reasons, f.attribute, f.python_level and not model_level)


def _present(case: Case, name: str) -> np.ndarray | None:
    return case.inputs.get(name) if name in case.node_inputs else None


# ---- MoeGatingTopKHash (docs/operators.md §1.3) -------------------------------------------------------------


def _element_types(case: Case, f: _Faults, x_type: str) -> None:
    """Element-type faults of the inputs other than x (they need no shapes)."""
    for name, allowed in (("bias", (x_type,)), ("additional_bias", (x_type,)), ("input_ids", INT_TYPES),
                          ("tid2eid", INT_TYPES), ("additional_token_mask", ("bool",))):
        a = _present(case, name)
        if a is not None and type_name(a) not in allowed:
            f.add(f"{name} is {type_name(a)}", name)


def _gating(case: Case, f: _Faults) -> None:
    kinds = {n: "INT" for n in GATING_INT_ATTRS} | {n: "FLOAT" for n in GATING_FLOAT_ATTRS}
    a = _attributes(case, f, kinds, dict(GATING_DEFAULTS, k=None), ("k",))
    k, kg, gc = a["k"], a["k_group"], a["group_count"]

    def ok(v):
        return v is not None

    if ok(k) and not 1 <= k <= MAX_K:
        f.add(f"k={k} outside [1, 64]", "k", attribute=True)
    if ok(gc) and gc < 1:
        f.add(f"group_count={gc} < 1", "group_count", attribute=True)
    if ok(kg) and ok(gc) and not 1 <= kg <= max(gc, 1):
        f.add(f"k_group={kg} outside [1, group_count={gc}]", "k_group", "group_count", attribute=True)
    for name, allowed in (("group_select_mode", (0, 1)), ("norm_type", (0, 1, 2)), ("renorm", (0, 1)),
                          ("out_flag", (0, 1))):
        if ok(a[name]) and a[name] not in allowed:
            f.add(f"{name}={a[name]} not in {allowed}", name, attribute=True)
    if ok(a["eps"]) and not (math.isfinite(a["eps"]) and a["eps"] >= 0):
        f.add(f"eps={a['eps']}", "eps", attribute=True)
    if ok(a["routed_scaling_factor"]) and not math.isfinite(a["routed_scaling_factor"]):
        f.add(f"routed_scaling_factor={a['routed_scaling_factor']}", "routed_scaling_factor", attribute=True)

    x = _present(case, "x")
    if x is None:  # ORT's own graph check names it by position
        f.add("required input 'x' missing", "x", "input 0")
        return
    x_type = type_name(x)
    if case.input_dims.get("x") == "unknown_rank":  # docs/operators.md §1.3, ONNX Runtime
        f.add("x declared with an unknown rank", "x", python_level=False, model_level=True)
    if x_type not in FLOAT_TYPES:
        f.add(f"x is {x_type}", "x")
    if x.ndim < 2:
        f.add(f"x has rank {x.ndim}", "x")
        _element_types(case, f, x_type)  # checked when the session is created, before x's rank
        return
    E = x.shape[-1]
    R = int(np.prod(x.shape[:-1]))
    attrs_ok = not f.attribute
    if not 1 <= E <= MAX_EXPERTS:
        f.add(f"E={E} outside [1, 2048]", "x")
    elif attrs_ok:
        P = E // gc
        if k > E:
            f.add(f"k={k} > E={E}", "k", "x", attribute=True)
        if E % gc:
            f.add(f"group_count={gc} does not divide E={E}", "group_count", "x", attribute=True)
        elif k > kg * P:
            f.add(f"k={k} > k_group*E/group_count={kg * P}", "k", "k_group", "group_count", attribute=True)
        elif a["group_select_mode"] == 1 and gc > 1 and kg < gc and P < 2:
            f.add("group_select_mode=1 with one expert per group", "group_select_mode", "group_count",
                  attribute=True)
    for name in ("bias", "additional_bias"):
        b = _present(case, name)
        if b is not None and (b.shape != (E,) or type_name(b) != x_type):
            f.add(f"{name} {list(b.shape)} {type_name(b)}", name)
    ids, table = _present(case, "input_ids"), _present(case, "tid2eid")
    if (ids is None) != (table is None):
        f.add("input_ids and tid2eid not given together", "input_ids", "tid2eid")
    elif table is not None:
        if table.ndim != 2 or (ok(k) and table.shape[1] != k):
            f.add(f"tid2eid shape {list(table.shape)} for k={k}", "tid2eid", "k")
        if type_name(table) not in INT_TYPES:
            f.add(f"tid2eid is {type_name(table)}", "tid2eid")
        if type_name(ids) not in INT_TYPES:
            f.add(f"input_ids is {type_name(ids)}", "input_ids")
        if ids.size != R:
            f.add(f"input_ids has {ids.size} elements, R={R}", "input_ids")
        if attrs_ok and gc > 1 and kg < gc:
            f.add("hash routing with effective grouping", "tid2eid", "input_ids", "group_count", "k_group")
    mask = _present(case, "additional_token_mask")
    add_bias = _present(case, "additional_bias")
    if mask is not None:
        if add_bias is None:
            f.add("additional_token_mask without additional_bias", "additional_token_mask", "additional_bias")
        if type_name(mask) != "bool":
            f.add(f"additional_token_mask is {type_name(mask)}", "additional_token_mask")
        if mask.size != R:
            f.add(f"additional_token_mask has {mask.size} elements, R={R}", "additional_token_mask")
    if f.reasons or table is None:
        return
    # Values (docs/operators.md §1.3): used ids in [0, n), used table entries in [0, E).
    hash_rows = np.ones(R, bool) if mask is None else ~mask.reshape(R)
    used = ids.reshape(R)[hash_rows].astype(np.int64)
    n = table.shape[0]
    if ((used < 0) | (used >= n)).any():
        f.add("a hash row's token id is out of range", "input_ids")
        return
    entries = table[used].astype(np.int64)
    if ((entries < 0) | (entries >= E)).any():
        f.add("a used tid2eid entry is out of range", "tid2eid")


# ---- MoeReRouting (docs/operators.md §2.3) ------------------------------------------------------------------


def _quantized_types(case: Case, f: _Faults, a: dict) -> None:
    """int8 expert weights: both int8, both scale inputs float, weight_bits 8 / 4, block_size >= 0
    (even with 4 bits)."""
    if type_name(_present(case, "down_weights")) != "int8":
        f.add("down_weights is not int8 like gate_up_weights", "down_weights")
    for name in EXPERTS_SCALES:
        scales = _present(case, name)
        if scales is None or type_name(scales) != "float":
            f.add(f"{name} missing or not float with int8 weights", name)
    bits, block = a["weight_bits"], a["block_size"]
    if bits not in (8, 4):
        f.add(f"weight_bits={bits}", "weight_bits", attribute=True)
    if block is not None and (block < 0 or (bits == 4 and block % 2)):
        f.add(f"block_size={block}", "block_size", attribute=True)


def _quantized_shapes(case: Case, f: _Faults, block: int, E: int, H: int, I: int) -> None:
    """The block size against the row lengths H and I, and the scales' shapes."""
    if block and (H % block or I % block):
        f.add(f"block_size={block} does not divide H={H} and I={I}", "block_size", attribute=True)
        return
    for name, rows, K in (("gate_up_scales", 2 * I, H), ("down_scales", H, I)):
        want = (E, rows) + ((K // block,) if block else ())
        if _present(case, name).shape != want:
            f.add(f"{name} shape {list(_present(case, name).shape)} != {list(want)}", name)


def _rerouting(case: Case, f: _Faults) -> None:
    a = _attributes(case, f, {n: "INT" for n in REROUTING_DEFAULTS}, dict(REROUTING_DEFAULTS), ())
    for name in REROUTING_DEFAULTS:
        if a[name] is not None and a[name] not in (0, 1):
            f.add(f"{name}={a[name]} not in (0, 1)", name, attribute=True)
    tokens = _present(case, "tokens")
    counts = _present(case, "expert_token_num_per_rank")
    scales = _present(case, "per_token_scales")
    if tokens is None:  # ORT's own graph check names them by position
        f.add("required input 'tokens' missing", "tokens", "input 0")
    if counts is None:
        f.add("required input 'expert_token_num_per_rank' missing", "expert_token_num_per_rank", "input 1")
    if tokens is None or counts is None:
        return
    A = None
    if type_name(tokens) not in TOKEN_TYPES:
        f.add(f"tokens is {type_name(tokens)}", "tokens")
    if tokens.ndim != 2:
        f.add(f"tokens has rank {tokens.ndim}", "tokens")
    else:
        A, H = tokens.shape
        if H < 1:
            f.add(f"tokens has H={H}", "tokens")
        if A > MAX_TOKENS:
            f.add(f"tokens has A={A}", "tokens")
    if type_name(counts) not in INT_TYPES:
        f.add(f"expert_token_num_per_rank is {type_name(counts)}", "expert_token_num_per_rank")
    if counts.ndim != 2:
        f.add(f"expert_token_num_per_rank has rank {counts.ndim}", "expert_token_num_per_rank")
    elif min(counts.shape) < 1:
        f.add(f"expert_token_num_per_rank shape {list(counts.shape)}", "expert_token_num_per_rank")
    if scales is not None:
        if type_name(scales) not in FLOAT_TYPES:
            f.add(f"per_token_scales is {type_name(scales)}", "per_token_scales")
        if scales.ndim not in (1, 2):
            f.add(f"per_token_scales has rank {scales.ndim}", "per_token_scales")
        elif A is not None and scales.shape[0] != A:
            f.add(f"per_token_scales first dim {scales.shape[0]} != A={A}", "per_token_scales", "tokens")
    if f.reasons:
        return
    values = [int(v) for v in counts.reshape(-1).tolist()]
    if any(v < 0 for v in values):
        f.add("a negative count", "expert_token_num_per_rank")
    elif sum(values) != A:
        f.add(f"counts sum to {sum(values)}, A={A}", "expert_token_num_per_rank", "tokens")


# ---- MoeRoutedExperts (docs/operators.md §3.3) ---------------------------------------------------


def _experts(case: Case, f: _Faults) -> None:
    a = _attributes(case, f, {"swiglu_limit": "FLOAT", "weight_bits": "INT", "block_size": "INT"},
                    dict(EXPERTS_DEFAULTS, **EXPERTS_QUANT_DEFAULTS), ())
    limit = a["swiglu_limit"]
    if limit is not None and not (math.isfinite(limit) and limit >= 0):
        f.add(f"swiglu_limit={limit}", "swiglu_limit", attribute=True)
    given = {n: _present(case, n) for n in EXPERTS_INPUTS}
    missing = [n for n, v in given.items() if v is None]
    for n in missing:  # ORT's own graph check names them by position
        f.add(f"required input '{n}' missing", n, f"input {EXPERTS_INPUTS.index(n)}")
    if missing:
        return
    x, idx, w, gu, down = (given[n] for n in EXPERTS_INPUTS)
    quantized = type_name(gu) == "int8"
    for name in ("x", "routing_weights") + (() if quantized else ("gate_up_weights", "down_weights")):
        if type_name(given[name]) != "float":
            f.add(f"{name} is {type_name(given[name])}", name)
    if quantized:
        _quantized_types(case, f, a)
    if type_name(idx) not in INT_TYPES:
        f.add(f"expert_idx is {type_name(idx)}", "expert_idx")
    if f.reasons:
        return
    if x.ndim != 2:
        f.add(f"x has rank {x.ndim}", "x")
        return
    T, H = x.shape
    if idx.ndim != 2 or idx.shape[0] != T:
        f.add(f"expert_idx shape {list(idx.shape)} for T={T}", "expert_idx", "x")
        return
    if w.shape != idx.shape:
        f.add(f"routing_weights shape {list(w.shape)} != expert_idx's", "routing_weights", "expert_idx")
    pack = 2 if quantized and a["weight_bits"] == 4 else 1  # 4 bits: two values per byte
    if gu.ndim != 3 or gu.shape[0] < 1 or gu.shape[1] < 2 or gu.shape[1] % 2 or gu.shape[2] * pack != H:
        f.add(f"gate_up_weights shape {list(gu.shape)} for H={H}", "gate_up_weights")
        return
    E, I = gu.shape[0], gu.shape[1] // 2
    if down.ndim != 3 or down.shape[:2] != (E, H) or down.shape[2] * pack != I:
        f.add(f"down_weights shape {list(down.shape)} != [{E}, {H}, {I} / {pack}]", "down_weights")
    if quantized and not f.reasons:
        _quantized_shapes(case, f, a["block_size"], E, H, I)
    if f.reasons:
        return
    values = idx.astype(np.int64)
    if ((values < 0) | (values >= E)).any():
        f.add("an expert index outside [0, E)", "expert_idx")
