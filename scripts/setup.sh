#!/usr/bin/env bash
# One command for a new user: create .venv, install torch (pinned, CPU) and the package (builds the
# ONNX Runtime custom-op library), then run the main job. `--no-run` stops after installing.
# `--cann` also creates .venv-cann (onnxruntime-cann, for tests/cann; docs/ascend.md).
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
run_main=1
with_cann=0
for arg in "$@"; do
  case "$arg" in
    --no-run) run_main=0 ;;
    --cann) with_cann=1 ;;
    *) echo "setup: unknown option $arg (use --no-run, --cann)" >&2; exit 2 ;;
  esac
done

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
# pip -qq: errors only (a pip configuration's index locations may warn once per package otherwise)
echo "setup: installing torch and the package into .venv (builds the C++ library: several minutes)"
$py -m pip install -qq --upgrade pip
# Pin torch first: an unpinned torch would pull a multi-GB CUDA build.
$py -m pip install -qq "torch==${TORCH_VERSION}"
$py -m pip install -qq "scikit-build-core>=0.11"
# --no-build-isolation keeps the build directory reusable (incremental rebuilds).
# not the `peer` extra: it builds llama.cpp from source (~20 min); opt in as docs/benchmarks.md says
$py -m pip install -qq --no-build-isolation -e ".[test,bench,models,hf,genai]"
$py -c "from ascend_moe_onnx import ort_custom_ops; print('setup: custom-op library at', ort_custom_ops.get_library_path())"

if [ $with_cann = 1 ]; then
  # onnxruntime-cann conflicts with onnxruntime: its own environment, NumPy 1.x (the wheel's ABI).
  # The wheel depends on `onnxruntime`, hence --no-deps and its real dependencies listed here; the
  # package goes in without its dependencies too (no torch here: tests/cann need none).
  [ -x .venv-cann/bin/python ] || python3 -m venv .venv-cann
  cpy=.venv-cann/bin/python
  $cpy -m pip install -qq --upgrade pip
  $cpy -m pip install -qq "numpy<2" "ml_dtypes<0.6" onnx pytest pytest-xdist "scikit-build-core>=0.11" flatbuffers packaging protobuf sympy
  $cpy -m pip install -qq --no-deps "onnxruntime-cann==1.24.4"
  $cpy -m pip install -qq --no-deps --no-build-isolation -e .
  echo "setup: .venv-cann ready (tests: .ci/jobs/20-cann.sh)"
fi

if [ $run_main = 1 ]; then
  # The main job: export every tiny MoE block, run it in ONNX Runtime with the library (and through
  # the function bodies without it) and compare with torch.
  .venv/bin/moe-onnx verify --all --size tiny
fi
