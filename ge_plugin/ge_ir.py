"""The recorded IR of the CANN graph-engine (GE) operators the plugin maps ascend.moe nodes to: each
op's inputs (name, kind, element types) and attributes (name, kind, default) in GE's order, as read
from the operator's registration in its public repository (``REG_OP`` in ``op_graph/*_proto.h``, or
the ``OpDef`` of ``op_host/*_def.cpp``: the same IR for GE), with the repository, commit and path.

GE wires a framework node's inputs into this order by position, so the order here is the contract
the plugin is generated against (ge_plugin.generate). Element types are the union over the op's
registered combinations; they decide where the plugin inserts an index Cast. Also recorded: the
standard ONNX op versions GE's ONNX parser registers (``ai.onnx::<version>::<Op>`` in the ops
repositories' ``framework/*_onnx_plugin.cpp``), which decide the ``ge`` export target's opset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

REQUIRED, OPTIONAL, DYNAMIC = "required", "optional", "dynamic"
INT, BOOL, FLOAT, LIST_INT = "Int", "Bool", "Float", "ListInt"

# GE's ge::DataType codes (metadef inc/external/graph/types.h) of the element types named below.
GE_DATA_TYPES = {"DT_FLOAT": 0, "DT_FLOAT16": 1, "DT_INT8": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT64": 9,
                 "DT_UINT64": 10, "DT_BOOL": 12, "DT_BF16": 27, "DT_INT4": 29, "DT_FLOAT8_E5M2": 35,
                 "DT_FLOAT8_E4M3FN": 36, "DT_FLOAT8_E8M0": 37}
# ONNX element type name (onnx.TensorProto) -> GE name.
ONNX_TO_GE = {"float": "DT_FLOAT", "float16": "DT_FLOAT16", "bfloat16": "DT_BF16", "int8": "DT_INT8",
              "uint8": "DT_UINT8", "int32": "DT_INT32", "int64": "DT_INT64", "bool": "DT_BOOL", "int4": "DT_INT4",
              "float8e4m3fn": "DT_FLOAT8_E4M3FN", "float8e5m2": "DT_FLOAT8_E5M2"}


@dataclass(frozen=True)
class Source:
    """Where an op's IR was read: repository, full commit, path."""
    repo: str
    commit: str
    path: str


@dataclass(frozen=True)
class GeInput:
    name: str
    kind: str  # REQUIRED, OPTIONAL or DYNAMIC (a tensor list)
    types: tuple[str, ...]


@dataclass(frozen=True)
class GeAttr:
    name: str
    kind: str  # INT, BOOL, FLOAT, LIST_INT
    default: object = None  # None: required
    required: bool = False


@dataclass(frozen=True)
class GeOp:
    name: str
    source: Source
    inputs: tuple[GeInput, ...]
    outputs: tuple[GeInput, ...]
    attrs: tuple[GeAttr, ...] = field(default=())


OPS_TRANSFORMER = "hicann/ops-transformer", "c29bc1069d3252c641e2aa059ec88f392d3f05ac"
RECIPES = "hicann/cann-recipes-infer", "fbc225d2de3157a093a2e7dfc2b23086d23ed8f9"
OPS_NN = "hicann/ops-nn", "e5c3fa9327ea95ba26d06227e746923580d10921"
OPS_MATH = "hicann/ops-math", "c41933244c31e44fd496e3bb3212164f8c48c214"

_HALF = ("DT_BF16", "DT_FLOAT", "DT_FLOAT16")


def _i(name, kind, *types):
    return GeInput(name, kind, tuple(types))


