#!/usr/bin/env bash
# Builds build/gmm_quant_micro: GroupedMatmul's float32 and quantized CPU paths against read probes.
#   benchmarks/native/build_gmm_quant_micro.sh && build/gmm_quant_micro [K N experts rows...]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
CXX=${CXX:-g++}
"$CXX" -O3 -g -std=c++17 -Wall -Wextra -I. benchmarks/native/gmm_quant_micro.cc ops_src/cpu/grouped_matmul/grouped_matmul*.cc \
  ops_src/cpu/isa.cc -o build/gmm_quant_micro
