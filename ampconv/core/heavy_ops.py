"""The compute-heavy ops: where a GPU gains from a LOW type, so the ops a deployment converter must run LOW.

One definition for the converter's own figures (``conversion_figures``), the
opset upgrade's choice (``opset_upgrade``), the coverage warning
(``plan.coverage``) and the benchmarks' instrument (``bench/figures.py``).
"""

from __future__ import annotations

from typing import Mapping, Optional

# Compute-heavy ops: where a GPU gains from a LOW type (tensor cores, halved
# weight and activation traffic), and so the ops that a deployment converter
# must run LOW. Keyed by domain ("" is the default domain; "ai.onnx" is read as "").
# - Default domain: matrix products, convolutions, attention (opset 23) and
#   the recurrent cells.
# - com.microsoft: onnxruntime's fused kernels, which the transformer
#   optimizer writes in place of the default-domain patterns (attention
#   blocks, MatMul+Add, Conv+activation), and its fused normalizations.
# - Normalizations (both domains): onnxruntime registers LayerNormalization and
#   SimplifiedLayerNormalization in the default domain, and an opset-17 export
#   has LayerNormalization where the optimized model has SkipLayerNormalization;
#   counting both keeps a model and its optimized form comparable.
# GELU variants (Gelu, FastGelu, BiasGelu, QuickGelu) are elementwise: not heavy.
HEAVY_OPS: Mapping[str, frozenset[str]] = {
    "": frozenset({
        "MatMul", "Gemm", "Conv", "ConvTranspose", "DeformConv", "Einsum", "Attention", "LSTM", "GRU", "RNN",
        "LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization", "GroupNormalization",
    }),
    "com.microsoft": frozenset({
        # attention
        "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention", "PackedMultiHeadAttention",
        "DecoderAttention", "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention",
        "LongformerAttention", "SparseAttention",
        # fused matrix products and convolutions
        "FusedMatMul", "TransposeMatMul", "FusedGemm", "FusedConv", "GemmFastGelu", "MatMulNBits",
        # normalizations
        "LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization", "GroupNorm", "SkipGroupNorm",
        "RMSNormalization",
    }),
}


def is_heavy_op(op_type: str, domain: str) -> bool:
    """Whether ``domain::op_type`` is one of ``HEAVY_OPS`` (``domain`` "" or "ai.onnx" for the default one)."""
    return op_type in HEAVY_OPS.get("" if domain == "ai.onnx" else domain, ())


def is_outer_product(op_type: str, domain: str, reduction_length: Optional[int]) -> bool:
    """Whether a node of a heavy op type does no heavy work: a MatMul over a reduction of length 1.

    ``A[..., m, 1] @ B[..., 1, n]`` sums nothing: it is an elementwise product
    broadcast to a table (a rotary embedding's position x frequency), with no
    accumulation for tensor cores to do. ``reduction_length``: A's last
    dimension when known.
    """
    return op_type == "MatMul" and domain in ("", "ai.onnx") and reduction_length == 1


__all__ = ["HEAVY_OPS", "is_heavy_op", "is_outer_product"]