GE_OPS: dict[str, GeOp] = {op.name: op for op in [
    GeOp("MoeGatingTopK", Source(*OPS_TRANSFORMER, "moe/moe_gating_top_k/op_graph/moe_gating_top_k_proto.h"),
         (_i("x", REQUIRED, *_HALF), _i("bias", OPTIONAL, *_HALF)),
         (_i("y", REQUIRED, *_HALF), _i("expert_idx", REQUIRED, "DT_INT32"), _i("out", REQUIRED, "DT_FLOAT")),
         (GeAttr("k", INT, required=True), GeAttr("k_group", INT, 1), GeAttr("group_count", INT, 1),
          GeAttr("group_select_mode", INT, 0), GeAttr("renorm", INT, 0), GeAttr("norm_type", INT, 0),
          GeAttr("out_flag", BOOL, False), GeAttr("routed_scaling_factor", FLOAT, 1.0),
          GeAttr("eps", FLOAT, 1e-20))),
    GeOp("MoeGatingTopKHash",
         Source(*RECIPES, "ops/ascendc/src/moe_gating_top_k_hash/op_host/moe_gating_top_k_hash_def.cpp"),
         (_i("x", REQUIRED, *_HALF), _i("bias", OPTIONAL, *_HALF),
          _i("input_ids", OPTIONAL, "DT_INT32", "DT_INT64"), _i("tid2eid", OPTIONAL, "DT_INT32", "DT_INT64")),
         (_i("y", REQUIRED, *_HALF), _i("expert_idx", REQUIRED, "DT_INT32"), _i("out", REQUIRED, "DT_FLOAT")),
         (GeAttr("k", INT, required=True), GeAttr("k_group", INT, 1), GeAttr("group_count", INT, 1),
          GeAttr("group_select_mode", INT, 0), GeAttr("renorm", INT, 0), GeAttr("norm_type", INT, 0),
          GeAttr("out_flag", BOOL, False), GeAttr("routed_scaling_factor", FLOAT, 1.0),
          GeAttr("eps", FLOAT, 1e-20))),
    GeOp("MoeReRouting", Source(*OPS_TRANSFORMER, "moe/moe_re_routing/op_graph/moe_re_routing_proto.h"),
         (_i("tokens", REQUIRED, "DT_FLOAT16", "DT_BF16", "DT_INT8", "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN"),
          _i("expert_token_num_per_rank", REQUIRED, "DT_INT32", "DT_INT64"),
          _i("per_token_scales", OPTIONAL, "DT_FLOAT", "DT_FLOAT8_E8M0")),
         (_i("permute_tokens", REQUIRED, "DT_FLOAT16", "DT_BF16", "DT_INT8", "DT_FLOAT8_E5M2", "DT_FLOAT8_E4M3FN"),
          _i("permute_per_token_scales", REQUIRED, "DT_FLOAT", "DT_FLOAT8_E8M0"),
          _i("permute_token_idx", REQUIRED, "DT_INT32"), _i("expert_token_num", REQUIRED, "DT_INT32", "DT_INT64")),
         (GeAttr("expert_token_num_type", INT, 1), GeAttr("idx_type", INT, 0))),
    GeOp("GroupedMatmul", Source(*OPS_TRANSFORMER, "gmm/grouped_matmul/op_host/grouped_matmul_def.cpp"),
         (_i("x", DYNAMIC, "DT_BF16", "DT_FLOAT", "DT_FLOAT16", "DT_INT4", "DT_INT8"),
          _i("weight", DYNAMIC, "DT_BF16", "DT_FLOAT", "DT_FLOAT16", "DT_INT4", "DT_INT8"),
          _i("bias", DYNAMIC, "DT_BF16", "DT_FLOAT", "DT_FLOAT16", "DT_INT32"),
          _i("scale", DYNAMIC, "DT_BF16", "DT_FLOAT", "DT_UINT64"),
          _i("offset", DYNAMIC, "DT_FLOAT"),
          _i("antiquant_scale", DYNAMIC, "DT_BF16", "DT_FLOAT16"),
          _i("antiquant_offset", DYNAMIC, "DT_BF16", "DT_FLOAT16"),
          _i("group_list", OPTIONAL, "DT_INT64"),
          _i("per_token_scale", OPTIONAL, "DT_FLOAT")),
         (_i("y", DYNAMIC, "DT_BF16", "DT_FLOAT", "DT_FLOAT16", "DT_INT32", "DT_INT8"),),
         (GeAttr("split_item", INT, 0), GeAttr("dtype", INT, 0), GeAttr("transpose_weight", BOOL, False),
          GeAttr("transpose_x", BOOL, False), GeAttr("group_type", INT, -1), GeAttr("group_list_type", INT, 0),
          GeAttr("act_type", INT, 0), GeAttr("tuning_config", LIST_INT, (0,)))),
    GeOp("MoeInitRoutingV3", Source(*OPS_TRANSFORMER, "moe/moe_init_routing_v3/op_graph/moe_init_routing_v3_proto.h"),
         (_i("x", REQUIRED, "DT_INT8", "DT_FLOAT16", "DT_FLOAT", "DT_BF16"), _i("expert_idx", REQUIRED, "DT_INT32"),
          _i("scale", OPTIONAL, "DT_FLOAT"), _i("offset", OPTIONAL, "DT_FLOAT")),
         (_i("expanded_x", REQUIRED, "DT_INT8", "DT_FLOAT16", "DT_FLOAT", "DT_BF16"),
          _i("expanded_row_idx", REQUIRED, "DT_INT32"), _i("expert_tokens_count_or_cumsum", REQUIRED, "DT_INT64"),
          _i("expanded_scale", REQUIRED, "DT_FLOAT")),
         (GeAttr("active_num", INT, -1), GeAttr("expert_capacity", INT, -1), GeAttr("expert_num", INT, -1),
          GeAttr("drop_pad_mode", INT, 0), GeAttr("expert_tokens_num_type", INT, 0),
          GeAttr("expert_tokens_num_flag", BOOL, False), GeAttr("quant_mode", INT, -1),
          GeAttr("active_expert_range", LIST_INT, ()), GeAttr("row_idx_type", INT, 0))),
    GeOp("MoeInitRouting", Source(*OPS_TRANSFORMER, "moe/moe_init_routing/op_graph/moe_init_routing_proto.h"),
         (_i("x", REQUIRED, *_HALF), _i("row_idx", REQUIRED, "DT_INT32"), _i("expert_idx", REQUIRED, "DT_INT32")),
         (_i("expanded_x", REQUIRED, *_HALF), _i("expanded_row_idx", REQUIRED, "DT_INT32"),
          _i("expanded_expert_idx", REQUIRED, "DT_INT32")),
         (GeAttr("active_num", INT, required=True),)),
    GeOp("MoeTokenPermute", Source(*OPS_TRANSFORMER, "moe/moe_token_permute/op_host/moe_token_permute_def.cpp"),
         (_i("tokens", REQUIRED, *_HALF, "DT_INT8"), _i("indices", REQUIRED, "DT_INT32", "DT_INT64")),
         (_i("permute_tokens", REQUIRED, *_HALF, "DT_INT8"), _i("sorted_indices", REQUIRED, "DT_INT32")),
         (GeAttr("num_out_tokens", INT, 0), GeAttr("padded_mode", BOOL, False))),
    GeOp("MoeFinalizeRoutingV2",
         Source(*OPS_TRANSFORMER, "moe/moe_finalize_routing_v2/op_graph/moe_finalize_routing_v2_proto.h"),
         (_i("expanded_x", REQUIRED, *_HALF), _i("expanded_row_idx", REQUIRED, "DT_INT32"),
          _i("x1", OPTIONAL, *_HALF), _i("x2", OPTIONAL, *_HALF), _i("bias", OPTIONAL, *_HALF),
          _i("scales", OPTIONAL, *_HALF), _i("expert_idx", OPTIONAL, "DT_INT32")),
         (_i("y", REQUIRED, *_HALF),),
         (GeAttr("drop_pad_mode", INT, 0),)),
    GeOp("MoeTokenUnpermute", Source(*OPS_TRANSFORMER, "moe/moe_token_unpermute/op_host/moe_token_unpermute_def.cpp"),
         (_i("permuted_tokens", REQUIRED, *_HALF), _i("sorted_indices", REQUIRED, "DT_INT32"),
          _i("probs", OPTIONAL, *_HALF)),
         (_i("unpermuted_tokens", REQUIRED, *_HALF),),
         (GeAttr("padded_mode", BOOL, False), GeAttr("restore_shape", LIST_INT, ()))),
    GeOp("SwiGlu", Source(*OPS_NN, "activation/swi_glu/op_graph/swi_glu_proto.h"),
         (_i("x", REQUIRED, *_HALF),), (_i("y", REQUIRED, *_HALF),), (GeAttr("dim", INT, -1),)),
    GeOp("Cast", Source(*OPS_MATH, "math/cast/op_graph/cast_proto.h"),
         (_i("x", REQUIRED, "DT_INT32", "DT_INT64", *_HALF),), (_i("y", REQUIRED, "DT_INT32", "DT_INT64", *_HALF),),
         (GeAttr("dst_type", INT, required=True),)),
]}

