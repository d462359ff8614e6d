"""The ``moe-onnx`` command: each subcommand, exit codes, and one-line errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import torch
from safetensors.torch import save_file

from ascend_moe_onnx.cli import main as cli
from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.models import presets
from ascend_moe_onnx.onnx_schemas.functions import strip_functions

REPO = Path(__file__).resolve().parent.parent


def run_main(capsys, *argv):
    """main(argv) -> (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _console_script() -> list[str]:
    exe = Path(sys.executable).parent / "moe-onnx"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "ascend_moe_onnx.cli.main"]


def test_verify_table_and_exit_code(capsys):
    code, out, err = run_main(capsys, "verify", "mixtral", "ep-int8", "--token-counts", "1,3,20")
    assert code == 0, out + err
    for word in ("index agree", "max abs err", "max rel err", "tolerance", "ort-functions vs torch"):
        assert word in out
    assert out.count("PASS") == 6
    assert "6/6 checks passed for 2 block(s)" in out
    # every row says which token counts it compared
    assert "tokens" in out.splitlines()[0] and out.count(" 1,3,20 ") == 6


def test_verify_at_the_export_token_count_compares(capsys):
    """--token-counts 8 (the export example's count) runs and compares at 8 tokens; it used to be
    dropped and the checks passed having compared nothing."""
    code, out, err = run_main(capsys, "verify", "mixtral", "--token-counts", str(verify.EXPORT_TOKENS))
    assert code == 0, out + err
    assert out.count("PASS") == 3 and "3/3 checks passed" in out
    checks = verify.verify_preset("mixtral", token_counts=[verify.EXPORT_TOKENS])
    assert [(c.tokens, c.compared) for c in checks] == [([verify.EXPORT_TOKENS], 1)] * 3


def test_a_check_that_compared_nothing_does_not_pass():
    assert not verify.Check("p", "float32", "ort", "torch", tol=1.0).passed


def test_verify_failure_exits_1(capsys, monkeypatch):
    monkeypatch.setitem(verify.TOLERANCES, "float32", 0.0)  # any rounding difference now fails
    code, out, _ = run_main(capsys, "verify", "deepseek-v2", "--token-counts", "33")
    assert code == 1
    assert "FAIL" in out


def test_verify_list(capsys):
    code, out, _ = run_main(capsys, "verify", "--list")
    assert code == 0
    assert all(name in out for name in presets.PRESETS)


def test_verify_with_weights_and_dtype(capsys, tmp_path):
    from tests.checkpoints import state_dict

    save_file(state_dict(presets.build("deepseek-v3", seed=4), "model.layers.9.mlp."), tmp_path / "w.safetensors")
    code, out, err = run_main(capsys, "verify", "deepseek-v3", "--weights", tmp_path, "--dtype", "bfloat16",
                              "--token-counts", "2,9")
    assert code == 0, out + err
    assert "bfloat16" in out and "FAIL" not in out


def test_export_then_info(capsys, tmp_path):
    path = tmp_path / "v4.onnx"
    code, out, err = run_main(capsys, "export", "deepseek-v4-hash-image", "-o", path, "--tokens", "3")
    assert code == 0, err
    assert f"wrote {path}" in out
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ["hidden_states", "input_ids", "additional_token_mask"]
    code, out, err = run_main(capsys, "info", path)
    assert code == 0, err
    # the router, and the ort formulation's MoeRoutedExperts (inside an If)
    assert "2 ascend.moe node(s)" in out and "MoeGatingTopKHash" in out and "MoeRoutedExperts" in out
    assert "k=6" in out and "norm_type=2" in out and "routed_scaling_factor=1.5" in out
    assert "out_flag=0" in out and "eps=1e-20" in out
    assert "CPUExecutionProvider" in out and "CANNExecutionProvider" in out
    assert "without the library: attached function body" in out
    onnx.save(strip_functions(model), str(path))
    code, out, _ = run_main(capsys, "info", path)
    assert "no function body, the session would fail" in out


def test_export_writes_external_data_past_the_protobuf_limit(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(presets, "PROTOBUF_LIMIT", 1)  # any block now counts as too large
    path = tmp_path / "qwen.onnx"
    code, out, err = run_main(capsys, "export", "qwen3-moe", "-o", path)
    assert code == 0, err
    assert "qwen.onnx.data" in out and (tmp_path / "qwen.onnx.data").is_file()
    onnx.checker.check_model(str(path), full_check=False)


def test_export_full_size_preset(capsys, tmp_path):
    """A full preset keeps the published hidden size; random weights are made to fit in 1 GiB
    (mixtral's 14336-wide experts become 2048 wide) unless --intermediate says otherwise."""
    path = tmp_path / "mixtral.onnx"
    code, out, err = run_main(capsys, "export", "mixtral", "--size", "full", "--intermediate", "16", "-o", path)
    assert code == 0, err
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in onnx.load(str(path)).graph.input}
    assert dims["hidden_states"] == ["tokens", 4096]
    assert presets.fit_intermediate(presets.config("mixtral", "full"), "float32") == 2048


