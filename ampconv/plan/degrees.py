"""How fast each value grows with each float graph input: its degree, carried through op semantics.

``plan.provenance`` says which values a float input's scale reaches; this
says how: scale an input ``u`` by ``s`` and a value ``v`` of degree ``d`` in
``u`` grows by about ``s ** d``. A float32 run that saw ``u`` at ``|u| = a``
and ``v`` at ``|v| = m`` then knows where ``v`` passes the LOW type's
maximum: at ``|u| = a * (max / m) ** (1 / d)`` (``plan.envelope``).

The degree of a graph input in itself is 1, of everything it does not reach 0
(constants, integer inputs, a KV-cache past: the model's own numbers). Then,
node by node in graph order:

- a linear layer keeps the degree of what it multiplies (MatMul, Gemm, Conv,
  Einsum, BatchNormalization: the weights are degree 0), a product adds
  degrees, a quotient subtracts them, ``Sqrt`` halves, ``Pow(x, p)``
  multiplies by ``p``; a sum or a selection takes the largest (``Add``,
  ``Concat``, ``Where``, the reductions); data movement keeps it;
- a normalization (LayerNormalization and its decomposed spelling alike:
  ``(x - mean) / sqrt(var)`` is degree 1 - 2/2 = 0) and every op bounded by its
  semantics (Softmax, Sigmoid, Tanh, Erf, ...) is degree 0: the value no
  longer grows with the input;
- ``Exp`` of a growing value grows exponentially (degree ``inf``): its
  ``exponent`` (the Exp's input and that input's degree) says how, and a
  ``Log`` of it is the exponent's degree again; a quotient of two such values
  (a softmax written out) is bounded;
- an op this table does not know (a contrib op, a control-flow node) takes
  the largest degree of what it reads: it is assumed to pass the scale on.

Only degrees above 0 are kept: a value of degree 0 or less does not overflow
as an input grows.

Where a value comes from the input through structure alone (data movement,
sums over a static extent, products with constants, a sum spelled as a
product with ones or ``1/N``, roots and powers), its ``gain`` bounds it for
every input of a magnitude, not only for inputs like the run's sample:
``|v| <= gain * |u| ** d``. A sum of 2,304 pixels has gain 2,304 whatever the
run's zero-mean sample summed to (random signs cancel; pixels from 0 to 255
do not). A layer with learned weights ends the chain (its worst case is no
guide to its outputs): past it, only the run's figures speak.

Besides growing, a value can vanish: a softmax (or ``exp`` of a value that
turns negative) of a growing input has entries that shrink like
``exp(-|spread|)``; ``vanishing`` records such values and their exponent, for
the envelope's question whether an amplifier (``Log``) reads them flushed to 0.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Iterable, NamedTuple, Optional, Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import subgraphs_of
from ampconv.plan.bounds import semantic_bound
from ampconv.plan.magnitude import BOUNDED_OPS, KEEP_OPS, LARGEST_OPS, uniform_terms
from ampconv.plan.provenance import FLOAT_TYPES
from ampconv.plan.values import constant_array, is_constant

EXPONENTIAL = math.inf
# Ops whose output no longer grows with the input: bounded by their semantics, or normalized.
_SETTLING = BOUNDED_OPS | frozenset({
    "LayerNormalization", "InstanceNormalization", "GroupNormalization", "LpNormalization",
    "MeanVarianceNormalization", "RMSNormalization", "IsInf", "IsNaN",
})
# Contrib ops that normalize (onnxruntime's fused LayerNorm family): their first output is degree 0.
_NORMALIZING_CONTRIB = ("LayerNormalization", "GroupNorm", "RMSNorm", "SkipLayerNorm", "SimplifiedLayerNorm")
_KEEP = KEEP_OPS | frozenset({"Softplus", "LogSoftmax", "BatchNormalization", "CumSum", "TopK", "ReduceSum",
                              "ReduceL1", "ReduceL2", "ReduceLogSumExp"})
# Data movement and selections whose output elements are input elements (or smaller): they keep the gain.
_GAIN_KEEPING = frozenset({
    "Identity", "Cast", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Slice", "Gather",
    "GatherElements", "GatherND", "Tile", "Pad", "Relu", "LeakyRelu", "Abs", "Neg", "MaxPool", "AveragePool",
    "GlobalAveragePool", "GlobalMaxPool", "Split", "Dropout", "Clip", "ReduceMax", "ReduceMin", "ReduceMean",
    "Max", "Min", "Mean", "Concat", "Where", "DepthToSpace", "SpaceToDepth",
})
# Reductions: the gain an extent of N gives (None: the extent is unknown) for input gain g.
_SUM_GAINS: Dict[str, Callable[[float, int], float]] = {
    "ReduceSum": lambda g, n: g * n, "ReduceL1": lambda g, n: g * n,
    "ReduceSumSquare": lambda g, n: g * g * n, "ReduceL2": lambda g, n: g * math.sqrt(n),
}
_CONTRACTIONS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"})
# Ops that make a value whose smallest entries shrink like exp(-spread) as their input grows.
_VANISHING = frozenset({"Softmax", "Exp", "Sigmoid"})


class Growth(NamedTuple):
    """``|v| ~ |u| ** degree``; for ``degree == inf``, ``v ~ exp(exponent)`` with ``exponent`` of degree
    ``exponent_degree`` (``exponent`` None: grows faster than any power, no exponent known). ``gain``: a bound
    ``|v| <= gain * |u| ** degree`` for every input (None: no structural bound; see the module docstring)."""

    degree: float
    exponent: Optional[ir.Value] = None
    exponent_degree: float = 0.0
    gain: Optional[float] = None


class Structure(NamedTuple):
    """What the gains read from the model: how many values a reduction sums (``extent(node)``), a value's shape."""

    extent: Callable[[ir.Node], Optional[int]]
    shape: Callable[[ir.Value], Optional[ir.Shape]]