# Standard ONNX ops GE's ONNX parser registers, with the versions registered (`ai.onnx::<v>::<Op>`
# keys in hicann/ops-math @c41933244c31 and hicann/ops-nn @e5c3fa9327ea, framework/*_onnx_plugin.cpp):
# the ops an exported MoE layer uses. Constant is parsed by GE itself (parser/onnx/onnx_constant_parser).
_V8_18 = tuple(range(8, 19))
GE_ONNX_OPSETS: dict[str, tuple[int, ...]] = {
    **{op: _V8_18 for op in (
        "Abs", "Add", "ArgMax", "Cast", "Clip", "Concat", "ConstantOfShape", "CumSum", "Div", "Equal", "Exp",
        "Expand", "Flatten", "Gather", "GatherElements", "Gemm", "Greater", "Identity", "If", "Less", "Log",
        "MatMul", "Max", "Min", "Mul", "Neg", "Not", "Pow", "Range", "Reciprocal", "ReduceMax", "ReduceMean",
        "ReduceSum", "Reshape", "Shape", "Sigmoid", "Slice", "Softmax", "Softplus", "Split", "Sqrt", "Squeeze",
        "Sub", "Tile", "TopK", "Transpose", "Unsqueeze", "Where")},
    "ScatterElements": tuple(range(11, 19)),
    "Constant": tuple(range(1, 19)),
}
GE_ONNX_SOURCES = (Source(*OPS_MATH, "*/framework/*_onnx_plugin.cpp"), Source(*OPS_NN, "*/framework/*_onnx_plugin.cpp"))
