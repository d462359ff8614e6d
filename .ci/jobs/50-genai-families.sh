#!/usr/bin/env bash
# Generation for every family the genai export serves: the opt-in families of
# tests/test_hf_genai.py (Mixtral, DeepSeek-V2, Qwen3.5-MoE and Qwen3-Next hybrids, DeepSeek-V4 with
# its three attention kinds) exported with `--genai`; onnxruntime-genai's Generator must give
# transformers' 32 greedy tokens, batch 1 and 2. The main suite runs the default families
# (Qwen3-MoE, DeepSeek-V3, gpt-oss, Llama 4). About 4 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_hf_genai.py --all-families -m all_families \
  -k generates_hf_tokens