class InputDegrees:
    """The ``Growth`` of every value of ``graph`` (main graph) in each of ``sources`` (float graph inputs).

    ``vanishing[name]``: value -> (exponent, its degree) for values whose smallest entries shrink
    exponentially as input ``name`` grows. Without ``structure`` no gain is bounded. With ``shifts``, the
    logarithm of a growing value keeps its growth: ``log(s * x) = log(s) + log(x)`` never overflows, but it
    moves with the input's scale, and a question of what a sample at another scale speaks for (the release
    step's) must count it; a norm still ends it.
    """

    def __init__(self, graph: ir.Graph, sources: Iterable[ir.Value], structure: Optional[Structure] = None,
                 shifts: bool = False) -> None:
        self.by_input: Dict[str, Dict[ir.Value, Growth]] = {}
        self.vanishing: Dict[str, Dict[ir.Value, Tuple[ir.Value, float]]] = {}
        for source in sources:
            walk = _Walk(structure, shifts)
            walk.grown[source] = Growth(1.0, gain=1.0)
            for node in graph:
                walk.visit(node)
            self.by_input[source.name] = walk.grown
            self.vanishing[source.name] = walk.vanishing

    def growth(self, name: str, value: Optional[ir.Value]) -> Optional[Growth]:
        """How ``value`` grows with input ``name``; None when it does not (degree 0 or less, or not reached)."""
        if value is None:
            return None
        return self.by_input.get(name, {}).get(value)


