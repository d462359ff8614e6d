#!/usr/bin/env bash
# Builds build/gmm_quant_micro: GroupedMatmul's float32 and quantized CPU paths against read probes.
# Given a commit, the binary also times that commit's antiquant paths ("before"), linked in under
# another namespace, interleaved with today's in the same process (same-process ratios).
#   benchmarks/native/build_gmm_quant_micro.sh [BASE_COMMIT] && build/gmm_quant_micro [K N experts rows...]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
CXX=${CXX:-g++}
FLAGS=(-O3 -g -std=c++17 -Wall -Wextra -I.)
extra=()
if [[ $# -ge 1 ]]; then
  before=build/gmm_quant_before
  rm -rf "$before" && mkdir -p "$before"
  git archive "$1" ops_src/cpu | tar -x -C "$before"
  extra=(-DGMM_QUANT_MICRO_BEFORE)
  # (the commit may predate the per-op folder)
  for src in $(find "$before"/ops_src/cpu -name 'grouped_matmul*.cc') "$before"/ops_src/cpu/isa.cc; do
    [[ -f $src ]] || continue
    obj="$before/$(basename "$src" .cc).o"
    "$CXX" "${FLAGS[@]/-I./-I$before}" -Dascend_moe=ascend_moe_before -c "$src" -o "$obj"
    extra+=("$obj")
  done
fi
"$CXX" "${FLAGS[@]}" benchmarks/native/gmm_quant_micro.cc ops_src/cpu/grouped_matmul/grouped_matmul*.cc \
  ops_src/cpu/isa.cc "${extra[@]}" -o build/gmm_quant_micro
