"""The moe-onnx command: export, verify, inspect and benchmark (depends on models and benchmarks)."""
