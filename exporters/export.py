"""``export()``: torch model -> checked ONNX model with one ascend.moe node per op call."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
from typing import TYPE_CHECKING, Any

import onnx
import torch

from ascend_moe_onnx import onnx_schemas

from . import bit_views, experts_graph, registry, targets
from . import export_checks as checks
from .aten_onnx import aten_translations

if TYPE_CHECKING:
    from .weights_quant import WeightsQuant

# The dynamo exporter emits opset 20 by default; the function bodies need >= 18.
DEFAULT_OPSET = 20
# ONNX Runtime's CPU kernels that move float8 tensors (Reshape, Transpose, Squeeze, ...) are
# registered from opset 21 on: a program with float8 values exports at least at this opset.
FLOAT8_OPSET = 21
_FLOAT8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)
# Protobuf cannot serialise a message of 2 GiB or more: larger models keep weights outside.
_PROTO_LIMIT = 2**31 - 1


_log = logging.getLogger(__name__)


@contextlib.contextmanager
def _quiet_exporter():
    """Silence the exporter's noise that says nothing about this model (e.g. torchvision absent),
    unless this module logs at INFO (``moe-onnx --verbose``)."""
    if _log.isEnabledFor(logging.INFO):
        yield
        return
    # torch.onnx has no public switch for these registry warnings: its module's logger, only here.
    logger = logging.getLogger("torch.onnx._internal.exporter._registration")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            yield
    finally:
        logger.setLevel(level)


def _parameter_bytes(model) -> int:
    if not isinstance(model, torch.nn.Module):
        return 0
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def custom_translation_table() -> dict:
    """``{torch OpOverload: onnxscript translation}`` for ``torch.onnx.export(dynamo=True)``."""
    table = {getattr(getattr(torch.ops, f.namespace), f.name).default: f.translation for f in registry.front_ends()}
    table.update(aten_translations())
    return table


_symbolics_registered: set[int] = set()


def register_torchscript_symbolics(opset_version: int = DEFAULT_OPSET) -> None:
    """Register the legacy TorchScript exporter symbolics (``dynamo=False``) for an opset."""
    if opset_version in _symbolics_registered:
        return
    for f in registry.front_ends():
        assert f.symbolic is not None  # front_ends() returns complete entries
        torch.onnx.register_custom_op_symbolic(f.op, f.symbolic, opset_version)
    _symbolics_registered.add(opset_version)


@contextlib.contextmanager
def _explained():
    """Turn an exporter failure caused by a known model idiom into an error that says what to do."""
    try:
        yield
    except Exception as exc:
        explained = checks.explain(exc)
        if explained is None:
            raise
        raise explained from exc


class _DataAsTensor(torch.overrides.TorchFunctionMode):
    """While tracing non-strict: ``t.data`` reads ``t`` itself.

    Ascend code reads weights as ``layer.weight.data`` in forward. Eagerly that is the parameter's
    storage; torch.export's non-strict tracer instead records the untraced result as a fake
    constant, which the exporter cannot write. The same values are what ``.data`` means in a
    forward pass (autograd plays no part in an exported graph), and traced as the tensor itself it
    keeps the parameter or buffer an input of the graph, its initializer under its own name, not a
    copy folded into a constant. Active only inside ``export``.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__self__", None) is torch.Tensor.data and len(args) == 1:
            return args[0]
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def _data_reads_tensor():
    """``t.data`` read in forward traces as ``t`` in both of torch.export's modes.

    Non-strict tracing goes through :class:`_DataAsTensor`. Strict mode (dynamo, taken when
    non-strict tracing cannot keep a size symbolic, e.g. split sizes from ``int(t.item())``) does not
    call torch function modes for attribute reads: it records ``.data`` as an untracked copy that
    becomes a fake constant. While exporting, its rule for ``.data`` gives the tensor itself, as
    :class:`_DataAsTensor` does; the rule is restored on exit."""
    try:
        from torch._dynamo.variables.tensor import TensorVariable
    except ImportError:  # another torch: only the non-strict rule applies
        TensorVariable = None
    rule = getattr(TensorVariable, "method_attr_data", None)
    if rule is not None:
        TensorVariable.method_attr_data = lambda self, tx: self
    try:
        with _DataAsTensor():
            yield
    finally:
        if rule is not None:
            TensorVariable.method_attr_data = rule


