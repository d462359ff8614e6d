"""Running the ascend.moe nodes on the CANN execution provider (onnxruntime-cann, Ascend NPUs).

See docs/ascend.md: what to install, the provider options and which nodes run natively.
"""

from __future__ import annotations

import ctypes
import warnings

CANN = "CANNExecutionProvider"
# The libraries ONNX Runtime's CANN EP links against: without any of them it falls back to CPU.
CANN_EP_LIBRARIES = ("libascendcl.so", "libacl_op_compiler.so", "libfmk_onnx_parser.so")


class CannFallbackWarning(UserWarning):
    """The CANN execution provider was requested but the session runs on the CPU."""


def cann_provider(device_id: int = 0, **options) -> tuple[str, dict]:
    """The ``providers`` entry for the CANN EP that runs the ascend.moe CANN kernels.

    ``enable_cann_graph=0`` is the point: with CANN's default (1) the EP hands the whole graph,
    the ascend.moe nodes included, to CANN's graph engine, whose ONNX parser does not know them,
    and with ``enable_cann_subgraph=1`` they run on the CPU kernel. With 0 every node runs through
    its own kernel, ours included. Other ``options`` (e.g. ``npu_mem_limit``) are passed on as
    strings.
    """
    opts = {"device_id": str(device_id), "enable_cann_graph": "0"}
    opts.update({k: str(int(v)) if isinstance(v, bool) else str(v) for k, v in options.items()})
    if opts["enable_cann_graph"] not in ("0", "False"):
        warnings.warn("enable_cann_graph=1 compiles the whole graph with CANN's graph engine, which "
                      "cannot parse the ascend.moe nodes: the session will fail or run them elsewhere",
                      stacklevel=2)
    return CANN, opts


def missing_cann_libraries() -> list[str]:
    """The CANN runtime libraries this process cannot load, each with the loader's reason."""
    missing = []
    for name in CANN_EP_LIBRARIES:
        try:
            ctypes.CDLL(name)
        except OSError as e:
            missing.append(f"{name} ({e})")
    return missing


def cann_unavailable_reason() -> str:
    """Why a session asking for the CANN EP would run on the CPU; empty when it would not."""
    import onnxruntime as ort

    if CANN not in ort.get_available_providers():
        return (f"this onnxruntime ({ort.__version__}) has no {CANN}: install onnxruntime-cann "
                f"in its own environment (docs/ascend.md)")
    missing = missing_cann_libraries()
    if missing:
        return ("the CANN runtime libraries cannot be loaded: " + "; ".join(missing) +
                " (source CANN's set_env.sh, or put them on LD_LIBRARY_PATH)")
    return ""


def inference_session(model, provider: str = "cpu", sess_options=None, device_id: int = 0,
                      **cann_options):
    """An ``onnxruntime.InferenceSession`` with the custom-op library registered, on the CPU EP
    (``provider="cpu"``) or on the CANN EP with CPU as fallback (``"cann"``).

    When CANN was asked for but cannot run (no CANN EP in this onnxruntime, CANN libraries
    missing), the session is made on the CPU and a :class:`CannFallbackWarning` says why, instead
    of ONNX Runtime's printed banner. The model's ascend.moe nodes are checked first with
    :func:`onnx_schemas.check_nodes`: ORT gives custom-op kernels no way to see a misspelled
    attribute name or the imported opset version.
    """
    import onnxruntime as ort

    from ascend_moe_onnx import onnx_schemas

    from . import register, session_options

    if provider not in ("cpu", "cann"):
        raise ValueError(f"provider must be 'cpu' or 'cann', got {provider!r}")
    onnx_schemas.check_nodes(model)  # what ORT cannot show a custom-op kernel (attribute names, opset)
    if sess_options is None:
        so = session_options()
    else:
        so = sess_options
        register(so)
    providers = ["CPUExecutionProvider"]
    if provider == "cann":
        reason = cann_unavailable_reason()
        if reason:
            warnings.warn(f"{CANN} requested, running on the CPU: {reason}", CannFallbackWarning,
                          stacklevel=2)
        else:
            providers = [cann_provider(device_id, **cann_options), "CPUExecutionProvider"]
    data = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    sess = ort.InferenceSession(data, so, providers=providers)
    if provider == "cann" and len(providers) > 1 and CANN not in sess.get_providers():
        warnings.warn(f"{CANN} requested, but ONNX Runtime fell back to the CPU (see its log)",
                      CannFallbackWarning, stacklevel=2)
    return sess


# ---- which nodes run natively (mirrors ops_src/cann; tests/cann check both agree) ---------------

MAX_EXPERTS = 2048  # aclnnMoeGatingTopK and the custom hash operator
MAX_NATIVE_HIDDEN = 16384  # aclnnMoeReRouting: 0 < H < 16384


def gating_path(attrs: dict, *, experts: int | None = None, hash_routing: bool = False,
                table_type: str | None = None, additional: bool = False) -> tuple[str | None, str]:
    """(ACLNN call, "") when a MoeGatingTopKHash node with these attributes and inputs runs natively
    on the CANN EP, else (None, why it takes the host fallback). ``attrs`` are resolved (defaults
    filled in); unknown ``experts`` (None) is assumed to fit."""
    call = "aclnnMoeGatingTopKHash" if hash_routing or attrs["norm_type"] == 2 else "aclnnMoeGatingTopK"
    if attrs["renorm"] != 0:
        return None, "renorm=1 is an extension of this project; the Ascend kernels reject it"
    if additional:
        return None, "additional_bias with additional_token_mask has no Ascend kernel input"
    if hash_routing and table_type not in (None, "int32"):
        return None, f"aclnnMoeGatingTopKHash takes an int32 tid2eid, got {table_type}"
    if experts is not None:
        per_group = experts // attrs["group_count"]
        if experts > MAX_EXPERTS:
            return None, f"the Ascend gating kernels need E <= 2048, got {experts}"
        if per_group <= 2:
            return None, f"the Ascend gating kernels need E / group_count > 2, got {per_group}"
        aligned = (per_group + 31) // 32 * 32 * attrs["group_count"]
        if aligned > MAX_EXPERTS:
            return None, ("the Ascend gating kernels need align32(E / group_count) * group_count "
                          f"<= 2048, got {aligned}")
    return call, ""


def rerouting_path(attrs: dict, *, token_type: str | None = None, scale_type: str | None = None,
                   scale_rank: int | None = None, hidden: int | None = None) -> tuple[str | None, str]:
    """(ACLNN call, "") when a MoeReRouting node runs natively on the CANN EP, else (None, why it
    takes the copy fallback). Unknown types or sizes (None) are assumed to fit."""
    if token_type is not None and token_type not in ("float16", "bfloat16", "int8"):
        return None, "tokens must be float16, bfloat16 or int8 for aclnnMoeReRouting"
    if (scale_type is not None and scale_type != "float") or (scale_rank is not None and scale_rank != 1):
        return None, "per_token_scales must be float [A] for aclnnMoeReRouting"
    if hidden is not None and hidden >= MAX_NATIVE_HIDDEN:
        return None, f"aclnnMoeReRouting needs H < 16384, got H = {hidden}"
    if attrs["expert_token_num_type"] != 1:
        return None, "aclnnMoeReRouting supports expert_token_num_type=1 (counts) only, got 0 (cumsum)"
    if attrs["idx_type"] != 0:
        return None, "aclnnMoeReRouting supports idx_type=0 (gather index) only, got 1 (scatter)"
    return "aclnnMoeReRouting", ""
