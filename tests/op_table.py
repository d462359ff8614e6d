"""The per-op test table (in the manner of onnxscript's OpInfo): one entry per ascend.moe op feeds
the generic tests of tests/test_op_table.py (schema vs the C++ manifest, named samples and bad
cases through every layer, ...). A new op is one OpInfo here; per-op test files keep only what is
specific to one layer (kernel paths, export, shape inference details)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np
import onnx
from onnx import helper

from ascend_moe_onnx import onnx_schemas


@dataclass(frozen=True)
class BadCase:
    """Inputs (ONNX input name -> array; None or missing = absent) and attributes that break one
    rule; ``message`` is the exact text after "<op>: " in every layer. ``ort`` False: the ORT
    custom-op API cannot see the fault (docs/contributing.md says why); ``torch`` False: the
    torch front end's own signature typing rejects the call before the op's validation;
    ``body`` False: the op's function body (standard ONNX, run without the library) cannot see
    the fault: element types (a body is type-generic), shapes that broadcast or that the body
    never reads, and limits of the kernels (docs/operators.md, "What a function body checks")."""

    id: str
    inputs: dict
    attrs: dict
    message: str
    ort: bool = True
    torch: bool = True
    body: bool = True
    # What the ORT kernel says instead of ``message`` where the custom-op API cannot see the
    # whole fault (attribute kinds it cannot read; docs/contributing.md); the project's session
    # (check_nodes) still gives ``message``.
    ort_message: str | None = None


# The ORT kernel's text for the kinds ORT's custom-op API reads as empty INTS and FLOATS lists.
UNREADABLE_KIND = ("an attribute of a kind the ONNX Runtime custom-op API cannot read (an empty INTS or FLOATS, "
                   "STRINGS, TENSORS, GRAPH, GRAPHS, SPARSE_TENSOR, SPARSE_TENSORS, TYPE_PROTO or TYPE_PROTOS)")


def attribute_kind_cases(x: dict, attr: str = "norm_type", want: str = "INT", k: dict | None = None) -> list:
    """``attr`` given as every other attribute kind ONNX has (TENSOR, GRAPH, ...); each is named."""
    from onnx import AttributeProto as A
    from onnx import TensorProto, numpy_helper

    k = dict(k=2) if k is None else k
    tensor = numpy_helper.from_array(np.array(1, np.int64))
    graph = helper.make_graph([], "g", [], [])
    sparse = helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32)),
                                       numpy_helper.from_array(np.array([0], np.int64)), [2])
    type_proto = helper.make_tensor_type_proto(TensorProto.FLOAT, [1])
    kinds = [("TENSOR", tensor, "TENSOR"), ("GRAPH", graph, None), ("STRINGS", ["a", "b"], None),
             ("TENSORS", [tensor], None), ("GRAPHS", [graph], None), ("SPARSE_TENSOR", sparse, None),
             ("SPARSE_TENSORS", [sparse], None), ("TYPE_PROTO", type_proto, None),
             ("TYPE_PROTOS", [type_proto], None),
             ("INTS []", helper.make_attribute(attr, [], attr_type=A.INTS), None),
             ("FLOATS []", helper.make_attribute(attr, [], attr_type=A.FLOATS), None)]
    return [BadCase(f"kind_{attr}_{name.split()[0].lower()}{'_empty' if '[]' in name else ''}", x, {**k, attr: value},
                    f"attribute '{attr}' must be {want}, got {name}", torch=False,
                    ort_message=None if ort_text else f"attribute '{attr}' must be {want}, got {UNREADABLE_KIND}")
            for name, value, ort_text in kinds]


@dataclass(frozen=True)
class Sample:
    """A named valid call (ONNX input name -> array; None or missing = absent) that every layer
    runs: the C++ kernel in ONNX Runtime, the function body in ONNX Runtime without the library,
    onnx.reference and the torch front end must each give the NumPy reference's outputs.
    ``expect`` pins outputs the contract states outright (output name -> values: exact for integer
    outputs, within the tolerance for float ones, NaN equal to NaN). ``rtol``/``atol`` None: the
    op's tolerance."""

    id: str
    inputs: dict
    attrs: dict = field(default_factory=dict)
    rtol: float | None = None
    atol: float | None = None
    expect: dict = field(default_factory=dict)


