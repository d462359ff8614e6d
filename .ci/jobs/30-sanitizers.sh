#!/usr/bin/env bash
# Sanitizers: an AddressSanitizer + UBSan Debug build of the custom-op library (CMakeLists adds
# -fsanitize=address,undefined for Debug) runs the ORT-facing tests, the concurrency/leak tests and
# the CI fuzz slice; any sanitizer report aborts the process and fails the job.
#
# The Python host is not instrumented, so libasan must be preloaded; libstdc++ is preloaded with it,
# else exceptions thrown inside ONNX Runtime (every rejected model) kill the process. Leak detection
# is off: CPython and ORT keep allocations until exit by design; the RSS tests cover leaks instead.
# Tests listed in tests/fuzz/known_defects.py (SANITIZER_DESELECT) are skipped until their fix lands.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=.venv/bin/python
build=build/sanitizers

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

deselect=$($py -c "
from tests.fuzz.known_defects import SANITIZER_DESELECT
print(' '.join('--deselect=' + t for ts in SANITIZER_DESELECT.values() for t in ts))")

export ASCEND_MOE_ORT_LIBRARY="$PWD/$build/libascend_moe_ort.so"
export ASCEND_MOE_SANITIZERS=1 ASCEND_MOE_FUZZ_CASES="${ASCEND_MOE_FUZZ_CASES:-1200}"
export ASCEND_MOE_HYPOTHESIS_EXAMPLES="${ASCEND_MOE_HYPOTHESIS_EXAMPLES:-60}"
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
# The library under test must be the sanitized one (the fuzz workers inherit this environment).
$py -c "from ascend_moe_onnx import ort_custom_ops as o; import sys; p = o.get_library_path(); print('sanitized library:', p); sys.exit(p != '$ASCEND_MOE_ORT_LIBRARY')"
# shellcheck disable=SC2086
$py -m pytest -q -p no:cacheprovider -n 2 $deselect \
  tests/ops/moe_gating_top_k_hash/test_gating_ort.py tests/ops/moe_re_routing/test_rerouting_ort.py tests/ops/moe_routed_experts/test_routed_experts_kernel.py tests/test_library_manifest.py \
  tests/ops/grouped_matmul/test_grouped_matmul.py tests/ops/moe_init_routing_v3/test_init_routing.py tests/ops/moe_finalize_routing_v2/test_moe_finalize_routing_v2.py \
  tests/test_concurrency.py tests/fuzz
