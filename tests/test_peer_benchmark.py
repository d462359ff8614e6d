"""The peer benchmark (benchmarks/peer_experts.py): its own logic without ggml, and the ctypes
bridge to llama.cpp's ggml (benchmarks/ggml_bridge.py) where ggml is installed (the ``peer`` extra
or ASCEND_MOE_GGML_LIB_DIR)."""

from __future__ import annotations

import numpy as np
import pytest

from ascend_moe_onnx.benchmarks import ggml_bridge, peer_experts
from ascend_moe_onnx.benchmarks import quant_experts as qe


def _ggml():
    try:
        return ggml_bridge.Ggml()
    except ggml_bridge.GgmlUnavailable as e:
        pytest.skip(f"llama.cpp's ggml is not installed (pip install '.[peer]'): {str(e)[:80]}")


# ---- without ggml ------------------------------------------------------------------------------------

def test_blocks_are_the_model_suites():
    assert qe.block_shapes("qwen3-30b-a3b") == dict(H=2048, E=128, k=8, I=768, shared=0)
    assert qe.block_shapes("deepseek-v3") == dict(H=7168, E=256, k=8, I=64, shared=1)


def test_ggml_bytes_follow_the_block_structs_and_llama_cpps_fallback():
    H, I = 2048, 768
    assert ggml_bridge.row_bytes("q4_0", H) == H // 32 * 18
    assert peer_experts.ggml_expert_bytes("q4_0", H, I) == 3 * H * I // 32 * 18
    assert peer_experts.ggml_expert_bytes("q8_0", H, I) == 3 * H * I // 32 * 34
    assert peer_experts.ggml_expert_bytes("q4_K", H, I) == 3 * H * I // 256 * 144
    assert peer_experts.ggml_expert_bytes("bf16", H, I) == 3 * H * I * 2
    # DeepSeek-V3-like down rows hold 64 values: no 256-value super-block, llama.cpp's q5_0 instead
    assert ggml_bridge.projection_type("q4_K", 64) == "q5_0"
    assert peer_experts.ggml_expert_bytes("q4_K", 7168, 64) == 2 * 64 * 7168 // 256 * 144 + 7168 * 64 // 32 * 22
    with pytest.raises(ValueError, match="q8_0 cannot hold rows of 48"):
        ggml_bridge.projection_type("q8_0", 48)
    with pytest.raises(ValueError, match="multiples of 32 values, not 40"):
        ggml_bridge.row_bytes("q4_0", 40)


def test_project_bytes_are_the_arrays_per_expert():
    shape = dict(H=64, E=4, k=2, I=32, shared=0)
    w = qe.weights(shape)
    schemes = qe.schemes_of(w)
    H, I = 64, 32
    assert peer_experts.candidate_expert_bytes("float32", shape, w) == 3 * H * I * 4
    # int4 g32: half a byte per weight, a float scale per 32 inputs of each row
    assert peer_experts.candidate_expert_bytes("int4", shape, schemes["int4"][0]) == \
        3 * H * I // 2 + 4 * (2 * I * H // 32 + H * I // 32)
    assert peer_experts.candidate_expert_bytes("torch-bf16", shape) == 3 * H * I * 2
    with pytest.raises(ValueError, match="from its arrays"):
        peer_experts.candidate_expert_bytes("w8a8", shape)


def test_distinct_experts_and_flops():
    rotation = [{"expert_idx": np.array([[0, 1], [1, 2]])}, {"expert_idx": np.array([[3, 3], [3, 3]])}]
    assert peer_experts.mean_distinct_experts(rotation) == 2.0
    shape = dict(H=8, E=4, k=2, I=4, shared=1)
    assert peer_experts.call_flops(shape, 5) == 2 * 5 * 3 * 3 * 8 * 4


def test_reference_is_the_swiglu_experts_in_float64():
    rng = np.random.default_rng(3)
    T, H, I, E, k = 3, 8, 4, 5, 2
    gate, up, down = rng.standard_normal((E, I, H)), rng.standard_normal((E, I, H)), rng.standard_normal((E, H, I))
    x = rng.standard_normal((T, H)).astype(np.float32)
    idx = np.array([[0, 4], [4, 4], [2, 1]])  # a token may name an expert twice: both slots count
    rw = rng.random((T, k)).astype(np.float32)
    want = np.zeros((T, H))
    for t in range(T):
        for j in range(k):
            e = idx[t, j]
            g, u = gate[e] @ x[t], up[e] @ x[t]
            want[t] += rw[t, j] * (down[e] @ (g / (1 + np.exp(-g)) * u))
    got = peer_experts.reference_ffn(x, idx, rw, lambda e: (gate[e], up[e], down[e]))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert peer_experts.errors(got.astype(np.float32), got)["rms"] < 1e-7
    e = peer_experts.errors(1.5 * got, got)
    assert e["rms"] == pytest.approx(0.5) and e["max"] == pytest.approx(0.5)