_OP_MODULES = {m.OP_TYPE: m for m in onnx_schemas.OP_MODULES}


@dataclass(frozen=True)
class OpInfo:
    """What the generic tests need to know of one op."""

    name: str
    bad_cases: Callable[[], list]
    # Calls the torch front end with torch tensors keyed by input name (None = absent); None: the
    # op has no torch front end (MoeRoutedExperts: an export-time op of the ``ort`` formulation).
    torch_call: Callable[[dict, dict], tuple] | None = field(repr=False)
    # Named valid calls (Sample), the first with every optional input present (the wrong-type
    # test starts from it): the generic agreement test runs each through every layer.
    samples: Callable[[], list] = field(repr=False, default=lambda: [])
    rtol: float = 2e-6  # agreement of the kernels with the NumPy reference (float outputs)
    atol: float = 1e-30
    # Bad cases (by id) that the op's function body cannot see: they run as strict xfails there
    # (docs/operators.md lists what each body checks). Same meaning as ``BadCase.body=False``.
    body_blind: frozenset = frozenset()
    # Inputs and attributes with every input present, for the wrong-type test, where no valid
    # call has them all (None: the first sample).
    every_input: Callable[[], tuple] | None = field(repr=False, default=None)

    @property
    def spec(self) -> ModuleType:
        """onnx_schemas.<op>: SCHEMA, INPUT_NAMES, OUTPUT_NAMES, reference, <Op>Ref."""
        return _OP_MODULES[self.name]


def _gating_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    attrs = dict(attrs)
    tensors = {n: t for n, t in inputs.items() if n != "x" and t is not None}
    return torch.ops.custom.npu_moe_gating_top_k(inputs["x"], attrs.pop("k"), **tensors, **attrs)


def _rerouting_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    return torch.ops.npu.npu_moe_re_routing(inputs["tokens"], inputs["expert_token_num_per_rank"],
                                           per_token_scales=inputs.get("per_token_scales"), **attrs)


def _grouped_matmul_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)
    from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

    return (torch.ops.ascend_moe.grouped_matmul(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs),)


def _grouped_matmul_cases():
    from tests.ops.grouped_matmul.grouped_matmul_cases import bad_cases

    return bad_cases()


def _grouped_matmul_every_input():
    from tests.ops.grouped_matmul.grouped_matmul_cases import every_input

    return every_input()


def _grouped_matmul_samples():
    from tests.ops.grouped_matmul.grouped_matmul_cases import samples

    return samples()


def _finalize_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    args = [inputs.get(n) for n in onnx_schemas.moe_finalize_routing_v2.INPUT_NAMES]
    return (torch.ops.ascend_moe.moe_finalize_routing_v2(*args, **attrs),)


def _unpermute_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    args = [inputs.get(n) for n in onnx_schemas.moe_token_unpermute.INPUT_NAMES]
    return (torch.ops.ascend_moe.moe_token_unpermute(*args, **attrs),)


def _finalize_cases():
    from tests.ops.moe_finalize_routing_v2.finalize_cases import finalize_bad_cases

    return finalize_bad_cases()


def _unpermute_cases():
    from tests.ops.moe_finalize_routing_v2.finalize_cases import unpermute_bad_cases

    return unpermute_bad_cases()


def _finalize_samples():
    from tests.ops.moe_finalize_routing_v2.finalize_cases import finalize_samples

    return finalize_samples()


def _unpermute_samples():
    from tests.ops.moe_finalize_routing_v2.finalize_cases import unpermute_samples

    return unpermute_samples()


def _swiglu_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    return (torch.ops.ascend_moe.swi_glu(inputs["x"], **attrs),)


def _swiglu_cases():
    from tests.ops.swi_glu.swiglu_cases import swiglu_bad_cases

    return swiglu_bad_cases()


def _swiglu_samples():
    from tests.ops.swi_glu.swiglu_cases import swiglu_samples

    return swiglu_samples()


def _init_routing_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    attrs = dict(attrs)
    start = attrs.pop("active_expert_start", None)
    end = attrs.pop("active_expert_end", None)
    rng = [] if start is None and end is None else [0 if start is None else start, -1 if end is None else end]
    return torch.ops.ascend_moe.moe_init_routing_v3(
        inputs["x"], inputs["expert_idx"], inputs.get("scale"), inputs.get("offset"),
        active_expert_range=rng, **attrs)