@contextlib.contextmanager
def _module_lookups_fold():
    """``importlib.import_module(name)`` called in forward folds to the module in strict tracing.

    Model code looks modules up by name at call time (a per-step metadata module, say). Dynamo
    refuses to trace into ``importlib``; the lookup has no tensor semantics, and a traced graph keeps
    no Python calls, so it is evaluated while tracing, as eager code evaluates it. The rule is
    dynamo's own constant-folding polyfill, registered for the duration of ``export`` and removed on
    exit, so ``torch.compile`` outside export sees dynamo's usual rule."""
    import importlib

    try:
        from torch._dynamo import substitute_in_graph
        from torch._dynamo.trace_rules import _polyfilled_function_ids, get_torch_obj_rule_map
        from torch._dynamo.variables import PolyfilledFunctionVariable
        from torch._dynamo.variables.builder import VariableBuilder
    except ImportError:  # another torch: dynamo's own rule applies
        yield
        return
    original = importlib.import_module
    if id(original) in _polyfilled_function_ids:  # already registered by the caller: leave it
        yield
        return

    def import_module(name, package=None):
        return original(name, package)

    substitute_in_graph(original, can_constant_fold_through=True)(import_module)
    rules, dispatch = get_torch_obj_rule_map(), VariableBuilder._id_dispatch()
    handlers = PolyfilledFunctionVariable._get_polyfill_handlers()
    wrapped = handlers[original]
    try:
        yield
    finally:
        for fn in (original, wrapped):
            _polyfilled_function_ids.remove(id(fn))
            dispatch.pop(id(fn), None)
            rules.pop(fn, None)
            handlers.pop(fn, None)


def _as_onnx_export(fn):
    """``fn`` run with ``torch.onnx.is_in_onnx_export()`` true, as torch.onnx's capture runs the model:
    the models' export-only branches (placeholder ops instead of data-dependent eager loops) are taken."""
    try:
        from torch.onnx._internal.exporter._flags import set_onnx_exporting_flag
    except ImportError:  # another torch: the flag is not settable
        return fn
    return set_onnx_exporting_flag(fn)


def _capture(model, args, kwargs, dynamic_shapes, strict: bool) -> torch.export.ExportedProgram:
    """torch.export as torch.onnx.export captures (its capture strategies: size-oblivious 0/1 dims,
    deferred runtime asserts; ``torch.onnx.is_in_onnx_export()`` true, which the models' placeholder
    ops test), plain torch.export where those are not available."""
    try:
        from torch.onnx._internal.exporter import _capture_strategies as strategies
        strategy = strategies.TorchExportStrictStrategy if strict else strategies.TorchExportNonStrictStrategy
    except (ImportError, AttributeError):  # another torch: its public entry point
        return _as_onnx_export(torch.export.export)(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                                                    strict=strict)
    result = _as_onnx_export(strategy())(model, args, kwargs, dynamic_shapes)
    if result.exported_program is None:
        raise result.exception
    return result.exported_program


