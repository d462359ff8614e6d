"""MoeFinalizeRoutingV2 and MoeTokenUnpermute test inputs: random valid calls, the op-table samples and
bad cases (every rule of docs/operators.md §8.3 and §9.3 broken once, with the exact message every
layer gives after "<op>: ")."""

from __future__ import annotations

import numpy as np


def finalize_inputs(rng, mode: int = 0, N: int = 5, K: int = 3, H: int = 37, E: int = 4, C: int = 6,
                    dtype=np.float32, scale_dtype=np.float32, index_dtype=np.int32, optional=True,
                    drop_rate: float = 0.3) -> dict:
    """A valid MoeFinalizeRoutingV2 call: every optional input present unless ``optional`` is False
    (then only expanded_x, expanded_row_idx and scales). Drop-pad modes drop ~``drop_rate`` slots."""
    if mode in (1, 3):
        x = rng.standard_normal((E, C, H)).astype(dtype)
        idx = rng.permutation(E * C)[:N * K] if N * K <= E * C else rng.integers(0, E * C, N * K)
        idx = np.where(rng.random(N * K) < drop_rate, -1, idx)
    else:
        x = rng.standard_normal((N * K, H)).astype(dtype)
        idx = rng.permutation(N * K)
    inputs = {"expanded_x": x, "expanded_row_idx": idx.astype(index_dtype),
              "scales": rng.random((N, K)).astype(scale_dtype)}
    if optional:
        inputs.update(x1=rng.standard_normal((N, H)).astype(dtype), x2=rng.standard_normal((N, H)).astype(dtype),
                      bias=rng.standard_normal((E, H)).astype(dtype),
                      expert_idx=rng.integers(0, E, (N, K)).astype(index_dtype))
    return inputs


def unpermute_inputs(rng, N: int = 6, K: int = 4, H: int = 50, dropped: int = 0, dtype=np.float32,
                     prob_dtype=np.float32, index_dtype=np.int32, probs: bool = True) -> dict:
    """A valid MoeTokenUnpermute call: sorted_indices a permutation of [0, N*K) whose entries >= P
    (P = N*K - dropped rows) were dropped by the permute."""
    P = N * K - dropped
    inputs = {"permuted_tokens": rng.standard_normal((P, H)).astype(dtype),
              "sorted_indices": rng.permutation(N * K).astype(index_dtype)}
    if probs:
        inputs["probs"] = rng.random((N, K)).astype(prob_dtype)
    return inputs


def finalize_samples() -> list:
    from tests.op_table import Sample

    rng = np.random.default_rng(21)
    rows = np.arange(4, dtype=np.float32)[:, None] * np.ones((1, 2), np.float32)  # row r = [r, r]
    layout = {"expanded_x": rows, "expanded_row_idx": np.arange(4, dtype=np.int32),
              "scales": np.array([[1, 10], [100, 1000]], np.float32)}  # N = 2, K = 2
    dropped = {"expanded_x": np.ones((2, 2, 3), np.float32), "expanded_row_idx": np.array([-1, 3], np.int32),
               "bias": np.array([[10] * 3, [20] * 3], np.float32), "scales": np.array([[0.5, 2.0]], np.float32),
               "expert_idx": np.array([[1, 0]], np.int32)}
    no_row = dict(dropped, expanded_x=np.ones((2, 3), np.float32), expanded_row_idx=np.array([-1, 1], np.int32))
    return [
        Sample("all-inputs-mode-0", finalize_inputs(rng, mode=0)),
        Sample("all-inputs-mode-3-int64", finalize_inputs(rng, mode=3, index_dtype=np.int64), {"drop_pad_mode": 3}),
        Sample("k1-mode-1", finalize_inputs(rng, mode=1, K=1, H=16), {"drop_pad_mode": 1}),
        Sample("no-tokens-mode-2", finalize_inputs(rng, mode=2, N=0, optional=False), {"drop_pad_mode": 2},
               expect={"y": np.zeros((0, 37), np.float32)}),
        # modes 0/1 read expanded_row_idx[k * N + i], modes 2/3 expanded_row_idx[i * K + k]
        Sample("slot-major-index", layout, {"drop_pad_mode": 0},
               expect={"y": np.array([[0 * 1 + 2 * 10] * 2, [1 * 100 + 3 * 1000] * 2], np.float32)}),
        Sample("token-major-index", layout, {"drop_pad_mode": 2},
               expect={"y": np.array([[0 * 1 + 1 * 10] * 2, [2 * 100 + 3 * 1000] * 2], np.float32)}),
        # a dropped slot (-1) reads a zero row, but its weight times its expert's bias still counts
        Sample("dropped-slot-keeps-its-bias", dropped, {"drop_pad_mode": 1},
               expect={"y": np.array([[0.5 * 20 + 2.0 * (1 + 10)] * 3], np.float32)}),
        # dropless: -1 is a pair whose expert lay outside init routing's active range (op-plugin's
        # reference reads it as a zero row in every mode); its bias term still counts
        Sample("no-row-in-dropless-keeps-its-bias", no_row, {"drop_pad_mode": 2},
               expect={"y": np.array([[0.5 * 20 + 2.0 * (1 + 10)] * 3], np.float32)}),
    ]