def _token_permute_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    return torch.ops.ascend_moe.moe_token_permute(inputs["tokens"], inputs["indices"], **attrs)


def _init_routing_v1_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    return torch.ops.ascend_moe.moe_init_routing(inputs["x"], inputs["row_idx"], inputs["expert_idx"],
                                                 attrs["active_num"])


def _init_routing_v1_cases():
    from tests.ops.moe_init_routing_v3.init_routing_cases import v1_bad_cases

    return v1_bad_cases()


def _init_routing_v1_samples():
    from tests.ops.moe_init_routing_v3.init_routing_cases import v1_samples

    return v1_samples()


def _init_routing_cases():
    from tests.ops.moe_init_routing_v3.init_routing_cases import init_bad_cases

    return init_bad_cases()


def _init_routing_samples():
    from tests.ops.moe_init_routing_v3.init_routing_cases import init_samples

    return init_samples()


def _token_permute_cases():
    from tests.ops.moe_init_routing_v3.init_routing_cases import permute_bad_cases

    return permute_bad_cases()


def _token_permute_samples():
    from tests.ops.moe_init_routing_v3.init_routing_cases import permute_samples

    return permute_samples()


def _gating_cases():
    from tests.ops.moe_gating_top_k_hash.gating_cases import bad_cases

    return bad_cases()


def _rerouting_cases():
    from tests.ops.moe_re_routing.rerouting_cases import bad_cases

    return bad_cases()


def _gating_samples():
    from tests.ops.moe_gating_top_k_hash.gating_cases import samples

    return samples()


def _rerouting_samples():
    from tests.ops.moe_re_routing.rerouting_cases import samples

    return samples()


def _experts_inputs(rng, T=3, H=20, E=5, I=6, k=2, idx_type=np.int64):
    return {"x": rng.standard_normal((T, H)).astype(np.float32),
            "expert_idx": rng.integers(0, E, (T, k)).astype(idx_type),
            "routing_weights": rng.random((T, k)).astype(np.float32),
            "gate_up_weights": (rng.standard_normal((E, 2 * I, H)) * 0.3).astype(np.float32),
            "down_weights": (rng.standard_normal((E, H, I)) * 0.3).astype(np.float32)}


def _experts_biased(rng, inputs: dict) -> dict:
    """``inputs`` with expert biases (gate_up_bias [E, 2I], down_bias [E, H])."""
    E, two_i, _ = inputs["gate_up_weights"].shape
    H = inputs["x"].shape[1]
    return {**inputs, "gate_up_bias": (rng.standard_normal((E, two_i)) * 0.5).astype(np.float32),
            "down_bias": (rng.standard_normal((E, H)) * 0.5).astype(np.float32)}


# gpt-oss's activation: clamp at 7, g sigmoid(1.702 g) (u + 1)
_GPT_OSS_GLU = dict(swiglu_limit=7.0, activation_alpha=1.702, activation_beta=1.0)


def _experts_quantized(inputs: dict, bits: int, block_size: int = 0) -> dict:
    """``inputs`` with its float expert weights quantized (onnx_schemas.weight_quant)."""
    from ascend_moe_onnx.onnx_schemas import weight_quant

    q1, s1 = weight_quant.quantize(inputs["gate_up_weights"], bits, block_size)
    q2, s2 = weight_quant.quantize(inputs["down_weights"], bits, block_size)
    return {**inputs, "gate_up_weights": q1, "down_weights": q2, "gate_up_scales": s1, "down_scales": s2}