@pytest.mark.parametrize("argv,message", [
    (["verify", "no-such-model"], "unknown preset 'no-such-model'"),
    (["export", "nope", "-o", "x.onnx"], "unknown preset 'nope'"),
    (["verify", "mixtral", "--weights", "/no/such/dir"], "no such file or directory: /no/such/dir"),
    (["verify"], "name at least one PRESET"),
    (["verify", "mixtral", "--tokens", "1"], "--tokens must be >= 2"),
    (["verify", "mixtral", "--token-counts", "1,x"], "--token-counts must be comma-separated"),
    (["info", "/no/such/model.onnx"], "no such file: /no/such/model.onnx"),
    (["export", "mixtral", "-o", "/no/such/dir/m.onnx"], "output directory does not exist"),
])
def test_errors_are_one_line_exit_2(capsys, argv, message):
    code, out, err = run_main(capsys, *argv)
    assert code == 2
    assert err.strip().count("\n") == 0, err
    assert err.startswith("moe-onnx: error: ") and message in err


def test_malformed_model_and_bad_checkpoint(capsys, tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage that is not a protobuf")
    code, _, err = run_main(capsys, "info", bad)
    assert code == 2 and "is not an ONNX model" in err and err.count("\n") == 1
    ckpt = tmp_path / "w.safetensors"
    save_file({"model.layers.0.mlp.gate.weight": torch.zeros(4, 8)}, ckpt)
    code, _, err = run_main(capsys, "export", "mixtral", "--weights", ckpt, "-o", tmp_path / "m.onnx")
    assert code == 2 and "no MoE layer" in err and err.count("\n") == 1


def _model_files(tmp_path) -> dict:
    """Files that are not ONNX models, by what is wrong with them."""
    good = onnx.helper.make_model(onnx.helper.make_graph([], "g", [], []), ir_version=10).SerializeToString()
    files = {"empty": b"", "truncated": good[: len(good) // 2], "text": b"# not a model\n" * 20,
             "no graph": b"\x08\x07"}
    out = {}
    for name, data in files.items():
        out[name] = tmp_path / f"{name.replace(' ', '_')}.onnx"
        out[name].write_bytes(data)
    return out


BAD_FILE_REASONS = {"empty": "(empty: 0 bytes)", "truncated": ": truncated or corrupt (DecodeError",
                    "text": ": truncated or corrupt (", "no graph": "(2 bytes that parse as a model with IR version 7 "
                                                                      "but no graph)"}


@pytest.mark.parametrize("kind", sorted(BAD_FILE_REASONS))
def test_info_on_a_file_that_is_not_a_model(capsys, tmp_path, kind):
    """Empty, truncated or non-ONNX: one line naming the file and the reason, exit 2 (protobuf
    reads an empty file as an empty model, which would print as "IR version 0")."""
    path = _model_files(tmp_path)[kind]
    code, out, err = run_main(capsys, "info", path)
    assert code == 2 and err.count("\n") == 1, (out, err)
    assert err.startswith(f"moe-onnx: error: {path} is not an ONNX model") and BAD_FILE_REASONS[kind] in err, err


@pytest.mark.parametrize("kind", sorted(BAD_FILE_REASONS))
def test_inference_session_on_a_file_that_is_not_a_model(tmp_path, kind):
    """ValueError naming the file (or the bytes) and the reason, not protobuf's bare DecodeError."""
    from ascend_moe_onnx import ort_custom_ops

    path = _model_files(tmp_path)[kind]
    with pytest.raises(ValueError, match=re.escape(f"{path} is not an ONNX model")) as info:
        ort_custom_ops.inference_session(path)
    assert BAD_FILE_REASONS[kind] in str(info.value)
    with pytest.raises(ValueError, match="^the model bytes are not an ONNX model"):
        ort_custom_ops.inference_session(path.read_bytes())


def test_console_script_runs_without_traceback(tmp_path):
    """The installed entry point: a listing, and an error as one stderr line with exit code 2."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    ok = subprocess.run(_console_script() + ["verify", "--list"], capture_output=True, text=True, env=env,
                        timeout=120)
    assert ok.returncode == 0 and "deepseek-v3" in ok.stdout, ok.stderr
    bad = subprocess.run(_console_script() + ["info", str(tmp_path / "missing.onnx")], capture_output=True,
                         text=True, env=env, timeout=120)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [f"moe-onnx: error: no such file: {tmp_path / 'missing.onnx'}"]
    assert "Traceback" not in bad.stderr


def test_subcommand_registry_has_room_for_more():
    parser = cli.build_parser()
    assert set(cli.SUBCOMMANDS) >= {"export", "verify", "info"}
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["no-such-command"])
    assert e.value.code == 2
