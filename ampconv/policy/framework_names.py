"""Op names from Ascend CANN, TensorFlow and MindSpore, read as ONNX op types (docs/precision.md sec. 7).

People copy policy entries from Ascend ``modify_mixlist`` files, operator-info
files (``aic-<soc>-ops-info.json``) and MindSpore amp lists, which name the
framework's ops, not ONNX's. This table says which ONNX op types compute the
same thing. A name the installed onnx knows is never looked up here: it is
read as that ONNX op (so TensorFlow's ``Sum``, a reduction, is ONNX's
elementwise ``Sum``; docs/precision.md says so).

A name may map to several ONNX ops (MindSpore's ``Dense`` is exported as
``Gemm`` or as ``MatMul`` + ``Add``), or to none: training-only ops,
gradients and Ascend's layout ops have no ONNX counterpart and match no node.
Composite ops that exporters decompose into generic ops (``Square``,
``FloorDiv``) are left out on purpose: mapping them would recolour every
``Mul`` or ``Div`` of a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

ASCEND, TENSORFLOW, MINDSPORE = "Ascend", "TensorFlow", "MindSpore"
_SOURCE_CODES = {"A": ASCEND, "T": TENSORFLOW, "M": MINDSPORE}


@dataclass(frozen=True)
class FrameworkName:
    """One framework op name: where it comes from and the ONNX op types it is read as."""

    name: str
    sources: Tuple[str, ...]
    onnx: Tuple[str, ...]  # empty: no ONNX counterpart

    def describe(self) -> str:
        """``'MatMulV2' (Ascend) read as ONNX 'MatMul'``, or that it has no ONNX counterpart."""
        where = f"{self.name!r} ({', '.join(self.sources)})"
        if not self.onnx:
            return f"{where} has no ONNX counterpart and matches no node"
        return f"{where} read as ONNX {' and '.join(repr(op) for op in self.onnx)}"


# (name, sources: A Ascend CANN, T TensorFlow, M MindSpore ops/nn, ONNX op types).
# Ascend's op names are mostly TensorFlow's; "D" variants take as attributes
# what TensorFlow takes as constant inputs.
_ROWS = (
    # Convolutions. Ascend runs a transposed convolution as the input gradient.
    ("Conv2D", "ATM", "Conv"),
    ("Conv3D", "ATM", "Conv"),
    ("Conv1d", "M", "Conv"),
    ("Conv2d", "M", "Conv"),
    ("Conv3d", "M", "Conv"),
    ("DepthwiseConv2D", "A", "Conv"),
    ("DepthwiseConv2dNative", "T", "Conv"),
    ("Conv2DBackpropInput", "AT", "ConvTranspose"),
    ("Conv3DBackpropInput", "AT", "ConvTranspose"),
    ("Conv2DTranspose", "AM", "ConvTranspose"),
    ("Conv3DTranspose", "AM", "ConvTranspose"),
    ("Conv1dTranspose", "M", "ConvTranspose"),
    ("Conv2dTranspose", "M", "ConvTranspose"),
    ("Conv3dTranspose", "M", "ConvTranspose"),
    ("Deconvolution", "A", "ConvTranspose"),
    ("Conv2DBackpropFilter", "AT", ""),
    ("Conv3DBackpropFilter", "AT", ""),
    # Matrix products. A fully connected layer is exported as Gemm (2-D input)
    # or MatMul + Add (more dimensions).
    ("MatMulV2", "A", "MatMul"),
    ("MatMulV3", "A", "MatMul"),
    ("BatchMatMul", "ATM", "MatMul"),
    ("BatchMatMulV2", "AT", "MatMul"),
    ("BatchMatMulV3", "AT", "MatMul"),
    ("GEMM", "A", "Gemm"),
    ("FullyConnection", "A", "Gemm MatMul"),
    ("Dense", "M", "Gemm MatMul"),
    # Elementwise arithmetic.
    ("BiasAdd", "ATM", "Add"),
    ("AddV2", "T", "Add"),
    ("AddN", "ATM", "Sum"),
    ("RealDiv", "ATM", "Div"),
    ("Maximum", "ATM", "Max"),
    ("Minimum", "ATM", "Min"),
    # 1/sqrt(x): exporters write Reciprocal(Sqrt(x)) or Div(1, Sqrt(x)).
    ("Rsqrt", "ATM", "Sqrt Reciprocal"),
    ("ClipByValue", "AT", "Clip"),
    ("LogicalAnd", "ATM", "And"),
    ("LogicalOr", "ATM", "Or"),
    ("LogicalNot", "ATM", "Not"),
    # Activations. ReLU6 is exported as Clip(0, 6); GELU and its fast
    # approximations as Gelu (opset 20; older exports decompose it into Erf,
    # Mul and Add, which no name can single out).
    ("ReLU", "M", "Relu"),
    ("Relu6", "AT", "Clip"),
    ("ReLU6", "M", "Clip"),
    ("LeakyReLU", "M", "LeakyRelu"),
    ("PReLU", "M", "PRelu"),
    ("ELU", "M", "Elu"),
    ("GeLU", "M", "Gelu"),
    ("GELU", "M", "Gelu"),
    ("FastGelu", "AM", "Gelu"),
    ("FastGeLU", "M", "Gelu"),
    ("FastGeluV2", "A", "Gelu"),
    ("SiLU", "M", "Swish"),
    ("HSwish", "M", "HardSwish"),
    ("HSigmoid", "M", "HardSigmoid"),
    ("SoftmaxV2", "A", "Softmax"),
    ("LogSoftmaxV2", "A", "LogSoftmax"),
    # Normalizations. BNTrainingReduce/BNTrainingUpdate are the two halves of
    # Ascend's BatchNorm; in an inference graph that is BatchNormalization.
    ("LayerNorm", "AM", "LayerNormalization"),
    ("LayerNormV3", "A", "LayerNormalization"),
    ("LayerNormV4", "A", "LayerNormalization"),
    ("RmsNorm", "A", "RMSNormalization"),
    ("BatchNorm", "AM", "BatchNormalization"),
    ("BatchNorm1d", "M", "BatchNormalization"),
    ("BatchNorm2d", "M", "BatchNormalization"),
    ("BatchNorm3d", "M", "BatchNormalization"),
    ("BNInfer", "A", "BatchNormalization"),
    ("BNInference", "A", "BatchNormalization"),
    ("BNInferenceD", "A", "BatchNormalization"),
    ("BNTrainingReduce", "A", "BatchNormalization"),
    ("BNTrainingUpdate", "A", "BatchNormalization"),
    ("FusedBatchNorm", "T", "BatchNormalization"),
    ("FusedBatchNormV3", "T", "BatchNormalization"),
    ("GroupNorm", "AM", "GroupNormalization"),
    ("InstanceNorm", "A", "InstanceNormalization"),
    ("InstanceNorm1d", "M", "InstanceNormalization"),
    ("InstanceNorm2d", "M", "InstanceNormalization"),
    ("InstanceNorm3d", "M", "InstanceNormalization"),
    ("L2Normalize", "A", "LpNormalization"),
    # Reductions with constant axes.
    ("ReduceMeanD", "A", "ReduceMean"),
    ("ReduceSumD", "A", "ReduceSum"),
    ("ReduceMaxD", "A", "ReduceMax"),
    ("ReduceMinD", "A", "ReduceMin"),
    ("ReduceProdD", "A", "ReduceProd"),
    ("ArgMaxD", "A", "ArgMax"),
    ("ArgMaxV2", "AT", "ArgMax"),
    ("TopKV2", "AT", "TopK"),
    ("TopKD", "A", "TopK"),
    # Pooling. Ascend's (Caffe's) Pooling is average or max, local or global.
    ("Pooling", "A", "AveragePool MaxPool GlobalAveragePool GlobalMaxPool"),
    ("AvgPool", "ATM", "AveragePool"),
    ("AvgPoolV2", "A", "AveragePool"),
    ("AvgPool3D", "ATM", "AveragePool"),
    ("AvgPool1d", "M", "AveragePool"),
    ("AvgPool2d", "M", "AveragePool"),
    ("AvgPool3d", "M", "AveragePool"),
    ("MaxPoolV2", "AT", "MaxPool"),
    ("MaxPoolV3", "A", "MaxPool"),
    ("MaxPool3D", "ATM", "MaxPool"),
    ("MaxPoolWithArgmax", "AT", "MaxPool"),
    ("MaxPool1d", "M", "MaxPool"),
    ("MaxPool2d", "M", "MaxPool"),
    ("MaxPool3d", "M", "MaxPool"),
    # Adaptive pooling to size 1 is exported as the global op, else as the local one.
    ("AdaptiveAvgPool1d", "M", "GlobalAveragePool AveragePool"),
    ("AdaptiveAvgPool2d", "M", "GlobalAveragePool AveragePool"),
    ("AdaptiveAvgPool2D", "M", "GlobalAveragePool AveragePool"),
    ("AdaptiveAvgPool3d", "M", "GlobalAveragePool AveragePool"),
    ("AdaptiveMaxPool1d", "M", "GlobalMaxPool MaxPool"),
    ("AdaptiveMaxPool2d", "M", "GlobalMaxPool MaxPool"),
    ("AdaptiveMaxPool3d", "M", "GlobalMaxPool MaxPool"),
    # Recurrent layers.
    ("DynamicRNN", "A", "LSTM"),
    ("BasicLSTMCell", "A", "LSTM"),
    ("DynamicGRUV2", "A", "GRU"),
    # Data movement.
    ("TransposeD", "A", "Transpose"),
    ("ConcatV2", "AT", "Concat"),
    ("ConcatD", "A", "Concat"),
    ("ConcatV2D", "A", "Concat"),
    ("GatherV2", "AT", "Gather"),
    ("GatherV2D", "A", "Gather"),
    ("Embedding", "M", "Gather"),
    ("StridedSlice", "ATM", "Slice"),
    ("StridedSliceD", "A", "Slice"),
    ("ExpandDims", "ATM", "Unsqueeze"),
    ("SplitD", "A", "Split"),
    ("SplitV", "AT", "Split"),
    ("SplitVD", "A", "Split"),
    ("TileD", "A", "Tile"),
    ("PadD", "A", "Pad"),
    ("PadV3", "A", "Pad"),
    ("Select", "AT", "Where"),
    ("SelectV2", "AT", "Where"),
    ("OneHotD", "A", "OneHot"),
    ("ResizeBilinearV2", "AT", "Resize"),
    ("ResizeNearestNeighborV2", "AT", "Resize"),
    # No ONNX counterpart: Ascend's layout conversions, loss-scale status ops,
    # dropout masks, gradients.
    ("TransData", "A", ""),
    ("TransDataRNN", "A", ""),
    ("NPUAllocFloatStatus", "A", ""),
    ("NPUGetFloatStatus", "A", ""),
    ("NPUClearFloatStatus", "A", ""),
    ("DropOutGenMask", "A", ""),
    ("DropOutDoMask", "A", ""),
    ("BNTrainingReduceGrad", "A", ""),
    ("BNTrainingUpdateGrad", "A", ""),
    ("LayerNormGrad", "AM", ""),
    ("LayerNormBetaGammaBackprop", "A", ""),
    ("LayerNormXBackprop", "A", ""),
    ("SoftmaxGrad", "AT", ""),
    ("GeluGrad", "AM", ""),
    ("FastGeluGrad", "AM", ""),
    ("ReluGrad", "ATM", ""),
    ("SigmoidGrad", "ATM", ""),
    ("TanhGrad", "ATM", ""),
)

FRAMEWORK_NAMES: Dict[str, FrameworkName] = {
    name: FrameworkName(name, tuple(_SOURCE_CODES[c] for c in codes), tuple(onnx.split()))
    for name, codes, onnx in _ROWS
}


def lookup(name: str) -> Optional[FrameworkName]:
    """The table's record for ``name`` (exact spelling), or None."""
    return FRAMEWORK_NAMES.get(name)


def markdown_table() -> str:
    """The table as Markdown, as docs/precision.md sec. 7 shows it (a test keeps the two equal)."""
    lines = ["| name | from | ONNX op types |", "|---|---|---|"]
    for record in FRAMEWORK_NAMES.values():
        onnx = ", ".join(record.onnx) if record.onnx else "none (matches no node)"
        lines.append(f"| `{record.name}` | {', '.join(record.sources)} | {onnx} |")
    return "\n".join(lines)


__all__ = ["ASCEND", "FRAMEWORK_NAMES", "FrameworkName", "MINDSPORE", "TENSORFLOW", "lookup", "markdown_table"]