def _experts_samples():
    rng = np.random.default_rng(14)
    repeated = _experts_inputs(rng, T=4, E=3, k=3)
    repeated["expert_idx"] = np.array([[2, 2, 2], [0, 1, 0], [1, 1, 2], [0, 0, 0]], np.int64)
    return [
        # first: every optional input present (4 bits, per group: the scales of both shapes; biases)
        Sample("int4-per-group-biased",
               _experts_biased(rng, _experts_quantized(_experts_inputs(rng, H=40, I=10), 4, 10)),
               dict(weight_bits=4, block_size=10, **_GPT_OSS_GLU)),
        Sample("float-biased-gpt-oss", _experts_biased(rng, _experts_inputs(rng, T=5, H=33, I=9, k=3)),
               _GPT_OSS_GLU),
        Sample("gate-up-bias-only-alpha", {**_experts_biased(rng, _experts_inputs(rng)), "down_bias": None},
               dict(activation_alpha=0.5)),
        Sample("down-bias-only-beta", {**_experts_biased(rng, _experts_inputs(rng, idx_type=np.int32)),
                                       "gate_up_bias": None}, dict(activation_beta=-0.25)),
        Sample("int8-per-channel-biased", _experts_biased(rng, _experts_quantized(_experts_inputs(rng, H=24), 8)),
               dict(weight_bits=8, **_GPT_OSS_GLU)),
        Sample("biased-empty-input", _experts_biased(rng, _experts_inputs(rng, T=0)), _GPT_OSS_GLU,
               expect={"y": np.zeros((0, 20), np.float32)}),
        Sample("int8-per-channel", _experts_quantized(_experts_inputs(rng, T=5, H=37, I=7), 8),
               dict(weight_bits=8)),
        Sample("int8-per-group-clamped", _experts_quantized(_experts_inputs(rng, H=24, I=8, k=3), 8, 4),
               dict(weight_bits=8, block_size=4, swiglu_limit=0.5)),
        Sample("int4-per-channel", _experts_quantized(_experts_inputs(rng, T=4, H=66, I=18), 4),
               dict(weight_bits=4)),
        Sample("int64-index", _experts_inputs(rng)),
        Sample("int32-index-clamped", _experts_inputs(rng, T=9, H=37, E=3, I=5, k=3, idx_type=np.int32),
               dict(swiglu_limit=0.5)),
        Sample("empty-input", _experts_inputs(rng, T=0), expect={"y": np.zeros((0, 20), np.float32)}),
        Sample("int4-empty-input", _experts_quantized(_experts_inputs(rng, T=0), 4),
               dict(weight_bits=4), expect={"y": np.zeros((0, 20), np.float32)}),
        Sample("int8-per-group-empty-input", _experts_quantized(_experts_inputs(rng, T=0), 8, 2),
               dict(weight_bits=8, block_size=2), expect={"y": np.zeros((0, 20), np.float32)}),
        Sample("an-expert-twice-in-a-row", repeated),
        Sample("hidden-zero", _experts_inputs(rng, H=0)),  # valid: y is [T, 0]
    ]


def _experts_cases():

    rng = np.random.default_rng(15)
    good = _experts_inputs(rng)

    def with_(**changes):
        return {**good, **changes}

    B = BadCase
    return [
        B("index-high", with_(expert_idx=np.array([[0, 1], [5, 2], [1, 1]])), {},
          "input 'expert_idx' must be in [0, E) = [0, 5), got 5 at [1, 0]"),
        B("index-negative", with_(expert_idx=np.array([[0, 1], [2, 2], [1, -1]], np.int32)), {},
          "input 'expert_idx' must be in [0, E) = [0, 5), got -1 at [2, 1]"),
        B("x-rank", with_(x=good["x"][None]), {}, "input 'x' must be 2-D [T, H], got shape [1, 3, 20]"),
        B("idx-rows", with_(expert_idx=good["expert_idx"][:2]), {},
          "input 'expert_idx' must be 2-D [T, k] with T = 3 (x.shape[0]), got shape [2, 2]"),
        B("weights-shape", with_(routing_weights=good["routing_weights"][:, :1]), {},
          "input 'routing_weights' must have the shape of expert_idx [3, 2], got shape [3, 1]"),
        B("gate-up-odd", with_(gate_up_weights=good["gate_up_weights"][:, :11]), {},
          "input 'gate_up_weights' must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and H = 20 "
          "(x.shape[1]), got shape [5, 11, 20]"),
        B("gate-up-hidden", with_(gate_up_weights=good["gate_up_weights"][:, :, :19]), {},
          "input 'gate_up_weights' must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and H = 20 "
          "(x.shape[1]), got shape [5, 12, 19]"),
        B("down-shape", with_(down_weights=good["down_weights"][:4]), {},
          "input 'down_weights' must be [E, H, I] = [5, 20, 6] (from gate_up_weights), got shape [4, 20, 6]"),
        B("limit-negative", good, dict(swiglu_limit=-1.0),
          "attribute 'swiglu_limit' must be finite and >= 0 (0 = no clamp), got -1"),
        B("limit-kind", good, dict(swiglu_limit=1),
          "attribute 'swiglu_limit' must be FLOAT, got INT 1"),
        *attribute_kind_cases(good, "swiglu_limit", "FLOAT", k={})[:1],
        B("gate-up-absent", with_(gate_up_weights=None), {}, "input 'gate_up_weights' is required, got none"),
        B("unknown-attribute", good, dict(limit=1.0),
          "attribute 'limit' is not an attribute of MoeRoutedExperts (known: act_quant, activation_alpha, "
          "activation_beta, block_size, swiglu_limit, weight_bits)", ort=False),
        *_biased_experts_cases(rng, good),
        *_quantized_experts_cases(good),
    ]