def test_split_gate_up_takes_the_interleaved_rows():
    fc1 = np.arange(12).reshape(6, 2)
    gate, up = peer_experts.split_gate_up(fc1)
    assert gate[:, 0].tolist() == [0, 4, 8] and up[:, 0].tolist() == [2, 6, 10]


def test_arithmetic_of_each_candidate():
    a = peer_experts.arithmetic
    assert [a(c, False) for c in ("float32", "int4", "qmoe-int4", "w4a8", "ggml-q4_K-repack", "ggml-bf16")] == \
        ["fp32", "fp32", "fp32", "int8", "int8", "fp32"]
    assert a("torch-bf16", True) == "bf16" and a("ggml-bf16", True) == "bf16"


def test_slow_runners_are_predicted_from_their_last_case():
    last = {"a": (16, 0.1), "b@2t": (256, 1.0)}
    assert peer_experts.predicted_too_slow(last, 256, 2.0) == set()  # a: 0.1 s * 256 / 16 = 1.6 s
    assert peer_experts.predicted_too_slow(last, 512, 2.0) == {"a"}
    assert peer_experts.predicted_too_slow(last, 1024, 2.0) == {"a", "b@2t"}


def _row(block, T, n, cand, us, **kw):
    return dict(block=block, tokens=T, threads=n, candidate=cand, us=us, bytes=2**20, flops=10, read_share=0.5,
                compute_share=0.25, arithmetic="fp32", other_load_cores=0.1, err_rms=1e-3, err_max=2e-3, **kw)


def test_pairings_scaling_and_report():
    rows = [_row("b", 16, 1, "w4a8", 100.0), _row("b", 16, 1, "int4", 200.0), _row("b", 16, 1, "ggml-q4_0", 150.0),
            _row("b", 16, 2, "w4a8", 60.0), _row("b", 16, 2, "int4", 100.0), _row("b", 16, 2, "ggml-q4_0", 90.0),
            _row("b", 16, 1, "float32", 400.0),
            dict(block="b", tokens=16, threads=1, candidate="torch-bf16", skipped="predicted over 2 s per call")]
    ratios = {(r["threads"], r["project"], r["peer"]): r["ratio"] for r in peer_experts.pairing_ratios(rows)}
    assert ratios[(1, "w4a8", "ggml-q4_0")] == pytest.approx(1.5)
    assert ratios[(1, "int4", "ggml-q4_0")] == pytest.approx(0.75)
    assert ratios[(2, "w4a8", "ggml-q4_0")] == pytest.approx(1.5)
    assert not any(r["peer"] == "torch-bf16" for r in peer_experts.pairing_ratios(rows))
    scaling = {(s["candidate"]): s["ratio"] for s in peer_experts.thread_scaling(rows)}
    assert scaling == pytest.approx({"w4a8": 0.6, "int4": 0.5, "ggml-q4_0": 0.6})
    results = {"run": {"command": "python -m x", "started": "now", "seconds": 1.0, "load_start": [1, 1, 1],
                       "load_end": [2, 2, 2], "threads": [1, 2]},
               "machine": {"cpu": "cpu", "cores": 2, "isa": "avx2"},
               "ggml": {"available": False, "reason": "not found"},
               "rates": {"read": {"1": 1e10, "2": 2e10}, "peaks": {"1": {"fp32": 1e11}, "2": {"fp32": 2e11}}},
               "rows": rows}
    md = peer_experts.markdown(results)
    assert "not available (not found)" in md
    assert "| b | W4A16 g32 | 16 | 2 | 0.50 | 0.10 |" in md  # the thread-scaling table
    assert "150 (0.75 / 1.50)" in md  # ggml q4_0 ÷ W4A16, ÷ W4A8
    assert "skipped: predicted over 2 s per call" in md


def test_missing_ggml_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.delenv(ggml_bridge.GGML_LIB_DIR_ENV, raising=False)
    monkeypatch.setattr(ggml_bridge, "_package_lib_dir", lambda: None)
    assert ggml_bridge.library_dir(tmp_path) is None
    with pytest.raises(ggml_bridge.GgmlUnavailable, match=r"pip install --no-build-isolation -e \"\.\[peer\]\""):
        ggml_bridge.Ggml(tmp_path)


