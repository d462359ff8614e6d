"""Export a block and run it in ONNX Runtime or torch: shared by the verification harness, the
benchmarks and the CLI.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import ml_dtypes
import numpy as np
import onnx
import torch

if TYPE_CHECKING:
    import onnxruntime as ort


class Block(Protocol):
    """What the export and run helpers read of a block module (models.layers.RoutedMoE, the
    expert-parallel sides): its input / output names, example inputs, dynamic shapes and its two
    forward paths."""

    @property
    def input_names(self) -> Sequence[str]: ...

    @property
    def output_names(self) -> Sequence[str]: ...

    def __call__(self, *inputs: torch.Tensor) -> Any: ...

    def forward_native(self, *inputs: torch.Tensor) -> Any: ...

    def example_inputs(self, tokens: int, seed: int = 0) -> tuple: ...

    def dynamic_shapes(self) -> Any: ...

EXPORT_TOKENS = 8

_EXPORTS: dict[tuple, bytes] = {}  # in-process cache: the CLI and the tests export each block once


# ---- export and sessions -----------------------------------------------------------------------

def export_block(block: Block, tokens: int = EXPORT_TOKENS, path: str | os.PathLike | None = None,
                 cache_key: tuple | None = None, external_data: bool = False, experts: str | None = None,
                 target: str = "cpu") -> bytes | None:
    """Export ``block`` with a dynamic token dimension (example of ``tokens`` >= 2 tokens), attach
    the function bodies, check it; return the serialized model (also written to ``path``).

    ``external_data`` writes the weights beside ``path`` (needed past 2 GiB) and returns None.
    ``experts``: the expert formulation (models.experts; None: the block's own, ``ort``).
    ``target``: the runtime the graph is for (exporters.targets: ``cpu``, ``cann`` or ``ge``).
    """
    from ascend_moe_onnx.exporters import export

    weights_quant = getattr(block, "weights_quant", None)  # models.quantize
    if external_data:
        if tokens < 2:
            raise ValueError(f"--tokens must be >= 2 for a dynamic token dimension, got {tokens}")
        export(block, block.example_inputs(tokens, seed=1234), path, external_data=True, experts=experts,
               target=target, weights_quant=weights_quant, dynamic_shapes=block.dynamic_shapes(),
               input_names=list(block.input_names),
               output_names=list(block.output_names))
        return None

    if tokens < 2:
        raise ValueError(f"--tokens must be >= 2 for a dynamic token dimension, got {tokens}")
    formulation = experts or getattr(block, "experts_formulation", None)  # set by experts.using too
    quant = None if weights_quant is None else weights_quant.name
    key = None if cache_key is None else (*cache_key, tokens, formulation, target, quant)
    if key is not None and key in _EXPORTS:
        data = _EXPORTS[key]
    else:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*axis name.*")
            proto = export(block, block.example_inputs(tokens, seed=1234), None, experts=experts, target=target,
                           weights_quant=weights_quant, dynamic_shapes=block.dynamic_shapes(),
                           input_names=list(block.input_names),
                           output_names=list(block.output_names))
        data = proto.SerializeToString()
        if key is not None:
            _EXPORTS[key] = data
    if path is not None:
        Path(path).write_bytes(data)
    return data


def _function_gaps(model: onnx.ModelProto) -> list[str]:
    """ascend.moe op types used by the model that have no attached function body."""
    from ascend_moe_onnx.onnx_schemas import DOMAIN

    have = {f.name for f in model.functions if f.domain == DOMAIN}
    used = {n.op_type for n in model.graph.node if n.domain == DOMAIN}
    return sorted(used - have)


def sessions(data: bytes, provider: str = "cpu") -> dict:
    """ORT sessions: ``ort`` (library registered, on the CPU EP; ``ort-cann`` on the CANN EP when
    ``provider`` is "cann") and ``ort-functions`` (no library, CPU; a string saying why when the
    model cannot run without it)."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    if provider == "cann":
        with warnings.catch_warnings():  # verifying the CPU instead would be a false pass
            warnings.simplefilter("error", ort_custom_ops.CannFallbackWarning)
            out = {"ort-cann": ort_custom_ops.inference_session(data, provider="cann")}
    else:
        out = {"ort": ort.InferenceSession(data, ort_custom_ops.session_options(),
                                           providers=["CPUExecutionProvider"])}
    gaps = _function_gaps(onnx.load_from_string(data))
    if gaps:
        out["ort-functions"] = f"no function body for {', '.join(gaps)}"
    else:
        out["ort-functions"] = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return out


# ---- running -----------------------------------------------------------------------------------

def to_numpy(t: torch.Tensor) -> np.ndarray:
    """torch -> NumPy with the same values (bfloat16 as ml_dtypes.bfloat16)."""
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.contiguous().numpy()


def _ort_value(a: np.ndarray) -> ort.OrtValue:
    import onnxruntime as ort

    if a.dtype == ml_dtypes.bfloat16:  # ORT's NumPy bridge has no bfloat16: pass the bits
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


def run_ort(session: ort.InferenceSession, block: Block, inputs: tuple, like: tuple) -> list[np.ndarray]:
    """Run a session on torch inputs; outputs preallocated like the torch outputs ``like``
    (io binding: how bfloat16 reaches NumPy)."""
    binding = session.io_binding()
    for name, t in zip(block.input_names, inputs):
        binding.bind_ortvalue_input(name, _ort_value(np.ascontiguousarray(to_numpy(t))))
    outs = []
    for name, t in zip(block.output_names, like):
        buf = np.zeros(tuple(t.shape), to_numpy(t[:0]).dtype)
        binding.bind_ortvalue_output(name, _ort_value(buf))
        outs.append(buf)
    session.run_with_iobinding(binding)
    return outs


def run_torch(block: Block, inputs: tuple) -> tuple[dict[str, list[np.ndarray]], tuple]:
    """``torch`` (export path) and ``reference`` outputs as NumPy, and the torch outputs themselves."""
    with torch.no_grad():
        got = block(*inputs)
        ref = block.forward_native(*inputs)
    return {"torch": [to_numpy(t) for t in got], "reference": [to_numpy(t) for t in ref]}, got