def _trace(model, args, kwargs, dynamic_shapes) -> torch.export.ExportedProgram:
    """The program to convert: torch.onnx's non-strict capture, unless a plain non-strict trace shows
    that the model fixes a dimension declared dynamic (e.g. ``x.shape[:-1].numel()``; torch.onnx's
    capture settings defer such guards into constants the graph keeps silently): then torch.export's
    strict mode, which keeps such sizes symbolic. Every trace runs the model as the ONNX export does
    (``torch.onnx.is_in_onnx_export()`` true). Raises :class:`checks.ExportError` naming the inputs
    and dimensions when strict tracing fixes them too."""
    if not isinstance(model, torch.nn.Module):
        return model
    where = dict(model=model, args=args, kwargs=kwargs, dynamic_shapes=dynamic_shapes)
    fixed = []
    if dynamic_shapes is not None:
        try:
            # the program the ONNX capture sees (a trace of the eager path would stop at its
            # data-dependent loops, logging the whole graph, and say nothing about the dims)
            plain = _as_onnx_export(torch.export.export)(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                                                         strict=False)
            fixed = checks.specialised_dims(plain, **where)
        except Exception:  # noqa: BLE001  (what only the ONNX capture's settings trace: the capture is checked below)
            fixed = []
    if not fixed:
        failures, fixed_by = [], []
        for strict in (False, True):
            try:
                captured = _capture(model, args, kwargs, dynamic_shapes, strict)
            except Exception as exc:  # noqa: BLE001  (torch.onnx's order: non-strict, then strict)
                failures.append(exc)
                continue
            # the plain trace could not run (a named Dim it specialised raises there): the capture
            # itself is checked, and a size the non-strict capture fixed gets the strict one
            fixed = checks.specialised_dims(captured, **where)
            if fixed:
                fixed_by.append(fixed)
                continue
            if strict and fixed_by:
                warnings.warn(f"export: non-strict tracing fixed {_listed(fixed_by[0])}; traced in torch.export's "
                              "strict mode instead, which keeps it dynamic", stacklevel=4)
            return captured
        if fixed_by:
            raise checks.specialisation_error(fixed_by[0], tried_strict=True) from (failures[0] if failures else None)
        raise checks.explain(failures[0]) or checks.traced_specialisation(failures[0]) or failures[0]
    try:
        with _explained():
            strict = _as_onnx_export(torch.export.export)(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                                                          strict=True)
    except Exception as exc:  # noqa: BLE001
        raise checks.specialisation_error(fixed, tried_strict=True) from exc
    if checks.specialised_dims(strict, **where):
        raise checks.specialisation_error(fixed, tried_strict=True)
    warnings.warn(f"export: non-strict tracing fixed {_listed(fixed)}; traced in torch.export's strict mode "
                  "instead, which keeps it dynamic", stacklevel=4)
    return strict


def _storage_releases_dropped(program):
    """``t.untyped_storage().resize_(0)`` on a tensor the graph no longer reads, removed.

    Ascend code frees a dead intermediate's device memory early that way (vllm-ascend's token
    dispatcher); dynamo records it as ``inductor.resize_storage_bytes_(t, 0)``. An ONNX graph holds
    values, not storage, so releasing a tensor nothing reads afterwards changes no output. A release
    of a tensor read later (torch would fail there), or a resize to another size, is refused."""
    if not isinstance(program, torch.export.ExportedProgram):
        return program
    op = getattr(getattr(torch.ops, "inductor", None), "resize_storage_bytes_", None)
    if op is None:
        return program
    graph = program.graph_module.graph
    order = {node: i for i, node in enumerate(graph.nodes)}
    releases = [n for n in graph.nodes if n.op == "call_function" and n.target is op.default]
    for node in releases:
        tensor, size = node.args[0], node.args[1]
        later = [u for u in tensor.users if u is not node and order[u] > order[node]]
        if size != 0 or later or node.users:
            raise checks.ExportError(
                f"export: `untyped_storage().resize_({size})` of a tensor ({tensor.name}) that the graph "
                f"{'reads afterwards' if later else 'keeps using'} has no ONNX equivalent: an ONNX graph holds "
                "values, not storage; release storage only of tensors nothing reads afterwards")
        graph.erase_node(node)
    if releases:
        program.graph_module.recompile()
    return program


