"""Smoke test of the benchmark harness: ``--smoke`` (tiny sizes) writes its reports with the
expected fields. Never a timing test: no assertion looks at a speed."""

from __future__ import annotations

import json

import pytest
import torch

from ascend_moe_onnx.benchmarks import ascend_layer, gating, gating_isa, model, report, rerouting, runner, timing


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """One ``--smoke`` run of every suite: (exit code, output directory, parsed JSON)."""
    out = tmp_path_factory.mktemp("bench")
    code = runner.main(["--smoke", "--out", str(out)])
    return code, out, json.loads((out / "smoke.json").read_text())


def test_smoke_run_writes_reports(smoke):
    """Exit code 0; JSON and Markdown always, the PNG when matplotlib is installed."""
    code, out, _ = smoke
    assert code == 0
    assert (out / "smoke.json").is_file() and (out / "smoke.md").is_file()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    png = out / "smoke_gating.png"
    assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_smoke_ascend_layer(smoke):
    """The recipes' layer exported from Ascend code computes the project's block's output, and both
    are timed on every case of the plan."""
    _, _, data = smoke
    plan = runner.plans("smoke")["ascend_layer"]
    rows = data["ascend_layer"]
    assert [(r["threads"], r["tokens"]) for r in rows] == [(t, n) for t in plan.threads for n in plan.tokens]
    for r in rows:
        assert set(r["best_s"]) == set(ascend_layer.CANDIDATES) and all(v > 0 for v in r["best_s"].values())
        assert r["max_rel_diff"] <= 1e-5, r["max_rel_diff"]
        assert r["ratio"] == r["best_s"]["recipes"] / r["best_s"]["block"]


def test_smoke_json_fields(smoke):
    """Machine info, run info and one row per case with every candidate timed and every ratio."""
    _, _, data = smoke
    for key in ("cpu_model", "cores", "onnxruntime", "torch", "isa_path"):
        assert data["machine"][key] not in (None, "")
    assert data["run"]["mode"] == "smoke" and data["run"]["repeats"] >= 1
    g = data["gating"]
    plan = runner.plans("smoke")["gating"]
    assert len(g) == len(plan.presets) * len(plan.tokens) * len(plan.dtypes) * len(plan.threads)
    for row in g:
        assert set(row["time_s"]) == {*gating.CANDIDATES, gating.FLOOR}
        assert set(row["speedup"]) == set(gating.BASELINES)
        assert all(t > 0 for t in row["time_s"].values())
        assert all(len(s) == data["run"]["repeats"] for s in row["samples_s"].values())
        # every candidate computes the same routing on float32 logits
        if row["dtype"] == "float32":
            assert min(row["agreement"].values()) == 1.0, row["agreement"]
    assert data["gating_scaling"] and all(r["speedup"] > 0 for r in data["gating_scaling"])
    isa = data["gating_isa"]  # ns/row per ISA path, each forced in a child process
    assert [r["preset"] for r in isa] == list(plan.presets)
    for row in isa:
        assert list(row["ns_per_row"]) == gating_isa.paths() and all(v > 0 for v in row["ns_per_row"].values())
        assert set(row["floor_ns"]) <= set(row["ns_per_row"])
    for row in data["rerouting"]:
        assert set(rerouting.BASELINES) <= set(row["time_s"])
        assert row["copy_limit"] in rerouting.COPIES
        assert row["fraction_of_copy"] > 0 and row["gb_per_s"][rerouting.FUSED] > 0
        assert row["fraction_of_node_copy"] > 0
    assert {r["counts"] for r in data["rerouting"]} == {"uniform", "skewed"}
    assert all("other_load_cores" in r for r in g + data["rerouting"] + data["model"])
    for row in data["model"]:
        assert set(row["speedup"]) == set(model.BASELINES)
        assert min(row["agreement"].values()) == 1.0
        # decode-sized cases rotate through several inputs, the same for every candidate
        assert row["rotation"] == (model.ROTATION if row["tokens"] <= model.ROTATE_MAX_TOKENS else 1)
        assert row["bound"]["rotation"] == row["rotation"]
        assert row["process_peak_mib"] > 0 and set(row["peak_mib"]) == set(row["best_s"])


