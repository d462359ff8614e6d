#!/usr/bin/env bash
# Builds build/experts_micro: the MoeRoutedExperts CPU kernel per ISA path against a read probe.
#   benchmarks/native/build_experts_micro.sh && build/experts_micro [H E I k T...]
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build
CXX=${CXX:-g++}
"$CXX" -O3 -g -std=c++17 -Wall -Wextra -I. benchmarks/native/experts_micro.cc ops_src/cpu/moe_routed_experts.cc \
  -o build/experts_micro