def unpermute_samples() -> list:
    from tests.op_table import Sample

    rng = np.random.default_rng(22)
    inf_row = {"permuted_tokens": np.array([[np.inf, np.nan], [1, 2]], np.float32),
               "sorted_indices": np.array([0, 1], np.int32), "probs": np.array([[0.0, 0.5]], np.float32)}
    other_ranks = {"permuted_tokens": np.array([[1, 1], [2, 2], [3, 3]], np.float32),
                   "sorted_indices": np.array([0, -1, 2, 1], np.int32),
                   "probs": np.array([[1.0, 0.0], [2.0, 0.0]], np.float32)}
    return [
        Sample("dropped-rows", unpermute_inputs(rng, dropped=5)),
        Sample("no-probs-int64", unpermute_inputs(rng, K=1, probs=False, index_dtype=np.int64)),
        Sample("no-tokens", unpermute_inputs(rng, N=0, K=2),
               expect={"unpermuted_tokens": np.zeros((0, 50), np.float32)}),
        # a probability of 0 adds nothing: the row is not read, its inf / NaN does not propagate
        Sample("zero-probability-ignores-the-row", inf_row,
               expect={"unpermuted_tokens": np.array([[0.5, 1.0]], np.float32)}),
        # vllm-ascend's expert-parallel path: slots of other ranks' experts have index -1 and weight 0
        Sample("other-ranks-slots-index-minus-1-weight-0", other_ranks,
               expect={"unpermuted_tokens": np.array([[1.0, 1.0], [6.0, 6.0]], np.float32)}),
        # the permute kept no row (P = 0): every index is a dropped row, every token row is 0
        Sample("no-permuted-rows", {"permuted_tokens": np.zeros((0, 3), np.float32),
                                    "sorted_indices": np.array([1, 0, 3, 2], np.int32),
                                    "probs": np.full((2, 2), 0.5, np.float32)},
               expect={"unpermuted_tokens": np.zeros((2, 3), np.float32)}),
    ]