def _noop_squeezes_dropped(program):
    """``aten.squeeze`` nodes that the traced program evaluated as no-ops, removed.

    ``t.squeeze(0)`` leaves a dimension that is not 1 as it is; on a dynamic dimension torch decides
    that from the size's range (or a runtime assert) and records the node with the input's rank.
    torchlib writes every such node as an ONNX ``Squeeze``, which needs the dimension to be 1 and
    contradicts the recorded shape. A node whose output has its input's rank is the identity."""
    if not isinstance(program, torch.export.ExportedProgram):
        return program
    graph = program.graph_module.graph
    targets = {torch.ops.aten.squeeze.dim, torch.ops.aten.squeeze.dims}
    dropped = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in targets:
            continue
        source, out = node.args[0].meta.get("val"), node.meta.get("val")
        if isinstance(source, torch.Tensor) and isinstance(out, torch.Tensor) and source.dim() == out.dim():
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
            dropped = True
    if dropped:
        program.graph_module.recompile()
    return program


def _has_float8(program: torch.export.ExportedProgram) -> bool:
    """Whether a value of ``program`` (an input, a weight or an intermediate, in nested graphs too:
    a forward under ``torch.no_grad()`` traces into a submodule) is float8."""
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            vals = node.meta.get("val")
            for val in vals if isinstance(vals, (list, tuple)) else (vals,):
                if isinstance(val, torch.Tensor) and val.dtype in _FLOAT8_DTYPES:
                    return True
    return False


def _listed(fixed) -> str:
    return ", ".join(f"input '{n}' dimension {d}" for n, d, _ in fixed)


def _dynamo_export(model, args, kwargs, dynamic_shapes, input_names, output_names, opset_version,
                   float8_opset=False):
    """torch.onnx.export(dynamo=True) of :func:`_trace`'s program with the translation table;
    ``float8_opset``: a program with float8 values exports at :data:`FLOAT8_OPSET` at least."""
    _log.info("export: tracing %s", type(model).__name__)
    with _data_reads_tensor(), _module_lookups_fold(), bit_views.recording():
        traced = _noop_squeezes_dropped(_storage_releases_dropped(_trace(model, args, kwargs, dynamic_shapes)))
    if float8_opset and opset_version < FLOAT8_OPSET and isinstance(traced, torch.export.ExportedProgram) \
            and _has_float8(traced):
        _log.info("export: float8 values: opset %d", FLOAT8_OPSET)
        opset_version = FLOAT8_OPSET
    _log.info("export: converting the traced program (torch.onnx.export, dynamo)")
    with _explained():
        program = torch.onnx.export(
            traced, args, kwargs=kwargs, dynamo=True, custom_translation_table=custom_translation_table(),
            input_names=input_names, output_names=output_names, opset_version=opset_version,
            optimize=True, verbose=False,
        )
    rename = getattr(program, "_rename_dynamic_axes", None)  # what torch.onnx.export(module) does
    if dynamic_shapes is not None and rename is not None and traced is not model:
        rename(dynamic_shapes)  # the graph's dims take the Dim names, not the tracer's symbols
    return program


def strip_metadata(proto: onnx.ModelProto) -> onnx.ModelProto:
    """Remove, in place, the exporter's metadata_props and doc strings of every graph (subgraphs and
    functions included), node, value and initializer; the model's own metadata_props stay."""
    from ascend_moe_onnx.onnx_schemas._common import walk_graphs

    def clear(graph_nodes):
        for node in graph_nodes:
            del node.metadata_props[:]
            node.doc_string = ""

    for graph in walk_graphs(proto.graph):
        del graph.metadata_props[:]
        clear(graph.node)
        for value in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
            del value.metadata_props[:]
    for function in proto.functions:
        del function.metadata_props[:]
        clear(function.node)
    return proto


