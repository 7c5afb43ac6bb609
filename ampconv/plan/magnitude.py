"""How each value of a graph scales with the activations: a magnitude analysis from numbers, not spellings.

Every float value ``v`` of the main graph gets a ``Scale(degree, factor)``:
``|v|`` reaches about ``factor * B ** degree`` when the activations the
model computes reach ``|x| ~ B``. The analysis walks the graph once, in
order, and carries the two numbers through op semantics:

- a graph input, and the output of a layer that mixes its input with
  weights (MatMul, Gemm, Conv with constant weights, a normalization, an
  Exp, an op it does not know), is a new activation: ``Scale(1, 1)``;
- a constant is ``Scale(0, max |c|)`` (read from ``RangeReader``);
- a product adds degrees and multiplies factors (``Mul(x, x)``, ``Pow(x, 2)``
  and ``x * x`` spelled any way are all degree 2); a division subtracts them,
  and by a constant divides the factor by its smallest magnitude; Sqrt
  halves the degree, Reciprocal negates it, ``Pow(x, p)`` multiplies it;
- a sum over ``N`` values multiplies the factor by ``N`` (ReduceSum, ReduceL1,
  ReduceSumSquare, and a MatMul/Gemm/Conv whose constant operand holds one
  magnitude throughout: ones, or ``1/N``, which is how a sum or a mean is
  spelled without a Reduce op), a mean keeps it;
- bounded ops (Sigmoid, Tanh, Softmax, Erf, Sin, Cos) give ``Scale(0, 1)``;
  data movement, Relu, Abs, Neg, pooling keep the scale of their data.

A value then overflows the LOW type once ``B`` exceeds
``threshold(scale, max) = (max / factor) ** (1 / degree)``: a sum of 768
squares passes 65504 at ``|x| > 9.2``, whatever the exporter wrote.
``range-reduction`` (``plan.evidence``) reads it; docs/precision.md sec. 2.
"""

from __future__ import annotations

import math
from typing import Dict, NamedTuple, Optional, Sequence

import numpy as np
import onnx_ir as ir

from ampconv.tensors import tensorsize
from ampconv.tensors.chunks import release_mapped
from ampconv.plan.ranges import RangeReader
from ampconv.plan.values import constant_array, is_constant, is_float

# Constants up to this many values are read whole (a divisor's smallest magnitude, a sum-like weight: a
# ones vector over a hidden size); larger weights are never read here (the planner's memory stays flat).
_READ_LIMIT = 1 << 16


class Scale(NamedTuple):
    """``|v| ~ factor * B ** degree`` for activations of magnitude ``B``."""

    degree: float
    factor: float

    def at(self, activation: float) -> float:
        """The magnitude this scale reaches when activations reach ``activation``."""
        try:
            return self.factor * activation ** self.degree
        except OverflowError:
            return math.inf


_DEFAULT_DOMAINS = ("", "ai.onnx")
_TENSOR_TYPE = ir.TensorType
_FLOAT32 = ir.DataType.FLOAT

ACTIVATION = Scale(1.0, 1.0)
BOUNDED = Scale(0.0, 1.0)

# Ops whose output keeps the scale of their first input (data movement, sign, pooling, max/min).
KEEP_OPS = frozenset(
    {"Identity", "Cast", "CastLike", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Slice",
     "Gather", "GatherElements", "GatherND", "Tile", "Pad", "Relu", "LeakyRelu", "PRelu", "Abs", "Neg",
     "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool", "Resize", "Upsample", "DepthToSpace",
     "SpaceToDepth", "Split", "Dropout", "Clip", "ReduceMax", "ReduceMin", "ReduceMean", "Elu", "Selu", "Celu",
     "HardSwish", "Gelu", "Mish", "ThresholdedRelu", "Round", "Floor", "Ceil", "Sign", "Shrink", "Trilu",
     "Compress", "ScatterND", "ScatterElements"}
)
# Ops that choose among or join their inputs: the larger scale of their float inputs.
LARGEST_OPS = frozenset({"Max", "Min", "Mean", "Concat", "Where", "Sum", "Add", "Sub", "ConcatFromSequence"})
BOUNDED_OPS = frozenset({"Sigmoid", "Tanh", "Softmax", "Erf", "Sin", "Cos", "HardSigmoid", "Softsign", "Hardmax"})
# Weighted layers: a new activation unless their constant operand makes them a plain sum.
_WEIGHTED = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose"})
# Sums over the reduced extent N: (degree multiplier, factor as a function of the input factor and N).
_SUMS = {
    "ReduceSum": (1, lambda c, n: c * n),
    "ReduceL1": (1, lambda c, n: c * n),
    "ReduceSumSquare": (2, lambda c, n: c * c * n),
    "ReduceL2": (1, lambda c, n: c * math.sqrt(n)),
}


