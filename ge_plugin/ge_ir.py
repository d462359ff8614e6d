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

# Standard ONNX ops GE's ONNX parser registers, with the versions registered: every
# `ai.onnx::<version>::<Op>` key in hicann/ops-math @c41933244c31 and hicann/ops-nn @e5c3fa9327ea
# (framework/*_onnx_plugin.cpp). Constant is parsed by GE itself (parser/onnx/onnx_constant_parser).


def _r(first: int, last: int) -> tuple[int, ...]:
    return tuple(range(first, last + 1))


GE_ONNX_OPSETS: dict[str, tuple[int, ...]] = {
    "Abs": _r(8, 18), "Acos": _r(8, 18), "Acosh": _r(8, 18), "AdaCast": _r(8, 18), "AdaptiveAvgPool2d": _r(8, 16),
    "AdaptiveMaxPool2d": _r(8, 16), "Add": _r(8, 18), "And": _r(8, 18), "ArgMax": _r(8, 18), "ArgMin": _r(8, 18),
    "AscendAntiQuant": _r(8, 22), "AscendDequant": _r(8, 22), "AscendDequantS16": _r(8, 22), "AscendQuant": _r(8,
    22), "AscendRequant": _r(8, 22), "AscendRequantS16": _r(8, 22), "Asin": _r(8, 18), "Asinh": _r(8, 18), "Atan":
    _r(8, 18), "Atanh": _r(8, 18), "AveragePool": _r(8, 18), "BasicGRUInplaceFillWindowCache": _r(8, 18),
    "BasicLSTMInplaceFillWindowCache": _r(8, 18), "BatchMatMul": _r(8, 16), "BatchNormalization": _r(8, 18),
    "Bernoulli": _r(15, 18), "BitShift": _r(11, 18), "BitwiseAnd": _r(18, 18), "BitwiseNot": _r(18, 18),
    "BitwiseOr": _r(18, 18), "BitwiseXor": _r(18, 18), "BlendFaceBgPartTwo": _r(11, 11), "BoundingBoxDecode": _r(8,
    18), "Bucketize": _r(8, 16), "Cast": _r(8, 18), "CastLike": _r(15, 18), "Ceil": _r(8, 18), "Celu": _r(8, 18),
    "Clip": _r(8, 18), "Compress": _r(9, 18), "Concat": _r(8, 18), "ConcatFromSequence": _r(11, 18),
    "ConstantOfShape": _r(8, 18), "Conv": _r(8, 18), "ConvTranspose": _r(8, 18), "Corr": _r(8, 16), "Cos": _r(8,
    18), "Cosh": _r(8, 18), "CumSum": _r(8, 18), "DeformableConv2D": _r(9, 16), "DeformableOffsets": _r(9, 16),
    "DepthToSpace": _r(8, 18), "Det": _r(8, 18), "Div": _r(8, 18), "Dropout": _r(8, 18), "DynSeqOuter": _r(8, 16),
    "Einsum": _r(8, 18), "Elu": _r(8, 18), "Equal": _r(8, 18), "Erf": _r(8, 18), "Exp": _r(8, 18), "Expand": _r(8,
    18), "EyeLike": _r(8, 18), "Flatten": _r(8, 18), "Floor": _r(8, 18), "GRU": _r(8, 18), "Gather": _r(8, 18),
    "GatherElements": _r(8, 18), "GatherND": _r(8, 18), "Gemm": _r(8, 18), "GlobalAveragePool": _r(8, 18),
    "GlobalLpPool": _r(8, 18), "GlobalMaxPool": _r(8, 18), "Greater": _r(8, 18), "GreaterOrEqual": (8, 12, 13, 14,
    15, 16, 17, 18), "GroupNormRelu": _r(8, 16), "HardSigmoid": (1, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18),
    "HardSwish": _r(14, 18), "Hardmax": _r(8, 18), "Identity": _r(8, 18), "If": _r(8, 18), "InstanceNormalization":
    _r(8, 18), "Int8Conv": _r(8, 16), "Int8ConvRelu": _r(8, 16), "Int8Dequantize": _r(8, 16), "Int8FC": _r(8, 16),
    "Int8GivenIntTensorFill": _r(8, 16), "Int8Quantize": _r(8, 16), "Int8Transpose": _r(8, 16), "IsInf": _r(10, 18),
    "IsNaN": _r(9, 18), "LRN": _r(8, 18), "LSTM": _r(8, 18), "LSTMP": (8, 9, 10, 11, 12, 13, 14, 15, 16, 18),
    "LayerNormalization": _r(17, 18), "LeakyRelu": _r(8, 18), "Less": _r(8, 18), "LessOrEqual": _r(8, 18), "Log":
    _r(8, 18), "LogSoftmax": _r(8, 18), "LpNormalization": (1, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18), "LpPool":
    _r(8, 18), "MatMul": _r(8, 18), "Max": _r(8, 18), "MaxPool": _r(8, 18), "MaxUnpool": (9, 11, 12, 13, 14, 15, 16,
    17, 18), "Mean": _r(8, 18), "MeanVarianceNormalization": _r(9, 18), "Min": _r(8, 18), "Mish": _r(18, 18), "Mod":
    _r(10, 18), "MovingSumWithSigmoid": _r(8, 16), "Mul": _r(8, 18), "Multinomial": _r(8, 18), "NPUAddRmsNorm":
    _r(11, 18), "NPUAntiQuant": _r(11, 18), "NPUAscendQuantV2": _r(11, 18), "NPUBoundingBoxDecode": _r(11, 18),
    "NPUBoundingBoxEncode": _r(11, 18), "NPUDeformableConv2d": _r(9, 16), "NPUDropoutWithAddSoftmax": _r(11, 18),
    "NPUDtypeCast": _r(11, 18), "NPUDynamicQuant": _r(11, 18), "NPUDynamicQuantV2": _r(11, 18), "NPUFastGelu":
    _r(11, 18), "NPUFormatCast": _r(11, 18), "NPUFusedAddRmsNorm": _r(11, 18), "NPUGeglu": _r(11, 18),
    "NPUGroupNormSilu": _r(11, 18), "NPUGroupQuant": _r(8, 18), "NPUGru": _r(11, 18), "NPUIndexing": _r(11, 18),
    "NPULstm": _r(11, 18), "NPULstmCell": _r(11, 18), "NPUMish": _r(11, 18), "NPUOneHot": _r(11, 18), "NPUQuantize":
    _r(11, 18), "NPURmsNorm": _r(11, 18), "NPURotaryMul": _r(11, 18), "NPUScatter": _r(11, 18), "NPUSignBitsPack":
    _r(11, 18), "NPUSignBitsUnpack": _r(11, 18), "NPUSlice": _r(11, 18), "NPUSoftmaxCrossEntropyWithLogits": _r(11,
    18), "NPUWeightQuantBatchMatmulV2": _r(11, 19), "Neg": _r(8, 18), "NonZero": _r(9, 18), "Not": _r(8, 18),
    "OneHot": _r(9, 18), "Or": _r(8, 18), "PRelu": _r(8, 18), "Pad": _r(8, 18), "PhonyConcat": _r(8, 18),
    "PhonySplit": _r(8, 18), "Pow": _r(8, 18), "QuantBatchMatMul": _r(8, 16), "RandomNormal": _r(8, 18),
    "RandomNormalLike": _r(8, 18), "RandomUniform": _r(8, 18), "RandomUniformLike": _r(8, 18), "Range": _r(8, 18),
    "Reciprocal": _r(8, 18), "ReduceL1": _r(8, 17), "ReduceL2": _r(8, 17), "ReduceLogSum": _r(8, 18),
    "ReduceLogSumExp": _r(8, 18), "ReduceMax": _r(8, 18), "ReduceMean": _r(8, 18), "ReduceMin": _r(8, 18),
    "ReduceProd": _r(8, 18), "ReduceSum": _r(8, 18), "ReduceSumSquare": (1, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
    18), "Relu": _r(8, 18), "RepeatWithPad": _r(8, 18), "Reshape": _r(8, 18), "Resize": _r(10, 18), "ResizeBicubic":
    _r(17, 17), "ReverseSequence": _r(10, 18), "Round": _r(8, 18), "Scatter": _r(9, 11), "ScatterElements": _r(11,
    18), "ScatterND": _r(8, 18), "Selu": _r(8, 18), "SequenceAt": _r(11, 18), "SequenceConstruct": _r(11, 18),
    "SequenceEmpty": _r(11, 18), "SequenceErase": _r(11, 18), "SequenceInsert": _r(11, 18), "SequenceLength": _r(11,
    18), "Shape": _r(8, 18), "Shrink": _r(9, 18), "Sigmoid": _r(8, 18), "Sign": _r(8, 18), "Sin": _r(8, 18), "Sinh":
    _r(8, 18), "Size": _r(8, 18), "Slice": _r(8, 18), "Softmax": _r(8, 18), "SoftmaxCrossEntropyLoss": _r(12, 18),
    "Softplus": _r(8, 18), "Softsign": _r(8, 18), "SpaceToDepth": _r(8, 18), "SparseToDense": _r(8, 18), "Split":
    _r(8, 18), "SplitToSequence": _r(11, 18), "Sqrt": _r(8, 18), "Squeeze": _r(8, 18), "Sub": _r(8, 18), "Sum":
    _r(8, 18), "SwinAttentionFFN": _r(17, 17), "SwinAttentionScore": _r(17, 17), "SwinTransformerLnQKV": _r(17, 17),
    "Tan": _r(8, 18), "Tanh": _r(8, 18), "ThresholdedRelu": _r(10, 18), "Tile": _r(8, 18), "TopK": _r(8, 18),
    "Transpose": _r(8, 18), "Trilu": _r(14, 18), "Triu": _r(13, 16), "Unique": _r(11, 18), "Unsqueeze": _r(8, 18),
    "Where": _r(8, 18), "Xor": _r(8, 18),
    "Constant": _r(1, 21),
}
GE_ONNX_SOURCES = (Source(*OPS_MATH, "*/framework/*_onnx_plugin.cpp"), Source(*OPS_NN, "*/framework/*_onnx_plugin.cpp"))
