#!/usr/bin/env bash
# Builds build/experts_micro: the MoeRoutedExperts CPU kernel per ISA path against read probes.
# Given a commit, the binary also times that commit's kernel ("before"), linked in under another
# namespace, interleaved with today's in the same process (same-process ratios).
#   benchmarks/native/build_experts_micro.sh [BASE_COMMIT] && build/experts_micro [H E I k T...]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
CXX=${CXX:-g++}
FLAGS=(-O3 -g -std=c++17 -Wall -Wextra -I.)
extra=()
if [[ $# -ge 1 ]]; then
  before=build/experts_before
  rm -rf "$before" && mkdir -p "$before"
  git archive "$1" ops_src/cpu | tar -x -C "$before"
  extra=(-DEXPERTS_MICRO_BEFORE)
  # the kernel with its ISA paths and isa.cc (the tiles and the path choice live there)
  # (the commit may predate the per-op folder)
  for src in $(find "$before"/ops_src/cpu -name 'moe_routed_experts*.cc') "$before"/ops_src/cpu/isa.cc; do
    [[ -f $src ]] || continue
    obj="$before/$(basename "$src" .cc).o"
    "$CXX" "${FLAGS[@]/-I./-I$before}" -Dascend_moe=ascend_moe_before -c "$src" -o "$obj"
    extra+=("$obj")
  done
fi
"$CXX" "${FLAGS[@]}" benchmarks/native/experts_micro.cc ops_src/cpu/moe_routed_experts/*.cc ops_src/cpu/isa.cc "${extra[@]}" \
  -o build/experts_micro