class MagnitudeAnalysis:
    """The ``Scale`` of every float value of ``graph``, computed once (see the module docstring).

    ``ranges`` reads constants (their largest magnitude); ``extent(node)``
    answers how many values one output of a reduction sums (None: unknown).
    A product of two activations (attention scores) is a new activation:
    its scaling is the model's design, not an accumulation to guard.
    """

    def __init__(self, graph: ir.Graph, ranges: RangeReader, extent) -> None:
        self._ranges = ranges
        self._extent = extent
        self.scales: Dict[ir.Value, Scale] = {}
        for value in graph.inputs:
            if is_float(value):
                self.scales[value] = ACTIVATION
        for node in graph:
            self._visit(node)

    def scale(self, value: Optional[ir.Value]) -> Optional[Scale]:
        """The scale of ``value`` (constants too); None for a value that is not float32 or was never reached."""
        if value is None:
            return None
        known = self.scales.get(value)
        if known is None and is_constant(value) and is_float(value):
            stats = self._ranges.stats(value)
            known = Scale(0.0, stats.max_abs) if stats is not None else None
            if known is not None:
                self.scales[value] = known
        return known

    def _visit(self, node: ir.Node) -> None:
        # Asked of every node of the main graph: the default-domain and float tests are inlined.
        default = node.domain in _DEFAULT_DOMAINS
        if default and node.op_type == "Constant":
            return  # a constant's scale is its largest magnitude, read when first asked (``scale``)
        result = self._rule(node) if default else ACTIVATION
        scales = self.scales
        for out in node.outputs:
            kind = out.type
            if type(kind) is _TENSOR_TYPE and kind.dtype == _FLOAT32:
                scales[out] = result

    def _rule(self, node: ir.Node) -> Scale:
        """The scale of ``node``'s float outputs from its inputs' scales and its op's semantics."""
        op, inputs = node.op_type, node.inputs
        first = self.scale(inputs[0]) if inputs else None
        if op in BOUNDED_OPS:
            return BOUNDED
        if op in KEEP_OPS:
            return first or ACTIVATION
        if op in LARGEST_OPS:
            return _largest([self.scale(v) for v in inputs]) or ACTIVATION
        if op == "Mul":
            return _product([self.scale(v) for v in inputs[:2]]) or ACTIVATION
        if op == "Div":
            return self._quotient(inputs) or ACTIVATION
        if op in ("Sqrt", "Reciprocal", "Pow"):
            return self._power(node, first) or ACTIVATION
        if op in _SUMS:
            return self._sum(node, first) or ACTIVATION
        if op in _WEIGHTED:
            return self._weighted(node) or ACTIVATION
        return ACTIVATION  # an op this analysis does not model makes a new activation

    def _quotient(self, inputs: Sequence[Optional[ir.Value]]) -> Optional[Scale]:
        if len(inputs) < 2:
            return None
        a, b = self.scale(inputs[0]), self.scale(inputs[1])
        if a is None or b is None:
            return None
        if b.degree == 0:  # a constant divisor: its smallest magnitude bounds the quotient
            smallest = _smallest_magnitude(inputs[1])
            return Scale(a.degree, a.factor / smallest) if smallest else None
        return Scale(a.degree - b.degree, a.factor / b.factor) if b.factor else None

    def _power(self, node: ir.Node, base: Optional[Scale]) -> Optional[Scale]:
        if base is None:
            return None
        if node.op_type == "Sqrt":
            exponent = 0.5
        elif node.op_type == "Reciprocal":
            exponent = -1.0
        else:
            exponent = _scalar(node.inputs[1]) if len(node.inputs) > 1 else None
            if exponent is None:
                return None
        if base.factor == 0:
            return Scale(base.degree * exponent, 0.0)
        try:
            return Scale(base.degree * exponent, base.factor ** exponent)
        except (OverflowError, ZeroDivisionError):
            return None

    def _sum(self, node: ir.Node, data: Optional[Scale]) -> Optional[Scale]:
        extent = self._extent(node)
        if data is None or extent is None:
            return None
        multiplier, factor = _SUMS[node.op_type]
        return Scale(data.degree * multiplier, factor(data.factor, extent))

    def _weighted(self, node: ir.Node) -> Optional[Scale]:
        """A product with a constant operand of one magnitude is a sum; with other weights, a new activation."""
        inputs = node.inputs
        if len(inputs) < 2:
            return None
        scales = [self.scale(inputs[i]) for i in (0, 1)]
        constant = [i for i, s in enumerate(scales) if s is not None and s.degree == 0 and is_constant(inputs[i])]
        if len(constant) != 1 or scales[1 - constant[0]] is None:
            return None
        weight = constant[0]
        data = scales[1 - weight]
        terms = uniform_terms(inputs[weight], node, weight)
        if terms is None or data.degree <= 0:
            return None  # weights of many magnitudes: the output is a new activation
        return Scale(data.degree, data.factor * terms)