def _target_opset(target: str, opset_version: int | None, experts: str | None) -> int:
    """The opset to export for ``target``; a TargetError for options the target cannot honour."""
    if target == "ge":
        if opset_version not in (None, targets.GE_OPSET):
            raise targets.TargetError(f"target 'ge': opset {opset_version} requested, but GE's ONNX parser "
                                      f"registers the layers' standard ops at opset {targets.GE_OPSET} at most "
                                      f"(exporters.targets)")
        if experts not in (None, "ort"):
            raise targets.TargetError(f"target 'ge': the '{experts}' expert formulation is not what GE runs; use "
                                      f"the default (the op family's chain)")
        return targets.GE_OPSET
    if target != "cann":
        return DEFAULT_OPSET if opset_version is None else opset_version
    if opset_version not in (None, targets.CANN_OPSET):
        raise targets.TargetError(f"target 'cann': opset {opset_version} requested, but the CANN EP's kernels "
                                  f"match opset {targets.CANN_OPSET} nodes (exporters.targets)")
    if experts not in (None, "ort"):
        raise targets.TargetError(f"target 'cann': the '{experts}' expert formulation runs on the host under "
                                  f"the CANN EP (If/TopK/Gather/Loop have no CANN kernel); use the default")
    return targets.CANN_OPSET


def _for_cann(proto: onnx.ModelProto) -> None:
    """The CANN target's rewrites (in place), and a warning naming nodes that stay on the host."""
    targets.rewrite_for_cann(proto)
    host = targets.cann_host_nodes(proto)
    if host:
        shown = "; ".join(host[:8]) + (f"; ... ({len(host)} in all)" if len(host) > 8 else "")
        warnings.warn(f"export(target='cann'): these nodes have no CANN kernel and will run on the host: {shown}",
                      stacklevel=3)


def _for_ge(proto: onnx.ModelProto) -> None:
    """The graph-engine target's rewrites and checks (in place), and a warning naming FLOAT attributes
    GE's parser would read rounded."""
    changed = targets.rewrite_for_ge(proto)
    if changed:
        warnings.warn("export(target='ge'): GE's ONNX parser prints FLOAT attributes with %g (6 significant "
                      "digits), which changes: " + "; ".join(changed), stacklevel=3)


