#!/usr/bin/env bash
# Builds one native micro-benchmark, build/<TARGET>_micro, from benchmarks/native/<TARGET>_micro.cc
# and the CPU kernel it times. Given a commit, that commit's kernel ("before") is compiled under
# another namespace and linked in, and timed interleaved with today's in the same process
# (same-process ratios).
#   benchmarks/native/build_micro.sh TARGET [BASE_COMMIT] && build/<TARGET>_micro ...
# TARGET:
#   experts    the MoeRoutedExperts CPU kernel per ISA path against read probes
#              (build/experts_micro [H E I k T...])
#   experts_split  the lowest 2-thread / 1-thread time MoeRoutedExperts' work split allows, from its
#              pieces timed on one thread (build/experts_split_micro H E I k SHARED T...)
#   gmm_quant  GroupedMatmul's float32 and quantized CPU paths against read probes
#              (build/gmm_quant_micro [K N experts rows...])
#   gmm        the GroupedMatmul CPU kernel alone, one thread, thread CPU time, weights read from
#              DRAM (build/gmm_micro K N ROWS [bf16|f32] [calls])
#   gating     the MoeGatingTopKHash kernel per ISA path; with a commit, a second binary,
#              build/gating_micro_before, has the "before" columns, ratios and a bytewise
#              comparison of the outputs
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: benchmarks/native/build_micro.sh experts|experts_split|gmm_quant|gmm|gating [BASE_COMMIT]"
target=${1:?$usage}
base=${2:-}
CXX=${CXX:-g++}
FLAGS=(-O3 -g -std=c++17 -Wall -Wextra -I.)
mkdir -p build

# The kernel's sources today, the base commit's sources to link in (found by name: the commit may
# predate the per-op folders), and the macro that tells <TARGET>_micro.cc about them.
case $target in
  experts)
    sources=(ops_src/cpu/moe_routed_experts/*.cc ops_src/cpu/isa.cc)
    before_names=(-name 'moe_routed_experts*.cc' -o -name isa.cc)
    before_macro=-DEXPERTS_MICRO_BEFORE ;;
  experts_split)
    sources=(ops_src/cpu/moe_routed_experts/*.cc ops_src/cpu/isa.cc)
    base="" ;;  # no "before" build: run it on each commit
  gmm_quant)
    sources=(ops_src/cpu/grouped_matmul/grouped_matmul*.cc ops_src/cpu/isa.cc)
    before_names=(-name 'grouped_matmul*.cc' -o -name isa.cc)
    before_macro=-DGMM_QUANT_MICRO_BEFORE ;;
  gmm)
    FLAGS+=(-Iops_src/cpu/grouped_matmul)
    sources=(ops_src/cpu/grouped_matmul/grouped_matmul.cc)
    before_names=(-name grouped_matmul.cc) ;;
  gating)
    FLAGS=(-O3 -g -std=c++17 -I.)
    mapfile -t sources < <(find ops_src/cpu -name '*.cc' | sort)
    before_names=(-name '*.cc')
    before_macro=-DGATING_MICRO_BEFORE ;;
  *)
    echo "$usage" >&2
    exit 2 ;;
esac

# BASE_COMMIT's kernel, each source compiled under namespace ascend_moe_before.
before_objs=()
if [[ -n $base ]]; then
  before=build/${target}_before
  rm -rf "$before" && mkdir -p "$before"
  git archive "$base" ops_src/cpu | tar -x -C "$before"
  for src in $(find "$before"/ops_src/cpu \( "${before_names[@]}" \) | sort); do
    obj="$before/$(basename "$src" .cc).o"
    "$CXX" "${FLAGS[@]/-I./-I$before}" -I"$(dirname "$src")" -Dascend_moe=ascend_moe_before -c "$src" -o "$obj"
    before_objs+=("$obj")
  done
  if [[ $target == gmm ]]; then  # gmm_micro.cc includes the base's header itself
    before_macro="-DGMM_MICRO_BEFORE=\"$(dirname "$src")/grouped_matmul.h\""
  fi
fi

if [[ $target == gating ]]; then
  # Today's kernel compiled once for both binaries, two sources at a time.
  mkdir -p build/gating_micro_objs
  objs=()
  for src in "${sources[@]}"; do objs+=("build/gating_micro_objs/$(basename "$src" .cc).o"); done
  printf '%s\n' "${sources[@]}" | xargs -P 2 -I{} sh -c \
    '"$0" "$@" -c {} -o build/gating_micro_objs/$(basename {} .cc).o' "$CXX" "${FLAGS[@]}"
  "$CXX" "${FLAGS[@]}" benchmarks/native/gating_micro.cc "${objs[@]}" -o build/gating_micro
  if [[ -n $base ]]; then
    "$CXX" "${FLAGS[@]}" "$before_macro" benchmarks/native/gating_micro.cc "${objs[@]}" "${before_objs[@]}" \
      -o build/gating_micro_before
  fi
  exit 0
fi
extra=()
[[ -n $base ]] && extra=("$before_macro" "${before_objs[@]}")
"$CXX" "${FLAGS[@]}" "benchmarks/native/${target}_micro.cc" "${sources[@]}" "${extra[@]}" -o "build/${target}_micro"