def _largest(scales: Sequence[Optional[Scale]]) -> Optional[Scale]:
    """The scale that dominates at large activations (highest degree, then factor); None if none is known."""
    known = [s for s in scales if s is not None]
    if not known:
        return None
    top = max(s.degree for s in known)
    if top <= 0:  # constants and bounded values: the largest of them
        return Scale(0.0, max(s.factor for s in known)) if top == 0 else max(known)
    return Scale(top, sum(s.factor for s in known if s.degree == top))


def _product(scales: Sequence[Optional[Scale]]) -> Optional[Scale]:
    if len(scales) < 2 or any(s is None for s in scales):
        return None
    a, b = scales
    return Scale(a.degree + b.degree, a.factor * b.factor)


def _scalar(value: Optional[ir.Value]) -> Optional[float]:
    """The value of a constant holding one number (or one number repeated); None otherwise."""
    array = _small_array(value)
    if array is None or array.size == 0:
        return None
    flat = array.reshape(-1).astype(np.float64)
    return float(flat[0]) if np.all(flat == flat[0]) else None


def _smallest_magnitude(value: Optional[ir.Value]) -> Optional[float]:
    array = _small_array(value)
    if array is None or array.size == 0:
        return None
    smallest = float(np.min(np.abs(array.astype(np.float64))))
    return smallest if smallest > 0 and math.isfinite(smallest) else None


def _small_array(value: Optional[ir.Value]) -> Optional[np.ndarray]:
    if value is None or not is_constant(value):
        return None
    tensor = value.const_value
    if tensor is not None and tensorsize.size(tensor) > _READ_LIMIT:
        return None
    array = constant_array(value)
    if tensor is not None:
        release_mapped(tensor)
    return None if array is None or array.dtype.kind not in "fiu" else array


def uniform_terms(value: ir.Value, node: ir.Node, slot: int) -> Optional[float]:
    """``K * |w|`` when constant ``value`` holds one magnitude ``|w|`` throughout (a sum or a mean spelled as a
    product over ``K`` terms); None for weights of many magnitudes."""
    tensor = value.const_value
    if tensor is not None and sum(1 for d in tensorsize.dims(tensor) if d != 1) > 1:
        return None  # a matrix of weights: a sum or a mean is spelled with a vector (no read for the common case)
    array = _small_array(value)
    if array is None or array.ndim < 1 or array.size == 0:
        return None
    magnitudes = np.abs(array.astype(np.float64))
    top = float(magnitudes.max())
    if top == 0 or float(magnitudes.min()) < 0.5 * top:
        return None
    return _contracted(array.shape, node, slot) * top


def _contracted(shape: Sequence[int], node: ir.Node, slot: int) -> int:
    """How many terms of a weight of ``shape`` one output of ``node`` sums."""
    if node.op_type in ("Conv", "ConvTranspose"):
        return int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
    if node.op_type == "Gemm":
        attribute = node.attributes.get("transB" if slot == 1 else "transA")
        transposed = attribute is not None and attribute.value
        axis = (1 if transposed else 0) if slot == 1 else (0 if transposed else 1)
        return int(shape[axis]) if len(shape) == 2 else int(shape[0])
    if len(shape) == 1:
        return int(shape[0])
    return int(shape[-2] if slot == 1 else shape[-1])


def threshold(scale: Scale, maximum: float) -> float:
    """The activation magnitude past which a value of ``scale`` exceeds ``maximum`` (inf: never)."""
    if scale.degree <= 0 or scale.factor <= 0:
        return math.inf if scale.factor <= maximum else 0.0
    return (maximum / scale.factor) ** (1.0 / scale.degree)


def describe(scale: Scale) -> str:
    """How a reason writes a scale: ``~ 768 * |x|^2``."""
    degree = f"{scale.degree:g}"
    power = "|x|" if degree == "1" else f"|x|^{degree}"
    return power if scale.factor == 1 else f"{scale.factor:.4g} * {power}"
