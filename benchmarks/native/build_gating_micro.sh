#!/usr/bin/env bash
# Builds build/gating_micro (the kernel per ISA path) and, given a commit, also
# build/gating_micro_before: the same benchmark with that commit's kernel linked in under another
# namespace, timed in the same process ("before" column, ratios).
#   benchmarks/native/build_gating_micro.sh [BASE_COMMIT]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
CXX=${CXX:-g++}
FLAGS=(-O3 -g -std=c++17 -I.)
"$CXX" "${FLAGS[@]}" benchmarks/native/gating_micro.cc ops_src/cpu/*.cc -o build/gating_micro
if [[ $# -ge 1 ]]; then
  before=build/gating_before
  rm -rf "$before" && mkdir -p "$before"
  git archive "$1" ops_src/cpu | tar -x -C "$before"
  objs=()
  for src in "$before"/ops_src/cpu/*.cc; do
    obj="$before/$(basename "$src" .cc).o"
    "$CXX" "${FLAGS[@]/-I./-I$before}" -Dascend_moe=ascend_moe_before -c "$src" -o "$obj"
    objs+=("$obj")
  done
  "$CXX" "${FLAGS[@]}" -DGATING_MICRO_BEFORE benchmarks/native/gating_micro.cc ops_src/cpu/*.cc \
    "${objs[@]}" -o build/gating_micro_before
fi
