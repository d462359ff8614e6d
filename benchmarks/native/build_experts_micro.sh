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
  "$CXX" "${FLAGS[@]/-I./-I$before}" -Dascend_moe=ascend_moe_before -c "$before/ops_src/cpu/moe_routed_experts.cc" \
    -o "$before/moe_routed_experts.o"
  extra=(-DEXPERTS_MICRO_BEFORE "$before/moe_routed_experts.o")
fi
"$CXX" "${FLAGS[@]}" benchmarks/native/experts_micro.cc ops_src/cpu/moe_routed_experts*.cc ops_src/cpu/isa.cc "${extra[@]}" \
  -o build/experts_micro
