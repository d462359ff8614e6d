#!/usr/bin/env bash
# Builds build/gating_micro (the kernel per ISA path) and, given a commit, also
# build/gating_micro_before: the same benchmark with that commit's kernel linked in under another
# namespace, timed in the same process on the same paths ("before" columns, ratios, and a bytewise
# comparison of the outputs).
#   benchmarks/native/build_gating_micro.sh [BASE_COMMIT]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/gating_micro_objs
CXX=${CXX:-g++}
FLAGS=(-O3 -g -std=c++17 -I.)
# Today's kernel sources, compiled once for both binaries (two at a time).
objs=()
mapfile -t srcs < <(find ops_src/cpu -name '*.cc' | sort)
for src in "${srcs[@]}"; do objs+=("build/gating_micro_objs/$(basename "$src" .cc).o"); done
printf '%s\n' "${srcs[@]}" | xargs -P 2 -I{} sh -c \
  '"$0" "$@" -c {} -o build/gating_micro_objs/$(basename {} .cc).o' "$CXX" "${FLAGS[@]}"
"$CXX" "${FLAGS[@]}" benchmarks/native/gating_micro.cc "${objs[@]}" -o build/gating_micro
if [[ $# -ge 1 ]]; then
  before=build/gating_before
  rm -rf "$before" && mkdir -p "$before"
  git archive "$1" ops_src/cpu | tar -x -C "$before"
  before_objs=()
  for src in $(find "$before"/ops_src/cpu -name '*.cc' | sort); do
    obj="$before/$(basename "$src" .cc).o"
    "$CXX" "${FLAGS[@]/-I./-I$before}" -Dascend_moe=ascend_moe_before -c "$src" -o "$obj"
    before_objs+=("$obj")
  done
  "$CXX" "${FLAGS[@]}" -DGATING_MICRO_BEFORE benchmarks/native/gating_micro.cc "${objs[@]}" \
    "${before_objs[@]}" -o build/gating_micro_before
fi
