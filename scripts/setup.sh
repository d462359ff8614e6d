#!/usr/bin/env bash
# One command for a new user: create .venv, install torch (pinned, CPU) and the package (builds the
# ONNX Runtime custom-op library), then run the main job. `--no-run` stops after installing.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
run_main=1
[ "${1:-}" = "--no-run" ] && run_main=0

need_apt=()
command -v g++ >/dev/null || need_apt+=(g++)
command -v cmake >/dev/null || need_apt+=(cmake)
python3 -c "import venv, ensurepip" 2>/dev/null || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing ${need_apt[*]} with apt-get"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}"
  else
    echo "setup: please install: ${need_apt[*]}" >&2; exit 1
  fi
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
py=.venv/bin/python
$py -m pip install -q --upgrade pip
# Pin torch first: an unpinned torch would pull a multi-GB CUDA build.
$py -m pip install -q "torch==${TORCH_VERSION}"
$py -m pip install -q "scikit-build-core>=0.11"
# --no-build-isolation keeps the build directory reusable (incremental rebuilds).
$py -m pip install -q --no-build-isolation -e ".[test,bench]"
$py -c "from ascend_moe_onnx import ort_custom_ops; print('setup: custom-op library at', ort_custom_ops.get_library_path())"

if [ $run_main = 1 ]; then
  # The main job: export every tiny MoE block, run it in ONNX Runtime with the library (and through
  # the function bodies without it) and compare with torch.
  .venv/bin/moe-onnx verify --all --size tiny
fi
