"""Built-in op lists (docs/precision.md sec. 2) and fixed behaviour kinds (sec. 1).

List classes are editable by policy files; behaviour kinds are not, because
they describe what an op does.
"""

from __future__ import annotations

from typing import Dict, FrozenSet

from ampconv.runtime import facts as runtime_facts
from ampconv.runtime.schema import default_domain_ops

WHITE, BLACK, GRAY, UNLISTED = "WHITE", "BLACK", "GRAY", "UNLISTED"
CLASSES = (WHITE, BLACK, GRAY, UNLISTED)

# onnxruntime's fused transformer and CNN ops (``com.microsoft``; their schemas come from
# onnxruntime, ampconv.runtime.contrib_schemas). MatMul-like and attention ops are WHITE, like MatMul.
MICROSOFT = "com.microsoft"
CONTRIB_WHITE = frozenset(
    f"{MICROSOFT}::{op}"
    for op in """Attention MultiHeadAttention GroupQueryAttention PackedAttention PackedMultiHeadAttention
    DecoderMaskedMultiHeadAttention DecoderMaskedSelfAttention DecoderAttention LongformerAttention
    SparseAttention PagedAttention FusedMatMul FusedGemm FusedConv TransposeMatMul GemmFastGelu
    FusedMatMulActivation MatMulNBits NhwcConv""".split()
)
# Fused norms (statistics in float32 whatever the I/O type: U is float only) and fused GELUs,
# biases and rotary embeddings: safe in LOW, so they follow their neighbours like any gray op.
CONTRIB_GRAY = frozenset(
    f"{MICROSOFT}::{op}"
    for op in """SkipLayerNormalization SkipSimplifiedLayerNormalization EmbedLayerNormalization GroupNorm
    SkipGroupNorm BiasGelu FastGelu Gelu QuickGelu BiasSplitGelu BiasAdd BiasSoftmax RotaryEmbedding
    GemmaRotaryEmbedding""".split()
) | frozenset({"SimplifiedLayerNormalization"})  # onnxruntime's, in the default domain
DEFAULT_WHITE = frozenset(
    "Conv ConvTranspose DeformConv MatMul Gemm Einsum Attention LSTM GRU RNN".split()
) | CONTRIB_WHITE
# Kept float32 on every model (docs/precision.md sec. 2): position-like arithmetic that fp16
# cannot index (Range, CumSum), coordinates (RoiAlign, GridSample), spectral and
# trigonometric ops whose arguments grow with position, determinants and losses.
DEFAULT_BLACK = frozenset(
    """Range CumSum CumProd DFT STFT Det RoiAlign MaxRoiPool GridSample AffineGrid
    SoftmaxCrossEntropyLoss NegativeLogLikelihoodLoss Acos Asin Acosh Asinh Atanh Cosh Sinh Tan Sin Cos""".split()
)
# Gray in the default preset, but once black: their risk is the range of their I/O, which a
# kernel computing in float32 inside (norm statistics, softmax and reduction accumulators)
# does not remove. They run LOW unless a range guard finds evidence on the model
# (ampconv.plan.ranges_guard); docs/precision.md sec. 2 lists what each guard looks for.
DEFAULT_GUARDED = frozenset(
    """Exp Log Pow Reciprocal Softplus Softmax LogSoftmax ReduceSum ReduceMean ReduceSumSquare
    ReduceL1 ReduceL2 ReduceProd ReduceLogSum ReduceLogSumExp GlobalAveragePool GlobalLpPool LpPool
    LayerNormalization GroupNormalization RMSNormalization InstanceNormalization
    MeanVarianceNormalization LpNormalization LRN""".split()
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
# Hard-blocked: integer-arithmetic quantized ops (their float slots are scales of integer
# math). QuantizeLinear and DequantizeLinear are not among them: from opset 19 their scale
# may be LOW, and their schema decides (docs/precision.md sec. 6).
QUANTIZATION = frozenset(
    """DynamicQuantizeLinear QLinearConv QLinearMatMul ConvInteger MatMulInteger""".split()
)
# onnxruntime's quantized contrib ops, blocked for the same reason. Not among them: the weight-only
# quantized ops its genai builder writes (MatMulNBits, GatherBlockQuantized), whose float slots are the
# activations and the scales that dequantize the weight; their fp16 form is the builder's own, so they
# follow their activations like any op, the quantized weight passing through untouched.
CONTRIB_QUANTIZATION = frozenset(
    f"{MICROSOFT}::{op}"
    for op in """QuantizeLinear DequantizeLinear DynamicQuantizeMatMul DynamicQuantizeLSTM MatMulInteger16
    MatMulIntegerToFloat QAttention QGemm QEmbedLayerNormalization QMoE QuantizeBFP DequantizeBFP
    QuantizeWithOrder DequantizeWithOrder MatMulBnb4 MatMulFpQ4""".split()
)
# Ops whose ONNX function body only type-checks in float32: it feeds float32
# Constants into arithmetic on its T-typed input, with no CastLike. The onnx
# checker and runtimes without a native kernel expand that body, so a LOW node
# is an invalid model. Found by scanning every schema's body;
# tests/plan/test_runtime_gaps.py re-runs the scan so the list stays complete.
FLOAT32_FUNCTION_BODY = frozenset({"MeanVarianceNormalization"})
# onnxruntime registers float16/bfloat16 kernels for these ops, so a model
# loads, but its CPU provider fails at run time when the reduction attribute
# is set ("MLFloat16 data type is not supported with ScatterND opset 18 when
# reduction is 'max'"). A load check cannot see it, so they stay float32.
REDUCTION_NEEDS_FLOAT32 = runtime_facts.REDUCTION_NEEDS_FLOAT32  # the runtime's fact, kept there
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
        classes.update({op: GRAY for op in CONTRIB_GRAY})
        classes.update({op: BLACK for op in DEFAULT_BLACK})
        classes.update({op: WHITE for op in DEFAULT_WHITE})
        return classes
    if preset == "mindspore":
        classes = {op: BLACK for op in MINDSPORE_BLACK}
        classes.update({op: WHITE for op in MINDSPORE_WHITE})
        return classes
    raise KeyError(preset)


def preset_moved_from_black(preset: str) -> FrozenSet[str]:
    """Ops the preset once listed black and now keeps gray behind the range guards (mixlists written
    for the old list may still remove them)."""
    return DEFAULT_GUARDED if preset == "default" else frozenset()


PRESETS: FrozenSet[str] = frozenset({"default", "mindspore"})
# Presets whose gray ops the range guards (ampconv.plan.evidence) may keep float32 on evidence.
RANGE_GUARDED_PRESETS: FrozenSet[str] = frozenset({"default"})
