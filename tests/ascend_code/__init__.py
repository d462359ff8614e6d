"""MoE layers written the way public Ascend code writes them (``import torch_npu``, calls to
``torch_npu.npu_*`` and ``torch.ops._C_ascend.*``), small and self-contained, for tests and
benchmarks of the torch_npu stand-in (docs/ascend-code.md).

Importing this package calls ``exporters.torch_npu.install()`` first, as a user would before
importing their model code; a real torch_npu, where importable, stays in place.

- ``recipes_deepseek``: cann-recipes-infer's DeepseekV3MoE (single-device TP path and MC2 decode
  path on one rank; the TP path also with ``gmm_quant_mode="w8a8int8"``) and its EP receiving rank
  (``forward_expert``);
- ``recipes_w8a8``: the recipe's w8a8 int8 expert method and its weight layout;
- ``recipes_softmax``: Qwen3-MoE-style (``npu_moe_gating_top_k_softmax`` + init routing v2) and
  GPT-OSS-style (first-version init routing + ``npu_moe_compute_expert_tokens``) layers;
- ``vllm_ascend``: vllm-ascend's single-card fused MoE (A2/A3 ``_C_ascend`` router, A5 torch_npu
  router; all-gather dispatcher, unquantised MLP, token unpermute) and its w8a8 dynamic variant.
"""

from ascend_moe_onnx.exporters.torch_npu import install

install()

from . import recipes_deepseek, recipes_softmax, recipes_w8a8, vllm_ascend  # noqa: E402  (after install)

__all__ = ["recipes_deepseek", "recipes_softmax", "recipes_w8a8", "vllm_ascend"]
