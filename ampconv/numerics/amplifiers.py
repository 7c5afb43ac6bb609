"""Which ops amplify the relative error of an input, and whether a value reaches one (data and constant guards)."""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import bounded_uses

# Ops whose result magnifies the relative error of (some of) their inputs: input slots that amplify.
AMPLIFIERS = {
    "Log": (0,),
    "Div": (1,),
    "Reciprocal": (0,),
    "Pow": (0,),
    "Sqrt": (0,),
    "LayerNormalization": (0,),
    "InstanceNormalization": (0,),
    "GroupNormalization": (0,),
    "BatchNormalization": (0,),
    "LpNormalization": (0,),
    "MeanVarianceNormalization": (0,),
    "RMSNormalization": (0,),
}
# Ops between an underflowing tensor and an amplifier that carry its values on unchanged in scale.
_PASS_THROUGH = frozenset(
    {"Add", "Sub", "Mul", "Max", "Min", "Abs", "Clip", "Cast", "Identity", "Reshape", "Transpose", "Squeeze",
     "Unsqueeze", "Flatten", "Expand", "Concat", "Slice", "Gather", "Relu"}
)
_SEARCH_DEPTH = 4


def feeds_amplifier(value: ir.Value, depth: int = _SEARCH_DEPTH) -> Optional[ir.Node]:
    """The first amplifying op ``value`` reaches through at most ``depth`` pass-through ops, or None."""
    for use in bounded_uses([value], lambda through: is_default(through) and through.op_type in _PASS_THROUGH, depth):
        if is_default(use.node) and use.idx in AMPLIFIERS.get(use.node.op_type, ()):
            return use.node
    return None