def test_smoke_markdown_has_every_section(smoke):
    """The Markdown report has the machine table and one table per suite."""
    _, out, _ = smoke
    text = (out / "smoke.md").read_text()
    for heading in ("# Benchmark results (smoke)", "## MoeGatingTopKHash", "### Thread scaling",
                    "### Per instruction-set path", "## MoeReRouting", "## Model level"):
        assert heading in text
    assert "| isa_path |" in text


def test_targets_are_evaluated_from_rows():
    """The target checks read the rows they need (synthetic rows: no measurement)."""
    sp = {n: 20.0 for n in gating.BASELINES}
    rows = {"gating": [dict(preset="DeepSeek-V3", dtype="float32", tokens=t, threads=1, speedup=sp)
                       for t in (16, 4096)],
            "gating_scaling": [dict(preset="DeepSeek-V3", dtype="float32", tokens=4096, threads=2, speedup=1.2)],
            "rerouting": [dict(tokens=16384, hidden=7168, dtype="int8", threads=1, fraction_of_copy=0.9,
                               speedup={n: 1.5 for n in rerouting.BASELINES}),
                          dict(tokens=1024, hidden=2048, dtype="int8", threads=1, fraction_of_copy=0.85,
                               fraction_of_node_copy=0.95, speedup={n: 1.5 for n in rerouting.BASELINES})]}
    got = {t["target"]: t["met"] for t in report.targets(rows)}
    assert len(got) == 7
    assert [met for name, met in got.items() if "2 threads" in name] == [False]
    assert [met for name, met in got.items() if "in cache" in name] == [False]  # 85% < 90%
    assert sum(got.values()) == 5


