"""The error no LOW conversion can avoid: the float32 model run on its data rounded to the LOW type.

Any conversion to fp16 or bf16 stores the model's weights, the data it
reads and the results it hands on in the LOW type. ``floor_model`` derives
from the float32 reference the model that does only that: every float32
weight (initializers and Constant tensors, in every graph) holds its value
rounded to the LOW type, every float32 graph input is rounded on entry and
every float32 graph output on exit (``Cast(to=LOW) -> Cast(to=FLOAT)``), the
result of every matrix product and convolution is rounded too, and so is that
of every cheap elementwise or movement op between them (``ROUNDED_OPS``: the
work a conversion exists to move to the LOW type, and the adds, activations,
resizes and pools a GPU conversion lowers with it rather than pay a cast
pair for each), and every op computes in float32. Its outputs differ from the reference's by
the *floor*: the error of the model's own sensitivity to the LOW type, which
no converter removes (a converter that keeps more float32 avoids part of it
only by converting less). A converted model whose error is within a few times
the floor is as good as the type allows, whatever its figures read: a deep
detector's cosine of 0.9994 or a classifier's p99 of 0.034 that three
converters share is the model's, not the conversion's (issue 30).

What is not rounded, because a converter keeps it float32 (``plan/guards.py``):
a weight that rounding would overflow to inf, a weight whose non-zero
values would all flush to zero (an epsilon), and a float32 value that
counts sizes (``sizes_counted``: a shape cast to float and packed again). Integer and bool tensors stay
as they are; so do inputs of other types.

Rounding is lazy for initializers (a big weight is rounded while the copy is
written, as ``emulate`` widens them) and done with numpy's own casts (fp16)
or ml_dtypes' (bf16): both round to nearest even. Tensors computed while the
model runs are rounded by ``Cast(to=LOW) -> Cast(to=FLOAT)``; Cast takes
bfloat16 only from opset 13, so a model of an older opset rounds to bf16's 8
significant bits by Veltkamp's splitting instead (``c = x * (2^16 + 1)``,
``x - c + c``... see ``_split_round``), in float32 arithmetic that every
opset has: the model's own opset is never changed (its ops' meanings would).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import all_graphs
from ampconv.core.lowtypes import LowType
from ampconv.validation.criteria import FLOOR_WORDS
from ampconv.numerics.emulate import NameMaker, round_trip

FLOAT = ir.DataType.FLOAT

# The ops whose results the floor rounds (by domain): matrix products, convolutions, attention and
# recurrent cells, and the cheap elementwise and movement ops between them. Measured (docs/validation.md,
# "The floor"): with products alone, correct conversions of deep CNNs read up to 5.7x the floor (PP-OCRv4's
# detector in bf16: its HardSwish, residual adds and resizes are rounded too); with these, at most 4.1x,
# while broken ones stay at 14x and more. An Add or Sub of a constant is not rounded (``_rounded_op``).
# Left out, because keeping them float32 is a converter's choice and their rounding is what it is judged
# on: normalizations (MindSpore keeps BatchNorm, others LayerNorm), reductions, Softmax, Div, Pow, Sqrt,
# Exp, Log, Erf and the rest.
ROUNDED_OPS = {
    "": frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "DeformConv", "Einsum", "Attention",
                   "LSTM", "GRU", "RNN",
                   "Add", "Sub", "Mul", "Relu", "LeakyRelu", "PRelu", "Clip", "HardSigmoid", "HardSwish", "Sigmoid",
                   "Tanh", "Resize", "Upsample", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                   "Concat"}),
    "com.microsoft": frozenset({
        "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention", "PackedMultiHeadAttention",
        "DecoderAttention", "DecoderMaskedMultiHeadAttention", "DecoderMaskedSelfAttention",
        "LongformerAttention", "SparseAttention", "FusedMatMul", "TransposeMatMul", "FusedGemm", "FusedConv",
        "GemmFastGelu",
    }),
}


@dataclasses.dataclass
class FloorStats:
    """What ``floor_model`` rounded (for notes and tests)."""

    inputs: int = 0
    weights: int = 0
    constants: int = 0
    outputs: int = 0
    products: int = 0  # results of ``ROUNDED_OPS`` rounded


def floor_model(model: ir.Model, low: LowType) -> FloorStats:
    """Rewrite ``model`` (a float32 copy) in place into its floor model (the module docstring); returns the stats."""
    stats = FloorStats()
    names = _Rounder(low, model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1)))
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is not None and tensor.dtype == FLOAT:
                value.const_value = _rounded_lazily(tensor, low)
                stats.weights += 1
        counted = sizes_counted(graph)
        for node in list(graph):
            stats.constants += _round_attributes(node, low)
            if _rounded_op(node) and not all(v in counted for v in node.outputs if v.dtype == FLOAT):
                stats.products += _round_results(node, low, names)
    graph = model.graph
    for value in list(graph.inputs):
        if value.dtype != FLOAT or value.is_initializer():
            continue
        nodes, rounded = names.round(value)
        for use in list(value.uses()):
            if use[0] not in nodes:
                use[0].replace_input_with(use[1], rounded)
        rounded.name = names(value.name, "rounded")
        if len(graph):
            graph.insert_before(graph.node(0), nodes)
        else:
            graph.extend(nodes)
        stats.inputs += 1
    _round_outputs(graph, low, names, stats)
    return stats


def _rounded_op(node: ir.Node) -> bool:
    """Whether the floor rounds ``node``'s results: one of ``ROUNDED_OPS``, but an Add or Sub of a constant.

    An Add of two computed tensors (a residual join) is lowered by every GPU
    conversion. Adding a constant can lift values where rounding loses their
    digits before a later subtraction takes the constant back (catastrophic
    cancellation): a converter keeps such a node float32 (``--tune`` finds it),
    so its rounding is the conversion's, not the floor's.
    """
    if node.op_type not in ROUNDED_OPS.get("" if is_default(node) else node.domain, ()):
        return False
    if node.op_type in ("Add", "Sub"):
        return not any(_is_constant(v) for v in node.inputs)
    return True


# Ops whose integer results are sizes when every non-constant input is one.
_SIZE_SOURCES = frozenset({"Shape", "Size"})


def sizes_counted(graph: ir.Graph) -> set:
    """The float32 values of ``graph`` that count sizes: a shape cast to float, scaled, packed with constants.

    A size is an integer that ``Shape`` or ``Size`` gives, or that is
    computed from such sizes and constants alone; a float32 value counts sizes
    when it is a Cast of a size, or computed from such values and constants
    alone (an exporter that computes ``n / 2`` or packs a new shape in float
    writes them). A converter keeps them float32 (their nodes sit between
    integers), and the floor does not round them: bfloat16 holds integers
    exactly only up to 256, and a shape of 577 tokens rounded to 576 is a
    Reshape that fails, not an error of the model's. Integers that come from
    the graph's inputs (token ids, an image's bytes) are data: what they
    become in float32 is rounded as ever.
    """
    sizes: set = set()
    counted: set = set()
    for node in graph:
        inputs = [v for v in node.inputs if v is not None]
        computed = [v for v in inputs if not _is_constant(v)]
        if node.op_type in _SIZE_SOURCES and is_default(node):
            sizes.update(node.outputs)
        elif node.op_type == "Cast" and computed and computed[0] in sizes:
            (counted if node.outputs[0].dtype == FLOAT else sizes).update(node.outputs)
        elif computed and all(v in sizes or v in counted for v in computed):
            for value in node.outputs:
                (counted if value.dtype == FLOAT else sizes).add(value)
    return counted


def _is_constant(value: ir.Value | None) -> bool:
    if value is None:
        return True
    producer = value.producer()
    return value.const_value is not None or value.is_initializer() or (
        producer is not None and producer.op_type == "Constant")


def _round_results(node: ir.Node, low: LowType, names: NameMaker) -> int:
    """Round the float32 results of ``node`` for every reader; the rounded values take their names. How many."""
    count = 0
    for value in node.outputs:
        if value.dtype != FLOAT or not value.name:
            continue
        nodes, rounded_value = names.round(value)
        for use in list(value.uses()):
            if use[0] not in nodes:
                use[0].replace_input_with(use[1], rounded_value)
        graph = node.graph
        for index, output in enumerate(graph.outputs):
            if output is value:
                graph.outputs[index] = rounded_value
        original = value.name
        value.name = names(original, "f32")
        rounded_value.name = original
        graph.insert_after(node, nodes)
        count += 1
    return count


def _round_outputs(graph: ir.Graph, low: LowType, names: NameMaker, stats: FloorStats) -> None:
    """Round every float32 output a node computes on its way out; the rounded value takes the output's name.

    A converted model whose last op computes in LOW hands its result on rounded; one that keeps it
    float32 avoids this share only by converting less.
    """
    for index, value in enumerate(list(graph.outputs)):
        if value.dtype != FLOAT or value.producer() is None:
            continue  # an input or a weight passed straight through: rounded already, if at all
        nodes, rounded_value = names.round(value)
        original = value.name
        value.name = names(original, "f32")
        rounded_value.name = original
        graph.extend(nodes)
        graph.outputs[index] = rounded_value
        stats.outputs += 1


class _Rounder(NameMaker):
    """Fresh names, and the nodes that round a float32 value to the LOW type at the model's opset."""

    def __init__(self, low: LowType, opset: int) -> None:
        super().__init__("__ampconv_floor")
        self.low = low
        self.split = low.key == "bf16" and opset < 13  # Cast takes bfloat16 from opset 13
        # fp16's range ends at 65504: a value beyond it stays float32 (Where from opset 9), as a converter
        # keeps what overflows (the overflow guard); bf16 shares float32's range.
        self.guard = low.key == "fp16" and opset >= 9

    def round(self, value: ir.Value) -> tuple[list, ir.Value]:
        """(nodes, rounded value) reading ``value``: a Cast round trip, or Veltkamp's splitting for bf16;
        for fp16, values beyond its range pass unrounded (the floor never overflows)."""
        if self.split:
            return _split_round(value, self)
        nodes, rounded_value = round_trip(value, self.low.dtype, self)
        rounded_value.name = self(value.name, "up")  # every value named: bodies share one namespace (SSA)
        if not self.guard:
            return nodes, rounded_value
        limit = ir.node("Constant", [], {"value": ir.tensor(np.array(self.low.max, np.float32))},
                        name=self(value.name, "limit"))
        magnitude = ir.node("Abs", [value], name=self(value.name, "abs"))
        beyond = ir.node("Greater", [magnitude.outputs[0], limit.outputs[0]], name=self(value.name, "beyond"))
        kept = ir.node("Where", [beyond.outputs[0], value, rounded_value], name=self(value.name, "keep"))
        for node in (limit, magnitude, beyond, kept):
            node.outputs[0].name = self(value.name, "guard")
        for node in (limit, magnitude, kept):
            node.outputs[0].dtype = FLOAT
        beyond.outputs[0].dtype = ir.DataType.BOOL
        kept.outputs[0].shape = value.shape
        return nodes + [limit, magnitude, beyond, kept], kept.outputs[0]


