"""Side-by-side benchmarks of the ascend.moe operators against what a user would otherwise run.

``python -m ascend_moe_onnx.benchmarks [--quick]`` (or ``moe-onnx bench``) measures MoeGatingTopKHash and
MoeReRouting in ONNX Runtime with the custom-op library against baselines timed in the same
process on the same inputs, and a DeepSeek-V3 block exported with the fused op against the same
block exported from its plain-torch routing. Every figure is a ratio of medians of interleaved
repetitions; results go to ``./benchmark-results/`` (``--out DIR``) (Markdown, JSON, PNG). See docs/benchmarks.md.
"""