def test_benchmark_runs_the_other_candidates_without_ggml(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(ggml_bridge.GGML_LIB_DIR_ENV, raising=False)
    monkeypatch.setattr(ggml_bridge, "_package_lib_dir", lambda: None)
    out = tmp_path / "out"
    assert peer_experts.main(["--size", "tiny", "--blocks", "deepseek-v3", "--tokens", "2", "--threads", "1",
                              "--repeats", "1", "--candidates", "float32,w4a8,ggml-q4_0",
                              "--ggml-lib", str(tmp_path), "--out", str(out)]) == 0
    assert "ggml candidates skipped" in capsys.readouterr().err
    import json

    results = json.loads((out / "peer_experts.json").read_text())
    assert {r["candidate"] for r in results["rows"]} == {"float32", "w4a8"}
    float_row = next(r for r in results["rows"] if r["candidate"] == "float32")
    assert float_row["err_rms"] < 1e-5  # the library's float32 kernel against its float64 reference
    assert "not available" in (out / "peer_experts.md").read_text()


def test_benchmark_of_the_librarys_candidates_alone_writes_its_report(tmp_path):
    out = tmp_path / "out"
    assert peer_experts.main(["--size", "tiny", "--blocks", "deepseek-v3", "--tokens", "2", "--threads", "1",
                              "--repeats", "1", "--candidates", "float32,int4", "--out", str(out)]) == 0
    assert "ggml: not available (no ggml candidate selected)" in (out / "peer_experts.md").read_text()


# ---- the bridge, against ggml ------------------------------------------------------------------------

def test_bridge_row_sizes_match_ggml():
    g = _ggml()
    for t, (values, _) in ggml_bridge.BLOCK_BYTES.items():
        for n in (values * 8, values * 24):
            assert g.row_bytes(t, n) == ggml_bridge.row_bytes(t, n), (t, n)


@pytest.mark.parametrize("type_name", ["q8_0", "q4_0", "q4_K", "bf16"])
def test_bridge_quantizes_and_dequantizes_through_ggml(type_name):
    g = _ggml()
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((8, 256)).astype(np.float32)
    out = ggml_bridge.aligned_bytes(8 * g.row_bytes(type_name, 256))
    g.quantize_rows(type_name, rows, out)
    back = g.to_float(type_name, out, rows.size).reshape(rows.shape)
    rel = np.linalg.norm(back - rows) / np.linalg.norm(rows)
    assert rel < {"q8_0": 0.01, "q4_0": 0.15, "q4_K": 0.1, "bf16": 0.005}[type_name]
    assert rel > 0  # really quantized


@pytest.mark.parametrize("type_name,repack", [("f32", False), ("q8_0", False), ("q4_0", False), ("q4_0", True),
                                              ("q4_K", True), ("bf16", False)])
def test_bridge_moe_ffn_matches_the_reference_on_its_own_weights(type_name, repack):
    g = _ggml()
    if repack and not g.has_buffer_type(ggml_bridge.REPACK_BUFFER):
        pytest.skip("this ggml build has no CPU_REPACK buffer")
    rng = np.random.default_rng(1)
    E, H, I, k, T = 8, 256, 64, 3, 5
    fc1 = rng.standard_normal((E + 1, 2 * I, H)).astype(np.float32) * H ** -0.5
    fc2 = rng.standard_normal((E + 1, H, I)).astype(np.float32) * I ** -0.5

    def stack(mats, n, r, c):
        return ggml_bridge.quantize_stack(g, type_name, mats, n, r, c)

    routed = (stack(lambda e: fc1[e, 0::2], E, I, H), stack(lambda e: fc1[e, 1::2], E, I, H),
              stack(lambda e: fc2[e], E, H, I))
    shared = (stack(lambda e: fc1[E, 0::2], 1, I, H), stack(lambda e: fc1[E, 1::2], 1, I, H),
              stack(lambda e: fc2[E], 1, H, I))
    ffn = ggml_bridge.MoeFfn(g, *routed, shared=shared, repack=repack, threads=(1, 2))
    try:
        if repack:  # q4_K down rows of 64 values fall back to q5_0, which ggml does not repack
            assert ffn.repacked == [True, True, type_name == "q4_0", True, True, type_name == "q4_0"]
        x = rng.standard_normal((T, H)).astype(np.float32)
        idx = np.stack([rng.choice(E, k, replace=False) for _ in range(T)])
        rw = rng.random((T, k)).astype(np.float32)
        gr = ffn.graph(x, idx, rw)
        ffn.compute(gr, 1)
        y = ffn.output(gr)
        ffn.compute(gr, 2)  # the inputs survive a call, the thread count changes nothing
        np.testing.assert_array_equal(ffn.output(gr), y)
        full_idx = np.concatenate([idx, np.full((T, 1), E)], 1)
        full_w = np.concatenate([rw, np.ones((T, 1), np.float32)], 1)
        ref = peer_experts.reference_ffn(x, full_idx, full_w, peer_experts._ggml_expert(g, ffn))
        err = peer_experts.errors(y, ref)
        # ggml quantizes the activations of its quantized types (q8_0 / q8_K) and bf16 weights' to bf16
        assert err["rms"] < {"f32": 1e-5, "bf16": 1e-2}.get(type_name, 4e-2), err
    finally:
        ffn.close()
