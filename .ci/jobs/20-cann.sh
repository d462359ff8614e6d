#!/usr/bin/env bash
# CANN execution provider: builds the fake CANN runtime (scripts/build_cann_test_runtime.sh),
# sets up .venv-cann (the real onnxruntime-cann 1.24.4 wheel) and runs tests/cann with the fake
# runtime on LD_LIBRARY_PATH: both ops placed on CANNExecutionProvider, bit-identical to the CPU
# EP, native ACLNN calls vs fallbacks, loader search order, strict device-memory checks. Then the
# same suite with the fake's strict modes (docs/ascend.md): asynchronous streams, pinned-only
# host copies and 64-byte aligned device copies; and on an Atlas 300I SoC, where most MoE
# operators have no kernels (GroupedMatmul in float16, SwiGlu and TokenUnpermute without bfloat16
# do; the tests' expectations follow each operator's chips). In every run the fake aborts on a
# double destroy, a destroy of an unknown handle or a use after destroy.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh --no-run --cann
runtime="$(bash scripts/build_cann_test_runtime.sh)"
export LD_LIBRARY_PATH="$runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
suite=(.venv-cann/bin/python -m pytest -q -p no:cacheprovider tests/cann)
"${suite[@]}"
echo "--- strict: FAKE_ACL_ASYNC=1 FAKE_ACL_PINNED_ONLY=1 FAKE_ACL_D2D_ALIGN=64"
FAKE_ACL_ASYNC=1 FAKE_ACL_PINNED_ONLY=1 FAKE_ACL_D2D_ALIGN=64 "${suite[@]}"
echo "--- SoC without MoE kernels: FAKE_ACL_SOC_NAME=Ascend310P3"
FAKE_ACL_SOC_NAME=Ascend310P3 FAKE_ACL_ASYNC=1 "${suite[@]}"
