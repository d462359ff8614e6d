#!/usr/bin/env bash
# CANN execution provider: builds the fake CANN runtime (scripts/build_cann_test_runtime.sh),
# sets up .venv-cann (the real onnxruntime-cann 1.24.4 wheel) and runs tests/cann with the fake
# runtime on LD_LIBRARY_PATH: both ops placed on CANNExecutionProvider, bit-identical to the CPU
# EP, native ACLNN calls vs fallbacks, loader search order, strict device-memory checks.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh --no-run --cann
runtime="$(bash scripts/build_cann_test_runtime.sh)"
LD_LIBRARY_PATH="$runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" .venv-cann/bin/python -m pytest -q -p no:cacheprovider tests/cann
