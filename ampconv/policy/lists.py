"""Built-in op lists (docs/precision.md sec. 2) and fixed behaviour kinds (sec. 1).

List classes are editable by policy files; behaviour kinds are not, because
they describe what an op does.
"""

from __future__ import annotations

from typing import Dict, FrozenSet

from ampconv.schema import default_domain_ops

WHITE, BLACK, GRAY, UNLISTED = "WHITE", "BLACK", "GRAY", "UNLISTED"
CLASSES = (WHITE, BLACK, GRAY, UNLISTED)

DEFAULT_WHITE = frozenset(
    "Conv ConvTranspose DeformConv MatMul Gemm Einsum Attention LSTM GRU RNN".split()
)
DEFAULT_BLACK = frozenset(
    """Exp Log Pow Reciprocal Softplus Softmax LogSoftmax ReduceSum ReduceMean ReduceSumSquare
    ReduceL1 ReduceL2 ReduceProd ReduceLogSum ReduceLogSumExp CumSum CumProd GlobalAveragePool
    GlobalLpPool LpPool LayerNormalization GroupNormalization RMSNormalization
    InstanceNormalization MeanVarianceNormalization LpNormalization LRN SoftmaxCrossEntropyLoss
    NegativeLogLikelihoodLoss Acos Asin Acosh Asinh Atanh Cosh Sinh Tan Sin Cos Det DFT STFT
    Range GridSample AffineGrid RoiAlign MaxRoiPool""".split()
)
MINDSPORE_WHITE = frozenset("Conv ConvTranspose Gemm MatMul LSTM RNN GRU PRelu Relu".split())
MINDSPORE_BLACK = frozenset("BatchNormalization LayerNormalization".split())

# Behaviour kinds.
TRANSPARENT = frozenset(
    """Identity Reshape Flatten Squeeze Unsqueeze Transpose Expand Tile Concat Split Slice
    Gather GatherElements GatherND ScatterElements ScatterND Pad DepthToSpace SpaceToDepth
    Trilu Where Max Min Relu Neg Abs Clip MaxPool GlobalMaxPool ReduceMax ReduceMin Resize
    SplitToSequence SequenceAt SequenceConstruct ConcatFromSequence Optional OptionalGetElement
    ReverseSequence Compress""".split()
)
# Ops whose listed float input may be of any type without a cast.
ANY_TYPE_INPUT = frozenset({"Shape", "Size", "Cast"})
SOURCE = frozenset(
    """Constant ConstantOfShape RandomNormal RandomUniform RandomNormalLike RandomUniformLike
    EyeLike Bernoulli HannWindow HammingWindow BlackmanWindow MelWeightMatrix Cast CastLike""".split()
)
STRUCTURAL = frozenset({"If", "Loop", "Scan"})
# Attribute that fixes the output dtype of a source op (rewritten instead of adding a Cast).
DTYPE_ATTRIBUTE = {
    "Cast": "to",
    "RandomNormal": "dtype",
    "RandomUniform": "dtype",
    "RandomNormalLike": "dtype",
    "RandomUniformLike": "dtype",
    "EyeLike": "dtype",
    "Bernoulli": "dtype",
    "HannWindow": "output_datatype",
    "HammingWindow": "output_datatype",
    "BlackmanWindow": "output_datatype",
    "MelWeightMatrix": "output_datatype",
}
# Hard-blocked: quantization and Q/DQ edges (their float slots are scales, not data).
QUANTIZATION = frozenset(
    """QuantizeLinear DequantizeLinear DynamicQuantizeLinear QLinearConv QLinearMatMul
    ConvInteger MatMulInteger""".split()
)
# Ops whose ONNX function body only type-checks in float32: it feeds float32
# Constants into arithmetic on its T-typed input, with no CastLike. The onnx
# checker and runtimes without a native kernel expand that body, so a LOW node
# is an invalid model. Found by scanning every schema's body;
# tests/test_runtime_gaps.py re-runs the scan so the list stays complete.
FLOAT32_FUNCTION_BODY = frozenset({"MeanVarianceNormalization"})
# onnxruntime registers float16/bfloat16 kernels for these ops, so a model
# loads, but its CPU provider fails at run time when the reduction attribute
# is set ("MLFloat16 data type is not supported with ScatterND opset 18 when
# reduction is 'max'"). A load check cannot see it, so they stay float32.
REDUCTION_NEEDS_FLOAT32 = frozenset({"ScatterND", "ScatterElements"})
# Ops whose numeric range needs float32 no matter the level (not editable).
NOT_ORDINARY = QUANTIZATION | STRUCTURAL


def behaviour_kind(op_type: str, domain: str = "") -> str:
    """``transparent``, ``sink``, ``source``, ``structural`` or ``compute``.

    ``sink`` is decided from the schema by the planner (float in, non-float out);
    here it is returned for the ANY-typed ones only.
    """
    if domain not in ("", "ai.onnx"):
        return "compute"
    if op_type in STRUCTURAL:
        return "structural"
    if op_type in SOURCE:
        return "source"
    if op_type in TRANSPARENT:
        return "transparent"
    if op_type in ANY_TYPE_INPUT:
        return "sink"
    return "compute"


def preset_classes(preset: str) -> Dict[str, str]:
    """Map op key (``OpType`` or ``domain::OpType``) -> class for a preset.

    Ops absent from the map are UNLISTED.
    """
    if preset == "default":
        classes = {op: GRAY for op in default_domain_ops() if op not in NOT_ORDINARY}
        classes.update({op: BLACK for op in DEFAULT_BLACK})
        classes.update({op: WHITE for op in DEFAULT_WHITE})
        return classes
    if preset == "mindspore":
        classes = {op: BLACK for op in MINDSPORE_BLACK}
        classes.update({op: WHITE for op in MINDSPORE_WHITE})
        return classes
    raise KeyError(preset)


PRESETS: FrozenSet[str] = frozenset({"default", "mindspore"})