def finalize_bad_cases() -> list:
    from tests.op_table import BadCase

    rng = np.random.default_rng(23)
    good = finalize_inputs(rng, mode=0, N=3, K=2, H=4, E=4)
    pad = finalize_inputs(rng, mode=1, N=3, K=2, H=4, E=4, C=3)

    def with_(base=good, **changes):
        return {**base, **changes}

    idx = good["expanded_row_idx"]
    B = BadCase
    return [
        B("mode-range", good, {"drop_pad_mode": 4},
          "attribute 'drop_pad_mode' must be 0, 1, 2 or 3 (0, 2: dropless; 1, 3: drop-pad; 0, 1: slot-major "
          "index; 2, 3: token-major index), got 4"),
        B("mode-kind", good, {"drop_pad_mode": "1"}, "attribute 'drop_pad_mode' must be INT, got STRING '1'",
          torch=False),
        B("unknown-attribute", good, {"mode": 1},
          "attribute 'mode' is not an attribute of MoeFinalizeRoutingV2 (known: drop_pad_mode)",
          ort=False, torch=False),
        B("x1-type", with_(x1=good["x1"].astype(np.float16)), {},
          "input 'x1' must have the type of expanded_x (float), got float16"),
        B("row-idx-type", with_(expanded_row_idx=idx.astype(np.float32)), {},
          "input 'expanded_row_idx' must be int32 or int64, got float"),
        B("x-rank-dropless", with_(expanded_x=good["expanded_x"][None]), {},
          "input 'expanded_x' must be 2-D [N*K, H] when drop_pad_mode is 0 or 2, got shape [1, 6, 4]"),
        B("x-rank-drop-pad", good, {"drop_pad_mode": 3},
          "input 'expanded_x' must be 3-D [E, C, H] when drop_pad_mode is 1 or 3, got shape [6, 4]"),
        B("row-idx-rank", with_(expanded_row_idx=idx.reshape(3, 2)), {},
          "input 'expanded_row_idx' must be 1-D [N*K], got shape [3, 2]"),
        B("scales-rank", with_(scales=good["scales"].reshape(-1)), {},
          "input 'scales' must be 2-D [N, K] with K >= 1, got shape [6]"),
        B("scales-k0", with_(scales=np.zeros((3, 0), np.float32)), {},
          "input 'scales' must be 2-D [N, K] with K >= 1, got shape [3, 0]"),
        B("row-idx-length", with_(scales=good["scales"][:2]), {},
          "input 'expanded_row_idx' must have N*K = 4 elements (N = 2, K = 2 from scales), got shape [6]"),
        B("x-rows", with_(expanded_x=good["expanded_x"][:5], expanded_row_idx=idx[:6]), {},
          "input 'expanded_x' must have N*K = 6 rows when drop_pad_mode is 0 or 2, got shape [5, 4]"),
        B("x1-shape", with_(x1=good["x1"][:, :3]), {}, "input 'x1' must be [N, H] = [3, 4], got shape [3, 3]"),
        B("x2-without-x1", with_(x1=None), {}, "input 'x2' must be absent when x1 is absent"),
        B("bias-without-expert-idx", with_(expert_idx=None), {},
          "input 'bias' needs expert_idx (the expert of each slot), got no expert_idx"),
        B("bias-hidden", with_(bias=good["bias"][:, :2]), {},
          "input 'bias' must be 2-D [E, H] with E >= 1 and H = 4 (expanded_x.shape[-1]), got shape [4, 2]"),
        B("bias-experts-drop-pad", with_(pad, bias=pad["bias"][:3]), {"drop_pad_mode": 1},
          "input 'bias' must have E = 4 rows (expanded_x.shape[0]) when drop_pad_mode is 1 or 3, got shape [3, 4]"),
        B("expert-idx-shape", with_(expert_idx=good["expert_idx"][:, :1]), {},
          "input 'expert_idx' must be [N, K] = [3, 2], got shape [3, 1]"),
        B("row-idx-high", with_(expanded_row_idx=np.array([0, 1, 2, 6, 4, 5], np.int32)), {},
          "input 'expanded_row_idx' must be -1 (no row) or in [0, N*K) = [0, 6) when drop_pad_mode is 0 or 2, "
          "got 6 at [3]"),
        B("row-idx-below-no-row-in-dropless", with_(expanded_row_idx=np.array([0, 1, -2, 3, 4, 5])),
          {"drop_pad_mode": 2},
          "input 'expanded_row_idx' must be -1 (no row) or in [0, N*K) = [0, 6) when drop_pad_mode is 0 or 2, "
          "got -2 at [2]"),
        B("row-idx-below-dropped", with_(pad, expanded_row_idx=np.array([0, -1, 2, -2, 4, 5], np.int32)),
          {"drop_pad_mode": 1},
          "input 'expanded_row_idx' must be -1 (no row) or in [0, E*C) = [0, 12) when drop_pad_mode is 1 or 3, "
          "got -2 at [3]"),
        B("expert-idx-value", with_(expert_idx=np.array([[0, 1], [4, 2], [1, 1]], np.int32)), {},
          "input 'expert_idx' must be in [0, E) = [0, 4) (rows of bias), got 4 at [1, 0]"),
    ]


