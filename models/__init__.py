"""MoE blocks that route with the ascend.moe ops, each with a plain-torch reference path.

- ``layers``: config, dtype handling, SwiGLU experts, the routed block base class;
- ``deepseek`` (V2/V3, Kimi-K2, GLM-4.5), ``deepseek_v4``, ``qwen_mixtral``, ``expert_parallel``:
  one module per family, each with its ``PRESETS``;
- ``presets``: the registry and ``build``; ``weights``: checkpoint loading;
- ``verify``: export + ONNX Runtime vs torch comparison; ``info``; ``cli``: ``moe-onnx``.
See docs/models.md.
"""