class _Walk:
    """One input's walk over the graph: the growth of each value it reaches."""

    def __init__(self, structure: Optional[Structure], shifts: bool = False) -> None:
        self.structure = structure
        self.shifts = shifts
        self.grown: Dict[ir.Value, Growth] = {}
        self.vanishing: Dict[ir.Value, Tuple[ir.Value, float]] = {}

    def visit(self, node: ir.Node) -> None:
        """Record the growth of ``node``'s float outputs from its inputs' (nothing when none of them grows)."""
        read = [self.grown.get(v) if v is not None else None for v in node.inputs]
        captured = self._captured(node)
        if not any(read) and captured is None:
            return
        if node.op_type in _VANISHING and is_default(node) and read and read[0] is not None \
                and read[0].degree != EXPONENTIAL:
            self.vanishing[node.outputs[0]] = (node.inputs[0], read[0].degree)
        result = self._rule(node, read) if captured is None else _largest(read + [captured])
        if result is None or not result.degree > 0:
            return
        if result.gain is not None and not (result.gain > 0 and math.isfinite(result.gain)):
            result = result._replace(gain=None)
        for out in node.outputs:
            if out.dtype in FLOAT_TYPES or out.dtype is None:
                self.grown[out] = result

    def _captured(self, node: ir.Node) -> Optional[Growth]:
        """For a node holding subgraphs: the largest growth among the outer values its bodies read (None: none)."""
        bodies = subgraphs_of(node)
        if not bodies:
            return None
        found = []
        for body in bodies:
            for inner in body:
                found.extend(self.grown[v] for v in inner.inputs if v is not None and v in self.grown)
                found.append(self._captured(inner))
        return _largest(found)

    def _rule(self, node: ir.Node, read) -> Optional[Growth]:
        """The growth of ``node``'s outputs from its inputs' growths (``read``, None where an input does not grow)."""
        op = node.op_type
        if not is_default(node):
            return None if any(word in op for word in _NORMALIZING_CONTRIB) else _ungained(_largest(read))
        if op in _SETTLING:
            return None
        first = read[0] if read else None
        if op in _SUM_GAINS:
            return self._sum(node, first)
        if op in _KEEP or op in LARGEST_OPS:
            return _keep_or_join(op, read)
        if op == "Mul":
            return self._product(node, read[:2])
        if op == "Div":
            return self._quotient(node, read)
        if op in ("Sqrt", "Reciprocal", "Pow"):
            return _power(node, first)
        if op in _CONTRACTIONS:
            return self._contraction(node, read)
        if op == "Exp":
            return _exponential(node.inputs[0], first)
        if op == "Log":
            if first is not None and first.degree != EXPONENTIAL and self.shifts:
                return _ungained(first)
            return Growth(first.exponent_degree) if first is not None and first.degree == EXPONENTIAL else None
        return _ungained(_largest(read))  # an op not modelled here passes the scale on

    def _sum(self, node: ir.Node, data: Optional[Growth]) -> Optional[Growth]:
        if data is None:
            return None
        degree = data.degree * (2.0 if node.op_type == "ReduceSumSquare" and data.degree != EXPONENTIAL else 1.0)
        extent = self.structure.extent(node) if self.structure is not None else None
        gain = _SUM_GAINS[node.op_type](data.gain, extent) if data.gain is not None and extent else None
        return data._replace(degree=degree, gain=gain)

    def _product(self, node: ir.Node, read) -> Optional[Growth]:
        known = [g for g in read if g is not None]
        exponential = [g for g in known if g.degree == EXPONENTIAL]
        if exponential:
            return exponential[0]._replace(gain=None)
        if not known:
            return None
        gain = 1.0
        for value, growth in zip(node.inputs, read):
            bound = growth.gain if growth is not None else _bound(value)
            gain = None if gain is None or bound is None else gain * bound
        return Growth(sum(g.degree for g in known), gain=gain)

    def _quotient(self, node: ir.Node, read) -> Optional[Growth]:
        top = read[0] if read else None
        bottom = read[1] if len(read) > 1 else None
        if bottom is not None and bottom.degree == EXPONENTIAL:
            return None  # exp(a) / sum(exp(a)): a softmax written out, or anything over an exponential: bounded
        if top is None:
            return None
        if top.degree == EXPONENTIAL:
            return top._replace(gain=None)
        smallest = _smallest(node.inputs[1]) if bottom is None and len(node.inputs) > 1 else None
        gain = top.gain / smallest if top.gain is not None and smallest else None
        return Growth(top.degree - (bottom.degree if bottom is not None else 0.0), gain=gain)

    def _contraction(self, node: ir.Node, read) -> Optional[Growth]:
        """A product of its operands (the first two; every operand of an Einsum), then the bias added."""
        op = node.op_type
        operands = read if op == "Einsum" else read[:2]
        grown = [g for g in operands if g is not None]
        if not grown:
            return _ungained(_largest(read[2:]))
        product = self._product(node, operands) if op == "Einsum" else None
        if op != "Einsum":
            product = Growth(sum(g.degree for g in grown)) if all(g.degree != EXPONENTIAL for g in grown) \
                else grown[0]._replace(gain=None)
            product = product._replace(gain=self._weighted_gain(node, read))
        elif product is not None and product.gain is not None:
            extent = self._einsum_extent(node)
            product = product._replace(gain=product.gain * extent if extent else None)
        bias = read[2:] if op != "Einsum" else []
        return product if not any(bias) else _ungained(_largest([product] + list(bias)))

    def _weighted_gain(self, node: ir.Node, read) -> Optional[float]:
        """A product with a constant of one magnitude throughout (a sum or a mean spelled as a product): its
        terms times that magnitude; any other weights end the structural chain (None)."""
        grown = [i for i in (0, 1) if i < len(read) and read[i] is not None]
        if len(grown) != 1 or read[grown[0]].gain is None or len(node.inputs) < 2:
            return None
        slot = 1 - grown[0]
        weight = node.inputs[slot]
        if weight is None or not is_constant(weight):
            return None
        terms = uniform_terms(weight, node, slot)
        return read[grown[0]].gain * terms if terms else None

    def _einsum_extent(self, node: ir.Node) -> Optional[int]:
        """How many products one output of an Einsum sums: the sizes of the letters its output drops."""
        attribute = node.attributes.get("equation")
        if attribute is None or self.structure is None or "->" not in str(attribute.value):
            return None
        operands, output = str(attribute.value).replace(" ", "").split("->")
        sizes: Dict[str, int] = {}
        for letters, value in zip(operands.split(","), node.inputs):
            shape = self.structure.shape(value) if value is not None else None
            if shape is None or "." in letters or len(letters) != len(shape.dims):
                return None
            for letter, dim in zip(letters, shape.dims):
                if isinstance(dim, int):
                    sizes[letter] = dim
        dropped = set(operands.replace(",", "")) - set(output)
        if any(letter not in sizes for letter in dropped):
            return None
        return math.prod(sizes[letter] for letter in dropped)


