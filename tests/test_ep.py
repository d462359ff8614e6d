"""Expert parallelism across processes: 2 and 4 gloo ranks on localhost, spawned as the launcher
``python -m ascend_moe_onnx.ep`` (and once through torchrun), checked against the single-process
plain-torch layer. Ranks use one intra-op thread each (2-core machines)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ascend_moe_onnx.ep import artefacts, bench, run
from ascend_moe_onnx.ep.spawn import free_port, run_ranks
from ascend_moe_onnx.models import presets

PRESET = "deepseek-v3"  # shared expert, expert groups: the richest routed layer


def _summary(text: str) -> dict:
    """The launcher's summary line as {field: value}."""
    line = next(ln for ln in text.splitlines() if ln.startswith("ep: "))
    fields = dict(re.findall(r"([\w/-]+)=(\S+)", line))
    fields["status"] = line.split()[-1]
    return fields


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A safetensors checkpoint of the layer (weights unlike the default seed's)."""
    from safetensors.torch import save_file

    from tests.checkpoints import state_dict

    path = tmp_path_factory.mktemp("ckpt") / "layer.safetensors"
    save_file(state_dict(presets.build(PRESET, "tiny", "float32", seed=5), "model.layers.3.mlp."), path)
    return path


@pytest.fixture(scope="module")
def block(checkpoint):
    return presets.build(PRESET, "tiny", "float32", weights=checkpoint)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, block):
    """{ranks: directory} of the checkpoint's layer exported for 2 and 4 ranks (router once)."""
    out = {}
    for n in (2, 4):
        d = tmp_path_factory.mktemp(f"ep{n}")
        artefacts.export_layer(block, n, d, cache_key=(PRESET, "tiny", "checkpoint"))
        out[n] = d
    return out


def _ok(runs, ranks):
    assert [r.returncode for r in runs] == [0] * ranks, "\n".join(r.stderr[-2000:] for r in runs)
    fields = _summary(runs[0].stdout)
    assert fields["status"] == "OK" and fields["choices"] == "identical", runs[0].stdout
    return fields


def test_two_ranks_float32_zero_and_uneven_batches(exported, checkpoint):
    """Checkpoint weights; uneven batches, an all-empty batch, batches where one rank receives
    nothing; timed once."""
    runs = run_ranks(2, [PRESET, "--weights", str(checkpoint), "--onnx", str(exported[2]),
                         "--tokens", "13,3;0;1,0;0,2", "--bench", "1"])
    fields = _ok(runs, 2)
    assert fields["tokens"] == "19" and int(fields["empty-receivers"]) >= 2
    assert float(fields["max-rel-err"]) <= 1e-4
    # The benchmark record (smoke only: no assertion looks at a speed).
    line = next(ln for ln in runs[0].stdout.splitlines() if ln.startswith("ep-bench: "))
    record = json.loads(line[len("ep-bench: "):])
    assert record["ranks"] == 2 and record["tokens"] == 16 and record["ratio"] > 0
    # 13 + 3 tokens x top-4 rows of 64 float32 (+ nothing for scales) leave and come back.
    assert record["dispatch_bytes"] == record["combine_bytes"] == 16 * 4 * 64 * 4
    assert record["dispatch_ideal_bytes"] <= record["dispatch_remote_bytes"] <= record["dispatch_bytes"]
    assert "| 2 | 1 | 16 |" in bench.table([record])


def test_four_ranks_float32(exported, checkpoint):
    """4 ranks (8 local experts each): a single token leaves ranks without rows; uneven counts."""
    runs = run_ranks(4, [PRESET, "--weights", str(checkpoint), "--onnx", str(exported[4]),
                         "--tokens", "1,0,0,0;9,0,2,5"])
    fields = _ok(runs, 4)
    assert int(fields["empty-receivers"]) >= 1 and fields["ranks"] == "4"


def test_wrong_results_fail(exported):
    """Graphs of the checkpoint checked against other weights (the seed's): the check must fail."""
    runs = run_ranks(2, [PRESET, "--onnx", str(exported[2]), "--tokens", "4"])
    assert [r.returncode for r in runs] == [1, 1]
    fields = _summary(runs[0].stdout)
    assert fields["status"] == "FAILED" and float(fields["max-rel-err"]) > 1e-2


def test_torchrun_int8_exports_itself():
    """The documented command, exactly: torchrun, the launcher exporting its own graphs, int8."""
    torchrun = Path(sys.executable).with_name("torchrun")
    cmd = [str(torchrun), "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
           "--master-port", str(free_port()),
           "-m", "ascend_moe_onnx.ep", "mixtral", "--tokens", "6", "--quant", "int8", "--threads", "1"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-3000:]
    fields = _summary(p.stdout)
    assert fields["status"] == "OK" and fields["quant"] == "int8"
    assert 0 < float(fields["bound-use"]) <= 1 and float(fields["vs-dequantised-ref"]) <= 1e-4


