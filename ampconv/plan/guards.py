"""Rule family ``guard``: constant inputs whose values do not fit the LOW type.

1. An attention-mask fill (one huge negative value added to scores before a
   softmax) is stored as a finite, very negative LOW value: softmax still gives
   0 and rows never turn NaN (docs/hazards.md 6). The node stays eligible.
2. With ``--clamp``, overflowing values are clamped to the LOW range.
3. Otherwise values beyond the range (or too many flushing to 0) keep the
   node float32 (rule ``hard-constant``).
4. A few flushed values below the weight's own rounding noise are stored
   rounded and reported.
Every case is recorded as a ``ConstantNote`` for the report.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.plan.context import PlanContext
from ampconv.plan.decision import ConstantNote, Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.values import is_constant
from ampconv.policy import HIGH

# Ops a mask travels through between its fill and the softmax it feeds.
_MASK_PATH = frozenset(
    {"Add", "Sub", "Where", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Expand", "Cast", "Identity", "Div", "Mul"}
)


def constant_range(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Cases 1-4 above for every constant in the node's main type."""
    for i in facts.main_in:
        value = node.inputs[i]
        if not is_constant(value):
            continue
        stats = ctx.ranges.stats(value)
        if stats is None or not (stats.overflow or stats.underflow):
            continue
        tensor = value.name or "?"
        if stats.mask_fill is not None and not stats.underflow and feeds_softmax(node):  # case 1
            ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "mask"))
            ctx.clamp[tensor] = "mask"
            continue
        if stats.overflow and ctx.config.clamp:  # case 2
            ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "clamped"))
            ctx.clamp.setdefault(tensor, True)
            continue
        if stats.pins():  # case 3
            ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "pinned"))
            if stats.overflow:
                what = f"constant {stats.example_overflow:.3g} in {tensor} exceeds {ctx.low}"
            else:
                what = f"constant {stats.example_underflow:.3g} in {tensor} underflows to 0 in {ctx.low}"
            return Decision(HIGH, "hard-constant", f"hard: {what} (use --clamp to clamp instead)")
        ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "reported"))  # case 4
    return None


def feeds_softmax(node: ir.Node, depth: int = 4) -> bool:
    """Whether ``node``'s output reaches a Softmax through at most ``depth`` mask-path ops."""
    frontier = [node]
    for _ in range(depth):
        following = []
        for current in frontier:
            for out in current.outputs:
                for use in out.uses():
                    if use.node.op_type in ("Softmax", "LogSoftmax"):
                        return True
                    if use.node.op_type in _MASK_PATH:
                        following.append(use.node)
        frontier = following
    return False