def unpermute_bad_cases() -> list:
    from tests.op_table import BadCase

    rng = np.random.default_rng(24)
    good = unpermute_inputs(rng, N=3, K=2, H=4, dropped=1)

    def with_(**changes):
        return {**good, **changes}

    B = BadCase
    return [
        B("padded-mode", good, {"padded_mode": 1},
          "attribute 'padded_mode' must be 0 (the Ascend operator has no padded mode), got 1"),
        B("padded-mode-kind", good, {"padded_mode": 0.0}, "attribute 'padded_mode' must be INT, got FLOAT 0",
          torch=False),
        B("unknown-attribute", good, {"restore_shape": [3, 4]},
          "attribute 'restore_shape' is not an attribute of MoeTokenUnpermute (known: padded_mode)",
          ort=False, torch=False),
        B("indices-type", with_(sorted_indices=good["sorted_indices"].astype(np.float32)), {},
          "input 'sorted_indices' must be int32 or int64, got float"),
        B("tokens-rank", with_(permuted_tokens=good["permuted_tokens"].reshape(-1)), {},
          "input 'permuted_tokens' must be 2-D [P, H], got shape [20]"),
        B("indices-rank", with_(sorted_indices=good["sorted_indices"].reshape(3, 2)), {},
          "input 'sorted_indices' must be 1-D [N*K], got shape [3, 2]"),
        B("probs-rank", with_(probs=good["probs"].reshape(-1)), {},
          "input 'probs' must be 2-D [N, K] with K >= 1, got shape [6]"),
        B("probs-k0", with_(probs=np.zeros((3, 0), np.float32)), {},
          "input 'probs' must be 2-D [N, K] with K >= 1, got shape [3, 0]"),
        B("indices-length", with_(probs=good["probs"][:2]), {},
          "input 'sorted_indices' must have N*K = 4 elements (N = 2, K = 2 from probs), got shape [6]"),
        B("indices-high", with_(sorted_indices=np.array([0, 1, 2, 6, 4, 5], np.int32)), {},
          "input 'sorted_indices' must be in [0, max(P, N*K)) = [0, 6) where probs is not 0, got 6 at [3]"),
        B("indices-negative", with_(sorted_indices=np.array([0, 1, 2, 3, -1, 5])), {},
          "input 'sorted_indices' must be in [0, max(P, N*K)) = [0, 6) where probs is not 0, got -1 at [4]"),
    ]


def isa_outputs() -> np.ndarray:
    """bfloat16 and float16 MoeFinalizeRoutingV2 outputs (as uint16) of this process's instruction-set
    path (ASCEND_MOE_CPU_ISA); imports neither torch nor the op table, for cheap subprocesses."""
    import ml_dtypes
    import onnx
    import onnxruntime as ort
    from onnx import helper

    from ascend_moe_onnx import ort_custom_ops
    from tests import ort_values

    rng = np.random.default_rng(60)
    outs = []
    for dtype, elem in ((ml_dtypes.bfloat16, onnx.TensorProto.BFLOAT16), (np.float16, onnx.TensorProto.FLOAT16)):
        inputs = finalize_inputs(rng, mode=1, N=6, K=3, H=40, dtype=dtype)
        names = ["expanded_x", "expanded_row_idx", "x1", "x2", "bias", "scales", "expert_idx"]
        types = {n: elem for n in ("expanded_x", "x1", "x2", "bias")}
        types.update(expanded_row_idx=onnx.TensorProto.INT32, expert_idx=onnx.TensorProto.INT32,
                     scales=onnx.TensorProto.FLOAT)
        node = helper.make_node("MoeFinalizeRoutingV2", names, ["y"], domain="ascend.moe", drop_pad_mode=1)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, types[n], None) for n in names],
                                  [helper.make_tensor_value_info("y", elem, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                        helper.make_opsetid("ascend.moe", 1)])
        sess = ort.InferenceSession(model.SerializeToString(), ort_custom_ops.session_options(1),
                                    providers=["CPUExecutionProvider"])
        outs.append(ort_values.run(sess, inputs)[0].view(np.uint16).reshape(-1))
    return np.concatenate(outs)
