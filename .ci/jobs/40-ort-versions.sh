#!/usr/bin/env bash
# CI job: the supported ONNX Runtime range. Runs the ORT-facing tests (library kernels, function
# bodies at 0/1/many tokens, version floor) from the installed wheel, each runtime in its own venv:
#   - the floor (MIN_ORT in ort_custom_ops), numpy 2;
#   - onnxruntime-cann 1.24.4 (CPU fallback; installed --no-deps, numpy<2 as its wheel needs);
#   - the newest onnxruntime release;
# and checks that the runtime just below the floor refuses the library with a clear error.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
py=$repo/.venv/bin/python
floor=$($py -c "from ascend_moe_onnx.ort_custom_ops import MIN_ORT_VERSION as v; print(v)")
below_floor=1.23.2
work=$(mktemp -d /tmp/ci-ort-versions.XXXXXX)
trap 'rm -rf "$work"' EXIT

# One wheel for every venv (no torch needed: the tests below use only the core dependencies).
$py -m pip wheel -q --no-deps --no-build-isolation -w "$work/dist" . 2>&1 | grep -v "WARNING: Location" || true
wheel=$(ls "$work"/dist/ascend_moe_onnx-*.whl)
# The tests run from a copy, where the repository's folders are not importable.
cp -r tests "$work/tests"

ort_tests=(tests/test_ort_version.py tests/test_library_manifest.py tests/ops/moe_gating_top_k_hash/test_gating_ort.py
           tests/ops/moe_re_routing/test_rerouting_ort.py tests/ops/moe_gating_top_k_hash/test_gating_function.py tests/ops/moe_re_routing/test_rerouting_reference.py)

# make_venv NAME PIP-ARGS...: a venv with the wheel (no deps) and the given packages.
make_venv() {
  local name=$1; shift
  python3 -m venv "$work/$name"
  "$work/$name/bin/pip" install -q "$@" "onnx>=1.17" pytest pytest-xdist 2>&1 | grep -v "WARNING: Location" || true
  "$work/$name/bin/pip" install -q --no-deps "$wheel" 2>&1 | grep -v "WARNING: Location" || true
}

run_tests() {
  local name=$1; shift
  echo "--- $name: $("$work/$name/bin/python" -c 'import onnxruntime as o, numpy as n; print("onnxruntime", o.__version__, "numpy", n.__version__)')"
  (cd "$work" && "$work/$name/bin/python" -m pytest -q -p no:cacheprovider -n 2 "$@")
}

make_venv floor "onnxruntime==$floor" "numpy>=2" "ml_dtypes>=0.5"
run_tests floor "${ort_tests[@]}"

make_venv cann "numpy<2" "ml_dtypes<0.6" flatbuffers packaging protobuf sympy
"$work/cann/bin/pip" install -q --no-deps "onnxruntime-cann==1.24.4" 2>&1 | grep -v "WARNING: Location" || true
# onnx.reference's evaluator needs numpy 2 for these graphs (np.choose's 32-array limit): not ORT-facing.
run_tests cann "${ort_tests[@]}" -k "not reference_evaluator"

make_venv newest onnxruntime "numpy>=2" "ml_dtypes>=0.5"
run_tests newest "${ort_tests[@]}"

make_venv below "onnxruntime==$below_floor" "numpy<2" "ml_dtypes<0.6"
# test_older_runtime_is_refused_with_a_clear_error runs only here: the library and the Python
# check both refuse this runtime, naming its version.
out=$(run_tests below tests/test_ort_version.py -n 0 -k "older_runtime_is_refused")
echo "$out"
grep -q "1 passed" <<<"$out" || { echo "ort-versions: the refusal test did not run on $below_floor" >&2; exit 1; }
echo "ort-versions: floor $floor, onnxruntime-cann 1.24.4 and the newest release pass; $below_floor is refused"