# Veltkamp's splitting keeps 24 - 16 = 8 significant bits of a float32: bfloat16's precision.
_SPLIT_FACTOR = float(2**16 + 1)


def _split_round(value: ir.Value, names: NameMaker) -> tuple[list, ir.Value]:
    """``x`` rounded to 8 significant bits in float32 arithmetic: ``c = x * 65537; hi = c - (c - x)``.

    Round to nearest (ties may go either way, where bfloat16's Cast goes to
    even); exact for every float32 whose product with 65537 stays finite.
    """
    factor = ir.node("Constant", [], {"value": ir.tensor(np.array(_SPLIT_FACTOR, np.float32))},
                     name=names(value.name, "split_factor"))
    scaled = ir.node("Mul", [value, factor.outputs[0]], name=names(value.name, "split_mul"))
    gap = ir.node("Sub", [scaled.outputs[0], value], name=names(value.name, "split_gap"))
    high = ir.node("Sub", [scaled.outputs[0], gap.outputs[0]], name=names(value.name, "split_high"))
    nodes = [factor, scaled, gap, high]
    for node in nodes:
        node.outputs[0].name = names(value.name, "split")
        node.outputs[0].dtype = FLOAT
    high.outputs[0].shape = value.shape
    return nodes, high.outputs[0]