@pytest.mark.parametrize("kind", ["exit", "hang"])
def test_failing_rank_stops_the_others(exported, kind):
    """A rank that dies or hangs before the dispatch: rank 0 fails with a clear error within the
    timeout instead of waiting forever."""
    runs = run_ranks(2, [PRESET, "--onnx", str(exported[2]), "--timeout", "3",
                         "--inject-fault", f"1:{kind}@dispatch"], deadline_s=90, wait_for=[0])
    assert runs[0].returncode == 1
    assert "rank 0: all-to-all 'counts' failed: a peer rank died, timed out" in runs[0].stderr
    assert runs[1].returncode == (17 if kind == "exit" else None)


def test_mismatched_graphs_detected_at_startup(exported, tmp_path):
    """Rank 1 holding an expert graph of another split: every rank stops at start-up, naming it."""
    bad = tmp_path / "bad"
    shutil.copytree(exported[2], bad)
    shutil.copy(exported[4] / artefacts.expert_file(1), bad / artefacts.expert_file(1))
    runs = run_ranks(2, [PRESET, "--onnx", str(bad), "--timeout", "20"], deadline_s=90)
    assert [r.returncode for r in runs] == [1, 1]
    for r in runs:
        assert "rank 1: its expert graph takes counts of shape [4, 8], the layer needs" in r.stderr


def test_mismatched_dtype_described(exported, block, tmp_path):
    """An int8 expert graph next to float32 ones differs in its token type (start-up check)."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.models.runtime import export_block

    export_block(artefacts.expert_side(block, 1, 2, "int8"), 8, path=tmp_path / "int8.onnx")
    so = ort_custom_ops.session_options(1)
    load = lambda p: ort.InferenceSession(str(p), so, providers=["CPUExecutionProvider"])  # noqa: E731
    router = load(exported[2] / artefacts.ROUTER)
    layout = artefacts.Layout(**artefacts.read_manifest(exported[2])["layout"])
    good = artefacts.describe(router, load(exported[2] / artefacts.expert_file(1)), layout, "x")
    bad = artefacts.describe(router, load(tmp_path / "int8.onnx"), layout, "x")
    artefacts.check_consistent([good, good])
    with pytest.raises(artefacts.EPError, match=r"rank 1: exported graphs differ from rank 0's in token_type"):
        artefacts.check_consistent([good, bad])


def test_cann_provider_never_falls_back_silently(exported):
    """--provider cann where the CANN EP cannot run: a clear error, not a CPU run."""
    from ascend_moe_onnx.ort_custom_ops.cann import cann_unavailable_reason

    if not cann_unavailable_reason():
        pytest.skip("the CANN EP can run here")
    with pytest.raises(artefacts.EPError, match="CANN"):
        run.session(exported[2] / artefacts.ROUTER, "cann", 1)
    assert run.session(exported[2] / artefacts.ROUTER, "cpu", 1).get_providers() == ["CPUExecutionProvider"]


def test_export_cli_ep_ranks(tmp_path):
    """moe-onnx export --ep-ranks writes the router, one expert graph per rank and the manifest."""
    from ascend_moe_onnx.cli.main import main

    assert main(["export", "mixtral", "--ep-ranks", "2", "--quant", "int8", "-o", str(tmp_path)]) == 0
    manifest = artefacts.read_manifest(tmp_path)
    assert manifest["layout"] == dict(ranks=2, experts=8, top_k=2, hidden=32, quant="int8")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ep.json", "expert_rank0.onnx",
                                                           "expert_rank1.onnx", "router.onnx"]
    assert main(["export", "mixtral", "--ep-ranks", "3", "-o", str(tmp_path / "x")]) == 2


def test_rejected_presets_and_arguments(block):
    """Clear errors: experts not divisible by the ranks, clamped experts, bad --tokens / faults."""
    with pytest.raises(artefacts.EPError, match="32 experts: --ep-ranks/--nproc-per-node 3 must divide"):
        artefacts.check_preset(block, 3)
    with pytest.raises(artefacts.EPError, match="clamp SwiGLU"):
        artefacts.check_preset(presets.build("deepseek-v4", "tiny"), 2)
    assert run.parse_tokens("4", 2) == [[4, 4]]
    assert run.parse_tokens("1,0;0", 2) == [[1, 0], [0, 0]]
    with pytest.raises(run.UsageError, match="needs 1 or 2 non-negative counts"):
        run.parse_tokens("1,2,3", 2)
    with pytest.raises(run.UsageError, match="RANK:KIND@STEP"):
        run.parse_fault("bogus")


def test_int8_bound_holds_and_is_not_trivial(block):
    """The derived int8 bound covers the real quantisation error, and is within 100x of it."""
    from ascend_moe_onnx.ep import check

    inputs = block.example_inputs(32, seed=3)
    exact, _ = check.reference(block, inputs)
    quantised = check.reference_dequantised(block, inputs)
    bound = check.int8_bound(block, inputs)
    err = (quantised - exact).abs()
    assert bool((err <= bound + 1e-5).all())
    assert float(err.max()) > float(bound.max()) / 100
