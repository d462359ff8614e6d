"""A CPU stand-in for ``torch_npu``'s MoE functions, so Ascend model code runs and exports unchanged.

The functions keep torch_npu's current names, signatures and defaults (op-plugin's
``op_plugin_functions.yaml``), run on any device, and export as ``ascend.moe`` nodes (gating,
re-routing, init routing, grouped matmul, finalize, permute / unpermute) or standard ONNX ops
(swiglu, geglu, small index helpers, the int8 / int4 / MX quantisation helpers). MC2 dispatch /
combine with several ranks run eagerly over torch.distributed (:func:`use_gloo_as_hccl` gives a gloo
group the HCCL communicator name model code asks for). Arguments with no ONNX meaning here
raise with the argument named. :func:`install` makes ``import torch_npu`` return
this module where no real torch_npu is importable (docs/ascend-code.md).
"""

from __future__ import annotations

import sys
import types

import torch

from .._torch_lib import try_import_torch_npu
from . import c_ascend, recipes_ops
from .activations import npu_geglu, npu_rms_norm, npu_swiglu_clip_quant
from .distribute import npu_moe_distribute_combine_v2, npu_moe_distribute_dispatch_v2
from .distribute_v1 import npu_moe_distribute_combine, npu_moe_distribute_dispatch
from .dtypes import DTYPES
from .experts import npu_grouped_matmul, npu_swiglu
from .formats import Format, get_npu_format, npu_format_cast, npu_format_cast_
from .hccl import use_gloo_as_hccl
from .histc import install_integer_histc
from .mx_quant import npu_dynamic_mx_quant, npu_swiglu_mx_quant
from .quant import npu_dequant_swiglu_quant, npu_dynamic_quant, npu_grouped_matmul_swiglu_quant
from .quant_matmul import npu_quant_matmul
from .quant_param import npu_convert_weight_to_int4pack, npu_trans_quant_param
from .routing import (
    npu_moe_compute_expert_tokens,
    npu_moe_finalize_routing,
    npu_moe_gating_top_k,
    npu_moe_gating_top_k_softmax,
    npu_moe_init_routing,
    npu_moe_init_routing_v2,
    npu_moe_re_routing,
    npu_moe_token_permute,
    npu_moe_token_unpermute,
)
from .routing_variants import npu_moe_gating_top_k_softmax_v2, npu_moe_init_routing_quant

# torch_npu.hifloat8, torch_npu.float4_e2m1fn_x2, ... (ints, as torch_npu defines them)
globals().update(DTYPES)

__all__ = [
    "Format", "get_npu_format", "npu_format_cast", "npu_format_cast_", *DTYPES,
    "install", "npu_convert_weight_to_int4pack", "npu_dequant_swiglu_quant", "npu_dynamic_mx_quant",
    "npu_dynamic_quant", "npu_geglu",
    "npu_grouped_matmul", "npu_grouped_matmul_swiglu_quant", "npu_moe_compute_expert_tokens",
    "npu_moe_distribute_combine", "npu_moe_distribute_combine_v2", "npu_moe_distribute_dispatch",
    "npu_moe_distribute_dispatch_v2", "npu_moe_finalize_routing", "npu_moe_gating_top_k",
    "npu_moe_gating_top_k_softmax", "npu_moe_gating_top_k_softmax_v2", "npu_moe_init_routing",
    "npu_moe_init_routing_quant", "npu_moe_init_routing_v2", "npu_moe_re_routing", "npu_moe_token_permute",
    "npu_moe_token_unpermute", "npu_quant_matmul", "npu_rms_norm", "npu_swiglu", "npu_swiglu_clip_quant",
    "npu_swiglu_mx_quant", "npu_trans_quant_param", "use_gloo_as_hccl",
]


def install() -> types.ModuleType:
    """Make ``import torch_npu`` work in unchanged Ascend code and return the module it gives.

    Puts this module at ``sys.modules["torch_npu"]`` unless a real torch_npu is importable (then
    that one stays and is returned), and defines ``torch.ops._C_ascend.moe_gating_top_k`` /
    ``moe_gating_top_k_hash`` unless vllm-ascend defines them, and the recipes' own
    ``torch.ops.custom.npu_swiglu_group_quant`` unless their custom_ops library does. As the
    torch_npu of the CPU it also gives what torch_npu adds to torch for its device:
    ``Tensor.npu()`` / ``Module.npu()`` and ``torch.histc`` of integer tensors (:mod:`.histc`).
    Idempotent.
    """
    this = sys.modules[__name__]
    present = sys.modules.get("torch_npu")
    if present is None and not try_import_torch_npu():
        sys.modules["torch_npu"] = this
    if sys.modules["torch_npu"] is this:
        _add_npu_methods()
        install_integer_histc()
    c_ascend.define_ops()
    recipes_ops.define_ops()
    return sys.modules["torch_npu"]


def _to_npu_tensor(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    """torch.Tensor.npu as torch_npu adds it; here the CPU is the device: ``self``."""
    return self


def _to_npu_module(self, device=None):
    """torch.nn.Module.npu as torch_npu adds it; here the CPU is the device: the module, unchanged."""
    return self


def _add_npu_methods() -> None:
    """``Tensor.npu()`` / ``Module.npu()``, which torch_npu adds to torch and Ascend code calls at
    construction (e.g. ``torch.tensor(...).npu()``); only where torch has none."""
    # the methods torch_npu adds are not in torch's annotations
    if not hasattr(torch.Tensor, "npu"):
        torch.Tensor.npu = _to_npu_tensor  # type: ignore[attr-defined]
    if not hasattr(torch.nn.Module, "npu"):
        torch.nn.Module.npu = _to_npu_module  # type: ignore[attr-defined]