def export(
    model: torch.nn.Module,
    args: tuple,
    path: str | os.PathLike | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    opset_version: int | None = None,
    attach_functions: bool = True,
    dynamo: bool = True,
    dynamic_axes: dict | None = None,
    external_data: bool | None = None,
    check: bool = True,
    experts: str | None = None,
    keep_metadata: bool = False,
    target: str = targets.DEFAULT,
    weights_quant: WeightsQuant | None = None,
    bfloat16_in_float32: bool = False,
) -> onnx.ModelProto:
    """Export ``model`` with one ascend.moe node per op call, check it and optionally save it.

    ``attach_functions`` adds the pure-ONNX bodies (model-local functions) so the model also runs
    where the custom-op library is not loaded. ``dynamo=False`` uses the TorchScript exporter
    (``dynamic_axes`` instead of ``dynamic_shapes``). ``external_data`` stores the weights in a
    file beside ``path`` (default: when they approach protobuf's 2 GiB limit); the returned model
    then holds references to that data, not the weights. ``experts`` picks the expert formulation of
    the MoE blocks inside ``model`` (``ort``, ``onnx`` or ``padded``, see exporters.experts_graph; None: the
    blocks' own, ``ort`` by default); their placeholder nodes are expanded into it.
    ``weights_quant`` (exporters.weights_quant.WeightsQuant) stores the routed experts' weights
    quantized (docs/quantization.md). ``keep_metadata`` keeps the exporter's metadata (node stack
    traces with this machine's paths, module names, the ExportedProgram's signature: often most of a
    small model's bytes), for
    debugging an export; by default it is removed. ``target`` is the runtime the graph is for
    (exporters.targets): ``cpu`` (default, opset 20; 21 for a program with float8 values) or
    ``cann`` (ONNX Runtime's CANN EP: opset 18, MoeRoutedExperts at every size, formulations its
    kernels cover; a warning names any node that would still compute on the host) or ``ge``
    (CANN's graph engine through the project's parser plugin: opset 18, the op family's chain,
    exporters.targets). ``opset_version`` defaults to the
    target's.
    ``bfloat16_in_float32`` computes the standard ops' bfloat16 arithmetic (MatMul, Gemm,
    elementwise) in float32 between Casts (exporters.bfloat16_compute): ONNX Runtime's CPU EP has
    no bfloat16 kernel for them; keep it off for the CANN EP, whose bfloat16 MatMul runs natively.

    A dimension declared dynamic that the graph would fix is never exported silently: the dynamo
    path retraces in strict mode (which keeps e.g. ``x.shape[:-1].numel()`` symbolic) and otherwise
    raises :class:`export_checks.ExportError` naming the input and dimension, as it does for
    exporter failures caused by known idioms (stable argsort). ``t.data`` read in forward is traced
    as ``t`` itself (docs/ascend-code.md).
    """
    float8_opset = opset_version is None and targets.check(target) == "cpu"
    opset_version = _target_opset(targets.check(target), opset_version, experts)
    onnx_schemas.register()
    model = model.eval() if isinstance(model, torch.nn.Module) else model
    if external_data is None:
        external_data = _parameter_bytes(model) > _PROTO_LIMIT * 0.9
    if external_data and path is None:
        raise ValueError("export: external_data needs a path to write the model and its weights to")
    if dynamo:
        with _quiet_exporter(), experts_graph.using(model, experts):
            program = _dynamo_export(model, args, kwargs, dynamic_shapes, input_names, output_names,
                                     opset_version, float8_opset)
        if external_data:
            assert path is not None  # checked above
            program.save(os.fspath(path), external_data=True)
            # quantizing reads the float weights (then written again, quantized, in their place)
            proto = onnx.load(os.fspath(path), load_external_data=weights_quant is not None)
        else:
            proto = program.model_proto
        _log.info("export: expanding the expert formulation placeholders (target %s)", target)
        proto = experts_graph.expand(proto, target, weights_quant)
    else:
        if external_data:
            raise ValueError("export: external_data needs the dynamo exporter (dynamo=True)")
        register_torchscript_symbolics(opset_version)
        buf = io.BytesIO()
        with _quiet_exporter(), _explained():
            torch.onnx.export(
                # the TorchScript exporter writes to a file object too (torch's annotation names paths only)
                model, args if kwargs is None else (*args, kwargs), buf, dynamo=False,  # type: ignore[arg-type]
                input_names=input_names, output_names=output_names,
                dynamic_axes=dynamic_axes, opset_version=opset_version,
                custom_opsets={onnx_schemas.DOMAIN: onnx_schemas.OPSET_VERSION},
            )
        proto = onnx.load_from_string(buf.getvalue())
        fixed = checks.specialised_dims(proto, dynamic_axes=dynamic_axes)
        if fixed:
            raise checks.specialisation_error(fixed, tried_strict=False)
    if bfloat16_in_float32:
        from .bfloat16_compute import compute_bfloat16_in_float32

        if not dynamo:  # the TorchScript graph records no intermediate types
            proto = onnx.shape_inference.infer_shapes(proto)
        compute_bfloat16_in_float32(proto)
    if target == "cann":
        _for_cann(proto)
    elif target == "ge":
        _for_ge(proto)
    if attach_functions:
        from ascend_moe_onnx.onnx_schemas.functions import attach_functions as attach

        proto = attach(proto)
    if not keep_metadata:
        strip_metadata(proto)
    if path is not None and external_data and weights_quant is not None:
        data = os.fspath(path) + ".data"
        if os.path.exists(data):
            os.remove(data)  # the float weights, read into proto and replaced by the quantized ones
        onnx.save(proto, os.fspath(path), save_as_external_data=True, location=os.path.basename(data))
    elif path is not None:
        # With external data the weights stay where program.save put them; only the graph is rewritten.
        onnx.save(proto, os.fspath(path))
    if check:
        # The checker reads a large model from its path (it cannot take a > 2 GiB message).
        onnx_schemas.check_model(os.fspath(path) if path is not None and external_data else proto, full_check=True)
    return proto