def rounded(array: np.ndarray, low: LowType) -> np.ndarray:
    """``array`` (float32) rounded to ``low`` and back, or unchanged where a converter would keep it float32.

    Kept: an array rounding would overflow (a finite value becomes inf: a
    mask fill of -1e9, float32's lowest) or whose non-zero values would all
    flush to zero (an epsilon).
    """
    array = np.asarray(array, dtype=np.float32)
    with np.errstate(over="ignore"):
        low_values = array.astype(low.numpy).astype(np.float32)
    if np.any(np.isinf(low_values) & np.isfinite(array)):
        return array
    nonzero = array != 0
    if np.any(nonzero) and not np.any(low_values[nonzero] != 0):
        return array
    return low_values


def _rounded_lazily(tensor, low: LowType) -> ir.LazyTensor:
    def make():
        return ir.tensor(rounded(np.asarray(tensor.numpy()), low), name=tensor.name)

    return ir.LazyTensor(make, dtype=FLOAT, shape=tensor.shape, name=tensor.name)


def _round_attributes(node: ir.Node, low: LowType) -> int:
    """Round the float32 tensor attributes of ``node`` (Constant.value, ConstantOfShape.value); how many."""
    count = 0
    for name, attr in list(node.attributes.items()):
        if attr.type != ir.AttributeType.TENSOR:
            continue
        tensor = attr.as_tensor()
        if tensor.dtype != FLOAT:
            continue
        node.attributes[name] = ir.AttrTensor(name, ir.tensor(rounded(tensor.numpy(), low), name=tensor.name))
        count += 1
    return count


__all__ = ["FLOOR_WORDS", "ROUNDED_OPS", "FloorStats", "floor_model", "rounded", "sizes_counted"]
