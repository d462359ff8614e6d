"""Pure-ONNX function body of MoeTokenUnpermute: the weighted gather it shares with MoeFinalizeRoutingV2."""

from .moe_finalize_routing_v2_function import build_unpermute_function as build_function

__all__ = ["build_function"]
