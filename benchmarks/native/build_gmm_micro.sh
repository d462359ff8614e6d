#!/usr/bin/env bash
# Builds build/gmm_micro: the GroupedMatmul CPU kernel alone, one thread, thread CPU time, weights
# read from DRAM. Given a commit, the binary also times that commit's kernel ("before"), linked in
# under another namespace, interleaved with today's in the same process (same-process ratios).
#   benchmarks/native/build_gmm_micro.sh [BASE_COMMIT] && build/gmm_micro K N ROWS [bf16|f32] [calls]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
CXX=${CXX:-g++}
FLAGS=(-O3 -g -std=c++17 -Wall -Wextra -I. -Iops_src/cpu/grouped_matmul)
extra=()
if [[ $# -ge 1 ]]; then
  before=build/gmm_before
  rm -rf "$before" && mkdir -p "$before"
  git archive "$1" ops_src/cpu | tar -x -C "$before"
  # (the commit may predate the per-op folder)
  kernel=$(dirname "$(find "$before/ops_src/cpu" -name grouped_matmul.cc)")
  "$CXX" "${FLAGS[@]/-I./-I$before}" -I"$kernel" -Dascend_moe=ascend_moe_before \
    -c "$kernel/grouped_matmul.cc" -o "$before/grouped_matmul.o"
  extra=(-DGMM_MICRO_BEFORE="\"$kernel/grouped_matmul.h\"" "$before/grouped_matmul.o")
fi
"$CXX" "${FLAGS[@]}" benchmarks/native/gmm_micro.cc ops_src/cpu/grouped_matmul/grouped_matmul.cc "${extra[@]}" -o build/gmm_micro
