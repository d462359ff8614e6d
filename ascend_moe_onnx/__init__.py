"""ascend-moe-onnx: Ascend's fused MoE operators in ONNX and ONNX Runtime (docs/operators.md lists
them).

Subpackages (import each explicitly; importing this package loads nothing heavy):
- ``onnx_schemas``: the ONNX schemas, NumPy references and pure-ONNX function bodies;
- ``ort_custom_ops``: the ONNX Runtime custom-op library (``get_library_path``, ``register``);
- ``exporters``: the torch ops and their ONNX export (``export``, ``custom_translation_table``);
- ``models``: MoE blocks using the ops, presets and checkpoint loading;
- ``hf``: Hugging Face checkpoints (routing from their configs, ``patch``, whole-model export);
- ``ep``: expert parallelism across processes;
- ``benchmarks``: side-by-side benchmarks; ``cli``: the ``moe-onnx`` command.
"""

__version__ = "0.2.0"
