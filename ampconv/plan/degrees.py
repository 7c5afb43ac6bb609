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
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, NamedTuple, Optional

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import subgraphs_of
from ampconv.plan.magnitude import BOUNDED_OPS, KEEP_OPS, LARGEST_OPS
from ampconv.plan.values import constant_array, is_constant

EXPONENTIAL = math.inf
_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})
# Ops whose output no longer grows with the input: bounded by their semantics, or normalized.
_SETTLING = BOUNDED_OPS | frozenset({
    "LayerNormalization", "InstanceNormalization", "GroupNormalization", "LpNormalization",
    "MeanVarianceNormalization", "RMSNormalization", "IsInf", "IsNaN",
})
# Contrib ops that normalize (onnxruntime's fused LayerNorm family): their first output is degree 0.
_NORMALIZING_CONTRIB = ("LayerNormalization", "GroupNorm", "RMSNorm", "SkipLayerNorm", "SimplifiedLayerNorm")
_KEEP = KEEP_OPS | frozenset({"Softplus", "LogSoftmax", "BatchNormalization", "CumSum", "TopK", "ReduceSum",
                              "ReduceL1", "ReduceL2", "ReduceLogSumExp"})
_CONTRACTIONS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"})


class Growth(NamedTuple):
    """``|v| ~ |u| ** degree``; for ``degree == inf``, ``v ~ exp(exponent)`` with ``exponent`` of degree
    ``exponent_degree`` (``exponent`` None: grows faster than any power, no exponent known)."""

    degree: float
    exponent: Optional[ir.Value] = None
    exponent_degree: float = 0.0


class InputDegrees:
    """The ``Growth`` of every value of ``graph`` (main graph) in each of ``sources`` (float graph inputs)."""

    def __init__(self, graph: ir.Graph, sources: Iterable[ir.Value]) -> None:
        self.by_input: Dict[str, Dict[ir.Value, Growth]] = {}
        for source in sources:
            grown: Dict[ir.Value, Growth] = {source: Growth(1.0)}
            for node in graph:
                _visit(node, grown)
            self.by_input[source.name] = grown

    def growth(self, name: str, value: Optional[ir.Value]) -> Optional[Growth]:
        """How ``value`` grows with input ``name``; None when it does not (degree 0 or less, or not reached)."""
        if value is None:
            return None
        return self.by_input.get(name, {}).get(value)


def _visit(node: ir.Node, grown: Dict[ir.Value, Growth]) -> None:
    """Record the growth of ``node``'s float outputs from its inputs' (nothing when none of them grows)."""
    read = [grown.get(v) if v is not None else None for v in node.inputs]
    captured = _captured(node, grown)
    if not any(read) and not captured:
        return
    result = _rule(node, read) if captured is None else _largest(read + [captured])
    if result is None or not result.degree > 0:
        return
    for out in node.outputs:
        if out.dtype in _FLOATS or out.dtype is None:
            grown[out] = result


def _captured(node: ir.Node, grown: Dict[ir.Value, Growth]) -> Optional[Growth]:
    """For a node holding subgraphs: the largest growth among the outer values its bodies read; else None."""
    bodies = subgraphs_of(node)
    if not bodies:
        return None
    found = []
    for body in bodies:
        for inner in body:
            found.extend(grown[v] for v in inner.inputs if v is not None and v in grown)
            found.append(_captured(inner, grown))
    return _largest(found) or Growth(0.0)


def _rule(node: ir.Node, read) -> Optional[Growth]:
    """The growth of ``node``'s outputs from its inputs' growths (``read``, None where an input does not grow)."""
    op = node.op_type
    if not is_default(node):
        if any(word in op for word in _NORMALIZING_CONTRIB):
            return None
        return _largest(read)
    if op in _SETTLING:
        return None
    first = read[0] if read else None
    if op in _KEEP:
        return first
    if op == "ReduceSumSquare":
        return _scaled(first, 2.0)
    if op in LARGEST_OPS:
        return _largest(read)
    if op == "Mul":
        return _product(read[:2])
    if op == "Div":
        return _quotient(read[0] if read else None, read[1] if len(read) > 1 else None)
    if op in ("Sqrt", "Reciprocal", "Pow"):
        return _power(node, first)
    if op in _CONTRACTIONS:
        return _contraction(op, read)
    if op == "Exp":
        return _exponential(node.inputs[0], first)
    if op == "Log":
        return Growth(first.exponent_degree) if first is not None and first.degree == EXPONENTIAL else None
    return _largest(read)  # an op not modelled here passes the scale on


def _largest(growths) -> Optional[Growth]:
    """The fastest-growing of ``growths`` (None entries grow not at all)."""
    known = [g for g in growths if g is not None and g.degree > 0]
    return max(known, key=lambda g: g.degree) if known else None


def _scaled(growth: Optional[Growth], by: float) -> Optional[Growth]:
    if growth is None or by <= 0:
        return None
    if growth.degree == EXPONENTIAL:
        return growth
    return Growth(growth.degree * by)


def _product(growths) -> Optional[Growth]:
    known = [g for g in growths if g is not None]
    exponential = [g for g in known if g.degree == EXPONENTIAL]
    if exponential:
        return exponential[0]
    return Growth(sum(g.degree for g in known)) if known else None


def _quotient(top: Optional[Growth], bottom: Optional[Growth]) -> Optional[Growth]:
    if bottom is not None and bottom.degree == EXPONENTIAL:
        return None  # exp(a) / sum(exp(a)): a softmax written out, or anything over an exponential: bounded
    if top is None:
        return None
    if top.degree == EXPONENTIAL:
        return top
    return Growth(top.degree - (bottom.degree if bottom is not None else 0.0))


def _power(node: ir.Node, base: Optional[Growth]) -> Optional[Growth]:
    if node.op_type == "Sqrt":
        return _scaled(base, 0.5)
    if node.op_type == "Reciprocal":
        return None
    exponent = node.inputs[1] if len(node.inputs) > 1 else None
    array = constant_array(exponent) if exponent is not None and is_constant(exponent) else None
    if array is None or array.size == 0:
        return base  # an exponent that varies: assumed to keep the base's growth
    return _scaled(base, float(abs(array.astype("float64")).max()) if (array > 0).all() else -1.0)


def _contraction(op: str, read) -> Optional[Growth]:
    """A product of its operands (the first two; every operand of an Einsum), then the bias added."""
    operands = read if op == "Einsum" else read[:2]
    product = _product([g for g in operands if g is not None]) if any(operands) else None
    return _largest([product] + list(read[2:] if op != "Einsum" else []))


def _exponential(exponent: Optional[ir.Value], growth: Optional[Growth]) -> Optional[Growth]:
    if growth is None:
        return None
    if growth.degree == EXPONENTIAL:
        return Growth(EXPONENTIAL)  # exp of an exponential: no power describes it
    return Growth(EXPONENTIAL, exponent, growth.degree)


__all__ = ["EXPONENTIAL", "Growth", "InputDegrees"]