def _biased_experts_cases(rng, good: dict) -> list:
    """Bad biases and activation attributes (good: float inputs with H = 20, E = 5, I = 6)."""
    biased = _experts_biased(rng, good)
    q8 = _experts_quantized(biased, 8)
    B = BadCase
    return [
        B("gate-up-bias-shape", {**biased, "gate_up_bias": biased["gate_up_bias"][:, :6]}, {},
          "input 'gate_up_bias' must be [E, 2I] = [5, 12], got shape [5, 6]"),
        B("down-bias-rank", {**biased, "down_bias": biased["down_bias"][None]}, {},
          "input 'down_bias' must be [E, H] = [5, 20], got shape [1, 5, 20]"),
        B("down-bias-experts", {**biased, "down_bias": biased["down_bias"][:4]}, {},
          "input 'down_bias' must be [E, H] = [5, 20], got shape [4, 20]"),
        B("bias-type", {**biased, "gate_up_bias": biased["gate_up_bias"].astype(np.float64)}, {},
          "input 'gate_up_bias' must be float, got double"),
        B("alpha-nan", good, dict(activation_alpha=float("nan")), "attribute 'activation_alpha' must be finite, got nan"),
        B("beta-inf", good, dict(activation_beta=float("inf")), "attribute 'activation_beta' must be finite, got inf"),
        B("alpha-kind", good, dict(activation_alpha=2), "attribute 'activation_alpha' must be FLOAT, got INT 2"),
        B("a8-bias", {**q8, "gate_up_bias": None}, dict(act_quant=1),
          "input 'down_bias' is not taken with act_quant 1 (the integer path has no biases)"),
        B("a8-beta", {k: v for k, v in q8.items() if "bias" not in k}, dict(act_quant=1, activation_beta=1.0),
          "attribute 'act_quant' = 1 takes the default activation_alpha (1) and activation_beta (0), got 1 and 1"),
    ]


def _quantized_experts_cases(good: dict) -> list:
    """Bad quantized-weight inputs (good: float inputs with H = 20, E = 5, I = 6)."""
    q8 = _experts_quantized(good, 8)
    q4 = _experts_quantized(good, 4, 2)
    int4 = dict(weight_bits=4, block_size=2)

    def w(base, **changes):
        return {**base, **changes}

    B = BadCase
    return [
        B("weight-bits", q8, dict(weight_bits=3), "attribute 'weight_bits' must be 8 or 4, got 3"),
        B("block-size-negative", q8, dict(block_size=-2),
          "attribute 'block_size' must be >= 0 (0 = one scale per row), got -2"),
        B("block-size-odd-int4", q4, dict(weight_bits=4, block_size=5),
          "attribute 'block_size' must be even with weight_bits 4 (whole bytes per block), got 5"),
        B("block-size-divides", w(q8, gate_up_scales=np.ones((5, 12, 4), np.float32),
                                  down_scales=np.ones((5, 20, 1), np.float32)), dict(block_size=5),
          "attribute 'block_size' = 5 must divide the rows of input 'down_weights' (I = 6)"),
        B("scales-absent", w(q8, down_scales=None), {}, "input 'down_scales' is required with int8 weights, got none"),
        B("scales-with-float", w(good, gate_up_scales=q8["gate_up_scales"]), {},
          "input 'gate_up_scales' goes with int8 weights only: the weights are float"),
        B("scales-shape", w(q8, gate_up_scales=q8["gate_up_scales"][:, :11]), {},
          "input 'gate_up_scales' must be [E, 2I] = [5, 12] (one scale per row), got shape [5, 11]"),
        B("group-scales-shape", w(q4, down_scales=q4["down_scales"][:, :, :2]), int4,
          "input 'down_scales' must be [E, H, I / block_size] = [5, 20, 3] (block_size 2), got shape [5, 20, 2]"),
        B("scales-type", w(q8, down_scales=q8["down_scales"].astype(np.float64)), {},
          "input 'down_scales' must be float, got double"),
        B("weights-mixed", w(q8, down_weights=good["down_weights"]), {},
          "input 'down_weights' must have the type of gate_up_weights (int8), got float", body=False),
        B("int4-unpacked", w(q4, gate_up_weights=q8["gate_up_weights"]), int4,
          "input 'gate_up_weights' must be 3-D [E, 2I, H/2] with E >= 1, an even 2I >= 2 and H/2 = 10 "
          "(x.shape[1] / 2), got shape [5, 12, 20]"),
        B("int4-odd-hidden", w(q4, x=good["x"][:, :19]), int4,
          "input 'gate_up_weights' with weight_bits 4 packs two values per byte along H, which must be even, "
          "got H = 19 (x.shape[1])"),
        B("int4-odd-inter",
          w(q4, gate_up_weights=q4["gate_up_weights"][:, :10], gate_up_scales=q4["gate_up_scales"][:, :10]),
          int4,
          "input 'down_weights' with weight_bits 4 packs two values per byte along I, which must be even, "
          "got I = 5 (from gate_up_weights)"),
    ]