def test_measure_interleaves_and_counts_samples():
    """measure() calls every candidate, repeats times, in rotating order."""
    calls = []
    t = timing.measure({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3,
                       min_sample_s=0.0)
    assert set(t) == {"a", "b"} and all(len(v.samples) == 3 for v in t.values())
    assert all(v.calls_per_sample == 1 for v in t.values())
    # after the calibration calls, the repetitions rotate the order: ab, ba, ab
    assert calls[2 * timing.CALIBRATION_CALLS:] == ["a", "b", "b", "a", "a", "b"]


def test_model_rotation_selects_different_experts_and_bound_reads_dram_past_the_cache():
    """The rotated inputs of a decode case route to different experts; the bound averages the
    calls and reads at the DRAM rate once the rotation's working set exceeds the cache."""
    block = model.build_block("qwen3-30b-a3b", "tiny")
    xs = model._inputs(block, 1, 4)
    assert len(xs) == 4 and len(model._inputs(block, model.ROTATE_MAX_TOKENS + 1, 4)) == 1
    with torch.no_grad():
        chosen = {tuple(sorted(block.route_native(block.router_logits_native(x), {"hidden_states": x})[1]
                               .flatten().tolist())) for x in xs}
    assert len(chosen) > 1
    rates = {"matmul_flops": 1e15, "read_bytes": 1e9, "llc_bytes": 1, "threads": 1}
    b = model.lower_bound(block, xs, rates)
    c = block.cfg
    assert b["read_probe"] == "dram" and b["rotation"] == 4
    assert b["bytes"] <= b["working_set_bytes"] <= 4 * (c.experts * 3 * c.hidden * c.intermediate + c.hidden * c.experts)
    assert b["seconds"] == pytest.approx(b["bytes"] / 1e9)  # memory-bound at these rates
    assert model.lower_bound(block, xs[:1], rates)["working_set_bytes"] < b["working_set_bytes"]


def test_read_probe_reports_each_stream_count_and_feeds_the_bound(monkeypatch):
    """The native read probe (compiled on first use; the set-up installs a C compiler) gives a rate
    per stream count, and read_rate takes the fastest of it and torch's sum."""
    import numpy as np

    from ascend_moe_onnx.benchmarks import read_probe

    got = read_probe.read_rates(np.ones(2**20, np.float32), calls=3)
    assert set(got) == set(read_probe.STREAMS) and all(1e8 < v < 1e13 for v in got.values()), got
    monkeypatch.setattr(read_probe, "read_rates", lambda buf, calls: {4: 1e15})
    assert model.read_rate(2**20, 1, calls=2) == 1e15


def test_model_targets_are_evaluated_from_full_size_rows():
    """The model-level targets: the default formulation against the best baseline, onnx against the best
    baseline and against the default, the default's share of the bound at 1 and 16 tokens; smoke
    (tiny) rows are not judged."""
    def row(tokens, size="full", **best):
        return dict(size=size, block="b", tokens=tokens, threads=1, best_s=best, share={"ort": 0.85},
                    share_dram={"ort": 0.9}, bound={"read_probe": "cache"})

    rows = [row(1, ort=1.0, onnx=2.5, torch=2.0), row(16, **{"ort": 1.2, "onnx": 1.5, "ort-moe": 1.0}),
            row(256, ort=1.0, onnx=2.2, torch=1.0), row(1, size="tiny", ort=9.0, onnx=9.0, torch=1.0)]
    got = {name: met for name, _, met in model.targets(rows)}
    assert len(got) == 11
    assert [n for n, met in got.items() if not met] == [
        "model b 1 tok, 1 thr: onnx within 2x of ort",
        "model b 16 tok, 1 thr: ort within 1.1x of the best of ort-moe and torch",
        "model b 256 tok, 1 thr: onnx within 2x of the best of ort-moe and torch",
        "model b 256 tok, 1 thr: onnx within 2x of ort"]


def test_experts_threshold_times_both_branches_and_checks_they_agree():
    """benchmarks/experts_threshold.py on a tiny block: both If branches timed, their outputs
    compared, the routed rows reported (OWN_KERNEL_MAX_ROWS is left as it was)."""
    from ascend_moe_onnx.benchmarks import experts_threshold
    from ascend_moe_onnx.exporters import experts_graph

    before = experts_graph.OWN_KERNEL_MAX_ROWS
    rows = experts_threshold.run(["qwen3-30b-a3b"], [3, 40], repeats=1, size="tiny", log=lambda *_: None)
    assert before == experts_graph.OWN_KERNEL_MAX_ROWS
    assert [(r["tokens"], r["routed_rows"]) for r in rows] == [(3, 12), (40, 160)]
    assert all(r["own_s"] > 0 and r["moe_s"] > 0 and r["max_rel_diff"] <= 1e-4 for r in rows), rows


def test_grouped_matmul_benchmark_smoke(capsys):
    """The GroupedMatmul benchmark runs its tiny cases and prints its table (kernel and torch)."""
    from ascend_moe_onnx.benchmarks import grouped_matmul

    assert grouped_matmul.main(["--smoke", "--repeats", "1", "--min-sample-s", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "| tiny | bfloat16 | 2 |" in out and "| tiny (weight [E, N, K]) | float32 | 1 |" in out


def test_quantized_experts_benchmark_and_accuracy_smoke(capsys):
    """The quantized-experts benchmark (QMoE agrees with the library on the same integers) and the
    accuracy table run on the tiny blocks."""
    from ascend_moe_onnx.benchmarks import quant_accuracy, quant_experts

    assert quant_experts.main(["--size", "tiny", "--tokens", "1,3", "--repeats", "1", "--blocks", "deepseek-v3"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("deepseek-v3")]
    candidates = {"float32", "bfloat16", "torch-bf16", "int8", "int4", "w8a8", "w4a8", "qmoe-int8", "qmoe-int4"}
    assert {r[2] for r in rows} == candidates and len(rows) == 2 * len(candidates)
    # QMoE computes on the same integers as the library's A16 kernel; the A8 kernels add the int8
    # rounding of the activations (within the 5e-2 that `verify --act-quant int8` allows); the
    # bfloat16 kernel and torch's bfloat16 loop round the SwiGLU rows alike (within 1e-2, as verify)
    diffs = {(r[1], r[2]): float(r[-1]) for r in rows if "rel" in r}
    assert len(diffs) == 10
    assert max(d for (_, c), d in diffs.items() if c == "bfloat16") < 1e-2
    assert max(d for (_, c), d in diffs.items() if c.startswith("qmoe")) < 1e-4
    assert max(d for (_, c), d in diffs.items() if c in ("w8a8", "w4a8")) < 5e-2
    assert quant_accuracy.main(["--size", "tiny", "--tokens", "16", "--blocks", "qwen3-30b-a3b"]) == 0
    table = capsys.readouterr().out
    assert "| qwen3-30b-a3b | int8 per channel |" in table and "int4 per group of 32" in table