def _keep_or_join(op: str, read) -> Optional[Growth]:
    """Data movement keeps its data's growth, a join the largest; the gain survives where it is a bound."""
    if op in LARGEST_OPS:
        result = _largest(read)
        if result is None:
            return None
        top = [g for g in read if g is not None and g.degree == result.degree]
        gains = [g.gain for g in top]
        if any(g is None for g in gains):
            return result._replace(gain=None)
        adds = op in ("Add", "Sub", "Sum")
        return result._replace(gain=sum(gains) if adds else max(gains))
    first = read[0] if read else None
    if first is None:
        return None
    return first if op in _GAIN_KEEPING else first._replace(gain=None)


def _bound(value: Optional[ir.Value]) -> Optional[float]:
    """The largest magnitude of a value that does not grow: a constant's, or what its op's semantics allow."""
    if value is None:
        return None
    if is_constant(value):
        array = constant_array(value)
        return float(abs(array.astype("float64")).max()) if array is not None and array.size else None
    return semantic_bound(value)


def _smallest(value: Optional[ir.Value]) -> Optional[float]:
    """The smallest magnitude of a constant divisor (None when it is not a constant, or holds a 0)."""
    if value is None or not is_constant(value):
        return None
    array = constant_array(value)
    if array is None or not array.size:
        return None
    smallest = float(abs(array.astype("float64")).min())
    return smallest if smallest > 0 else None


def _largest(growths) -> Optional[Growth]:
    """The fastest-growing of ``growths`` (None entries grow not at all)."""
    known = [g for g in growths if g is not None and g.degree > 0]
    return max(known, key=lambda g: g.degree) if known else None


def _ungained(growth: Optional[Growth]) -> Optional[Growth]:
    return growth._replace(gain=None) if growth is not None else None


def _scaled(growth: Optional[Growth], by: float) -> Optional[Growth]:
    if growth is None or by <= 0:
        return None
    if growth.degree == EXPONENTIAL:
        return growth._replace(gain=None)
    gain = growth.gain ** by if growth.gain is not None else None
    return Growth(growth.degree * by, gain=gain)


def _power(node: ir.Node, base: Optional[Growth]) -> Optional[Growth]:
    if node.op_type == "Sqrt":
        return _scaled(base, 0.5)
    if node.op_type == "Reciprocal":
        return None
    exponent = node.inputs[1] if len(node.inputs) > 1 else None
    array = constant_array(exponent) if exponent is not None and is_constant(exponent) else None
    if array is None or array.size == 0:
        return _ungained(base)  # an exponent that varies: assumed to keep the base's growth
    return _scaled(base, float(abs(array.astype("float64")).max()) if (array > 0).all() else -1.0)


def _exponential(exponent: Optional[ir.Value], growth: Optional[Growth]) -> Optional[Growth]:
    if growth is None:
        return None
    if growth.degree == EXPONENTIAL:
        return Growth(EXPONENTIAL)  # exp of an exponential: no power describes it
    return Growth(EXPONENTIAL, exponent, growth.degree)


__all__ = ["EXPONENTIAL", "Growth", "InputDegrees", "Structure"]