OPS = [
    OpInfo("MoeGatingTopKHash", _gating_cases, _gating_torch, _gating_samples),
    OpInfo("MoeReRouting", _rerouting_cases, _rerouting_torch, _rerouting_samples),
    OpInfo("MoeRoutedExperts", _experts_cases, None, _experts_samples, rtol=2e-5, atol=1e-6),
    # float16 / bfloat16 samples: the kernels round a float32 sum, the reference a float64 one
    OpInfo("GroupedMatmul", _grouped_matmul_cases, _grouped_matmul_torch, _grouped_matmul_samples,
           rtol=8e-3, atol=1e-3,
           every_input=_grouped_matmul_every_input,
           body_blind=frozenset({"bias-type", "count-negative", "count-overflow", "count-total",
                                 "cumsum-decreasing", "cumsum-negative", "cumsum-past-rows", "group-list-dtype",
                                 "weight-type", "x-type",
                                 # element types (a body is type-generic)
                                 "antiquant-offset-type", "antiquant-scale-absent", "antiquant-scale-type",
                                 "antiquant-scale-type-offset-of-x", "antiquant-with-float-weight",
                                 "output-dtype-float-x", "scale-with-float-x", "w8a8-bias-type",
                                 "w8a8-int32-with-scale", "w8a8-output-dtype-absent", "w8a8-scale-absent",
                                 "w8a8-weight-int4"})),
    OpInfo("MoeInitRoutingV3", _init_routing_cases, _init_routing_torch, _init_routing_samples,
           body_blind=frozenset({"expert_id_high", "expert_id_negative", "idx_type", "quant_int8", "x_type"})),
    OpInfo("MoeTokenPermute", _token_permute_cases, _token_permute_torch, _token_permute_samples,
           body_blind=frozenset({"indices_negative", "indices_type", "tokens_type"})),
    OpInfo("MoeInitRouting", _init_routing_v1_cases, _init_routing_v1_torch,
           _init_routing_v1_samples,
           body_blind=frozenset({"expert_negative", "expert_type", "row_repeat", "row_type", "x_type"})),
    OpInfo("MoeFinalizeRoutingV2", _finalize_cases, _finalize_torch, _finalize_samples,
           rtol=1e-5, atol=1e-6,
           body_blind=frozenset({"row-idx-type", "x1-type"})),
    OpInfo("MoeTokenUnpermute", _unpermute_cases, _unpermute_torch, _unpermute_samples,
           rtol=1e-5, atol=1e-6,
           body_blind=frozenset({"indices-type"})),
    # ORT's Exp (function body) and the C library's expf (kernels) differ by a few ulps
    OpInfo("SwiGlu", _swiglu_cases, _swiglu_torch, _swiglu_samples, rtol=5e-6, atol=1e-6),
]


def bad_case_params():
    """``(op, case)`` pairs for pytest.mark.parametrize, with ids ``<op>-<case>``."""
    return [(op, dataclasses.replace(case, body=False) if case.id in op.body_blind else case)
            for op in OPS for case in op.bad_cases()]


