"""Values whose magnitude an op's semantics bound, whatever its inputs hold.

``cos`` and ``sin`` lie in [-1, 1] and a softmax in [0, 1] for every input:
such an op may need float32 to *compute* (a rotary angle of 1e4 radians loses
its phase in float16), but its *result* fits the LOW type with no more error
than any LOW op's result. The gray rule reads these bounds (``semantic_bound``)
so that a float32 table of cos/sin does not drag every op it multiplies into
float32; the table is cast down once instead.

Bounds come from the op that makes a value (the table below), carried through
the transparent ops (Reshape, Concat, Gather, Max, Relu, ...: each output
element is one of its inputs' elements, or smaller) and sign changes (Neg,
Abs) that keep them; a product of bounded values is bounded by the product of the bounds.
Nothing here reads a shape or a name.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.policy.lists import behaviour_kind

# op -> the largest magnitude its float output can take, for any input.
_BOUNDED_OUTPUT = {
    "Cos": 1.0,
    "Sin": 1.0,
    "Tanh": 1.0,
    "Erf": 1.0,
    "Sigmoid": 1.0,
    "HardSigmoid": 1.0,
    "Softmax": 1.0,
    "Softsign": 1.0,
}

# Ops whose output magnitude is at most their first input's.
_MAGNITUDE_KEEPING = frozenset({"Neg", "Abs"})

# Data movement that may leave its inputs' range (cubic interpolation overshoots).
_OVERSHOOTING = frozenset({"Resize"})

_DEPTH = 8  # how far up a chain of data movement the bound is looked for


def semantic_bound(value: ir.Value, depth: int = _DEPTH) -> Optional[float]:
    """The largest magnitude ``value`` can hold by the semantics of the ops that make it, or None if unbounded."""
    producer = value.producer()
    if producer is None or depth == 0 or not is_default(producer):
        return None
    op = producer.op_type
    if op in _BOUNDED_OUTPUT:
        return _BOUNDED_OUTPUT[op]
    float_inputs = [v for v in producer.inputs if v is not None and _is_float(v)]
    if not float_inputs:
        return None
    if op in _MAGNITUDE_KEEPING:
        return semantic_bound(float_inputs[0], depth - 1)
    if op == "Mul":
        bounds = [semantic_bound(v, depth - 1) for v in float_inputs]
        if all(b is not None for b in bounds):
            product = 1.0
            for bound in bounds:
                product *= bound
            return product
        return None
    if behaviour_kind(op, "") == "transparent" and op not in _OVERSHOOTING:
        bounds = [semantic_bound(v, depth - 1) for v in float_inputs]
        return max(bounds) if all(b is not None for b in bounds) else None
    return None


def _is_float(value: ir.Value) -> bool:
    """Float32, or not yet typed (a bound of an integer operand is never asked for: only float voters are)."""
    return value.dtype in (ir.DataType.FLOAT, None)


__all__ = ["semantic_bound"]
