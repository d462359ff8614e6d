"""Running the ascend.moe nodes on the CANN execution provider (onnxruntime-cann, Ascend NPUs).

See docs/ascend.md: what to install, the provider options and which nodes run natively.
"""

from __future__ import annotations

import ctypes
import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnxruntime as ort

from .library import get_library_path, register, session_options

CANN = "CANNExecutionProvider"
# The libraries ONNX Runtime's CANN EP links against: without any of them it falls back to CPU.
CANN_EP_LIBRARIES = ("libascendcl.so", "libacl_op_compiler.so", "libfmk_onnx_parser.so")


class CannFallbackWarning(UserWarning):
    """The CANN execution provider was requested but the session runs on the CPU."""


def cann_provider(device_id: int = 0, graph: bool = False, **options: Any) -> tuple[str, dict]:
    """The ``providers`` entry for the CANN EP.

    By default ``enable_cann_graph=0``: every node runs through its own kernel, the ascend.moe nodes
    through the library's CANN kernels (models exported with ``--target cann``). ``graph=True`` gives
    ``enable_cann_graph=1``: the EP hands the whole graph to CANN's graph engine, whose ONNX parser
    reads ascend.moe nodes only once the project's parser plugin is installed (``moe-onnx cann plugin
    install``) and only as ``--target ge`` writes them (docs/ascend.md). Other ``options`` (e.g.
    ``npu_mem_limit``) are passed on as strings.
    """
    opts = {"device_id": str(device_id), "enable_cann_graph": "1" if graph else "0"}
    opts.update({k: str(int(v)) if isinstance(v, bool) else str(v) for k, v in options.items()})
    if not graph and opts["enable_cann_graph"] not in ("0", "False"):
        warnings.warn("enable_cann_graph=1 compiles the whole graph with CANN's graph engine, which reads the "
                      "ascend.moe nodes only with the project's parser plugin installed and a --target ge export: "
                      "ask for it with cann_provider(graph=True) (docs/ascend.md)", stacklevel=2)
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


def inference_session(model: str | bytes | os.PathLike, provider: str = "cpu",
                      sess_options: ort.SessionOptions | None = None, device_id: int = 0,
                      **cann_options: Any) -> ort.InferenceSession:
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


    if provider not in ("cpu", "cann"):
        raise ValueError(f"provider must be 'cpu' or 'cann', got {provider!r}")
    onnx_schemas.check_nodes(model)  # what ORT cannot show a custom-op kernel (attribute names, opset)
    if sess_options is None:
        so = session_options()
    else:
        so = sess_options
        register(so)
    providers: list[str | tuple[str, dict]] = ["CPUExecutionProvider"]
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


# ---- which nodes run natively: the library's own decision (AscendMoeCannPath) ------------------


def _library_function(name: str, nargs: int) -> Callable[..., bytes]:
    fn = getattr(ctypes.CDLL(get_library_path()), name)
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_char_p] * nargs
    return fn


def soc_name() -> str:
    """The Ascend SoC CANN reports in this process (``aclrtGetSocName``, e.g. "Ascend910B1"); ""
    when no CANN runtime can be loaded."""
    return _library_function("AscendMoeCannSoc", 0)().decode()


def soc_blocker(soc: str | None = None, call: str | None = None) -> str:
    """Why ACLNN operator ``call`` (e.g. "aclnnGroupedMatmulV4"; None: which of the MoE operators)
    has no kernels for ``soc`` (this process's SoC when None); "" when it has, or when no CANN
    runtime is loaded to tell. Each operator's own kernel registrations (docs/ascend.md, chips)."""
    return _library_function("AscendMoeCannSocBlocker", 2)((soc or "").encode(), (call or "").encode()).decode()


def _library_path(op_type: str, facts: dict) -> tuple[str | None, str]:
    """(ACLNN call, "") or (None, why the fallback runs), as the library's CANN kernels decide it
    by the Ascend operators' documented limits. Facts that are None are not known (taken to fit)."""
    import json

    fn = _library_function("AscendMoeCannPath", 2)
    text = " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in facts.items() if v is not None)
    answer = json.loads(fn(op_type.encode(), text.encode()).decode())
    return answer["call"], answer["reason"]


def gating_path(attrs: dict, *, experts: int | None = None, hash_routing: bool = False,
                table_type: str | None = None, additional: bool = False,
                soc: str | None = None) -> tuple[str | None, str]:
    """(ACLNN call, "") when a MoeGatingTopKHash node with these attributes and inputs runs natively
    on the CANN EP, else (None, why it takes the host fallback). ``attrs`` are resolved (defaults
    filled in); unknown ``experts`` (None) is assumed to fit; ``soc`` None: this process's SoC."""
    return _library_path("MoeGatingTopKHash", {**attrs, "experts": experts, "hash_routing": hash_routing,
                                               "table_type": table_type, "additional": additional,
                                               "soc": soc})


def rerouting_path(attrs: dict, *, token_type: str | None = None, scale_type: str | None = None,
                   scale_rank: int | None = None, hidden: int | None = None,
                   soc: str | None = None) -> tuple[str | None, str]:
    """(ACLNN call, "") when a MoeReRouting node runs natively on the CANN EP, else (None, why it
    takes the copy fallback). Unknown types or sizes (None) are assumed to fit; ``soc`` None: this
    process's SoC."""
    return _library_path("MoeReRouting", {**attrs, "token_type": token_type, "scale_type": scale_type,
                                          "scale_rank": scale_rank, "hidden": hidden, "soc": soc})


def family_path(op_type: str, facts: dict, soc: str | None = None) -> tuple[str | None, str]:
    """(ACLNN call(s), "") when a node of the MoE op family (GroupedMatmul, MoeRoutedExperts,
    MoeInitRoutingV3, MoeFinalizeRoutingV2, MoeTokenPermute, MoeTokenUnpermute, MoeInitRouting, SwiGlu)
    runs natively on the CANN EP, else (None, why it takes the host fallback). ``facts``: the
    node's resolved attributes and what is known of its inputs (x_type, weight_type, bias_type,
    scale_type, scales_type, output_dtype, experts, k, rank); unknown facts (None) are assumed to
    fit; ``soc`` None: this process's SoC."""
    return _library_path(op_type, {**facts, "soc": soc})
