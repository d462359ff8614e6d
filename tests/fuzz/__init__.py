"""Fuzz harness for both ops through ONNX Runtime with the custom-op library, judged by the
contract (oracle.py) and the NumPy references; see docs/reliability.md."""
