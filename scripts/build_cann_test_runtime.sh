#!/usr/bin/env bash
# Builds the fake CANN runtime (test-only: libascendcl.so, libacl_op_compiler.so,
# libfmk_onnx_parser.so, libnnopbase.so, libopapi.so, libcust_opapi.so) into
# build/cann-test-runtime/ and prints that directory (put it on LD_LIBRARY_PATH for tests/cann).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$PWD/build/cann-test-runtime"
cmake -S tests/cann/fake_runtime -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$out" -j "$(nproc)" >/dev/null
echo "$out"