def torch_bad_case_params():
    """The bad cases of the ops that have a torch front end."""
    return [(op, case) for op, case in bad_case_params() if case.torch and op.torch_call is not None]


def bad_case_id(value) -> str:
    return value.name if isinstance(value, OpInfo) else value.id


def present(inputs: dict) -> dict:
    """The inputs that are given."""
    return {n: a for n, a in inputs.items() if a is not None}


def node_model(op: OpInfo | str, inputs: dict, attrs: dict, opset_version: int | None = None,
               ranks: bool = False, *, shapes: bool = False, dims: dict | None = None,
               outputs: int | None = None, typed_outputs: bool = False, output_dims: dict | None = None,
               opset: int = 20, ir_version: int = 10, constants: bool = False) -> onnx.ModelProto:
    """The one-node model of the tests: graph inputs named like the op's inputs (absent middle
    ones as ""), with dims unknown, or with ``ranks`` symbolic (``<input>_<i>``), or with
    ``shapes`` the arrays' own; ``dims`` overrides them per input (a list of ints / names, None:
    unknown rank). The first ``outputs`` outputs (default all), left to shape inference, or with
    ``typed_outputs`` declared with the element types the kernels write (shapes unknown unless
    ``output_dims`` gives them).
    ``constants``: every input but the first is an initializer holding its value (ONNX Runtime
    hands a kernel an empty initializer with a null data pointer), so only the first is fed.
    Attributes given as ``AttributeProto`` keep their kind (TENSOR, GRAPH, ...).
    ``op`` is an OpInfo or an op name."""
    from tests.ops.moe_re_routing.rerouting_cases import TYPES, type_name

    if isinstance(op, str):
        op = next(o for o in OPS if o.name == op)
    given = present(inputs)
    names = [n if n in given else "" for n in op.spec.INPUT_NAMES]
    while names and names[-1] == "":
        names.pop()

    def input_dims(name):
        if dims is not None and name in dims:
            return dims[name]
        if shapes:
            return list(np.shape(given[name]))
        return [f"{name}_{i}" for i in range(np.ndim(given[name]))] if ranks else None

    elem = {n: TYPES[type_name(given[n])][1] for n in names if n}
    fixed = [n for n in names[1:] if n] if constants else []
    initializers = [helper.make_tensor(n, elem[n], np.shape(given[n]), np.ascontiguousarray(given[n]).tobytes(),
                                       raw=True) for n in fixed]
    graph_inputs = [helper.make_tensor_value_info(n, elem[n], input_dims(n)) for n in names if n and n not in fixed]
    out_names = list(op.spec.OUTPUT_NAMES)[:outputs]
    if typed_outputs:
        graph_outputs = [helper.make_tensor_value_info(n, _output_type(op, p, elem), (output_dims or {}).get(n))
                         for n, p in zip(out_names, op.spec.SCHEMA.outputs)]
    else:
        graph_outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in out_names]
    protos = {n: a for n, a in attrs.items() if isinstance(a, onnx.AttributeProto)}  # kinds make_node cannot
    node = helper.make_node(op.name, names, out_names, domain=onnx_schemas.DOMAIN,
                            **{n: a for n, a in attrs.items() if n not in protos})
    node.attribute.extend(onnx.AttributeProto(**{**{f.name: v for f, v in a.ListFields()}, "name": n})
                          for n, a in protos.items())
    return helper.make_model(
        helper.make_graph([node], op.name, graph_inputs, graph_outputs, initializers),
        opset_imports=[helper.make_opsetid("", opset),
                       helper.make_opsetid(onnx_schemas.DOMAIN, opset_version or onnx_schemas.OPSET_VERSION)],
        ir_version=ir_version)


def _output_type(op: OpInfo, param, input_types: dict) -> int:
    """The element type the kernels write to an output: its one allowed type, else that of the
    first given input with the same type parameter, else its first allowed type."""
    schema = op.spec.SCHEMA
    allowed = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}.get(
        param.type_str, [param.type_str])
    for p in schema.inputs:
        if len(allowed) > 1 and p.type_str == param.type_str and p.name in input_types:
            return input_types[p.name]
    return getattr(onnx.TensorProto, allowed[0][len("tensor("):-1].upper())
