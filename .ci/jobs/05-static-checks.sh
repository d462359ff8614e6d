#!/usr/bin/env bash
# Static checks: ruff (pyflakes, isort, pycodestyle, bugbear, pyupgrade, simplify) on all Python, mypy on every package
# (pyproject.toml's tool.mypy: onnx_schemas and ort_custom_ops must annotate every function),
# clang-format and clang-tidy (bugprone-*, functions <= 150 lines) on the C++ sources.
# Tools come from the `lint` extra (pinned there), installed into .venv.
set -euo pipefail
cd "$(dirname "$0")/../.."
py=.venv/bin/python
$py -m pip install -q --no-build-isolation -e ".[lint]" 2>&1 | grep -v "WARNING: Location" || true
echo "--- ruff"
.venv/bin/ruff check .
echo "--- mypy"
.venv/bin/mypy
# *.gen.h are generated: tests/test_op_table.py checks them against their generator instead.
cxx=$(git ls-files 'ops_src/*.cc' 'ops_src/*.h' 'ops_src/*.inc' 'ort_custom_ops/src/*.cc' 'ort_custom_ops/src/*.h' \
  ':!:*.gen.h')
echo "--- clang-format"
.venv/bin/clang-format --dry-run -Werror $cxx
echo "--- clang-tidy"
cmake -S . -B build/tidy -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
units=$(git ls-files 'ops_src/*.cc' 'ort_custom_ops/src/*.cc')
printf '%s\n' $units | xargs -P "$(nproc)" -n 1 .venv/bin/clang-tidy -p build/tidy --quiet
echo "static checks passed"
