"""Rule family ``guard``: constant inputs whose values do not fit the LOW type.

"Too large" and "too small" are measured against the range limits in use
(``ctx.ranges.limits``): the LOW type's own, or ``max_finite`` and
``min_positive`` (docs/hazards.md, "Range thresholds").

1. An attention-mask fill (one huge negative value added to scores before a
   softmax) is stored as a finite, very negative LOW value: softmax still gives
   0 and rows never turn NaN (docs/hazards.md 6). The node stays eligible.
2. With ``--clamp``, too large values are clamped to +-max_finite and too
   small ones raised to +-min_positive or flushed to +-0 (``clamp_small``);
   the node stays eligible.
3. Otherwise values too large (or too many, or in a small constant, too
   small) keep the node float32 (rule ``hard-constant``); the reason quotes
   the limit and names the option that would store the constant LOW.
4. A few too small values, below the weight's own rounding noise, are
   stored rounded and reported.
5. Too small values whose flushing changes the consumer's output by no more
   than that output's own LOW rounding (a folded Conv bias of 1e-9, dead
   channels of a weight: ``plan.effect``) are stored rounded, and the note
   says why.
6. A constant of a node the release step lowered (``plan.release``: tried
   LOW on the evidence, the outputs stayed within the floor) is stored
   rounded, and the note quotes the release's reason.
Every case is recorded as a ``ConstantNote`` for the report.
"""

from __future__ import annotations

from typing import Dict, Optional

import onnx_ir as ir

from ampconv.tensors.low_range import RangeStats, range_stats
from ampconv.core.domains import is_default
from ampconv.core.graphs import bounded_uses
from ampconv.core.lowtypes import low_type
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import ConstantNote, Decision
from ampconv.plan.effect import flush_effect
from ampconv.plan.facts import NodeFacts
from ampconv.plan.ranges import clamp_advice, misfit
from ampconv.plan.release import lowered_reason
from ampconv.plan.rules import GUARD, Rule, builtin
from ampconv.plan.values import is_constant
from ampconv.policy import HIGH

# Ops a mask travels through between its fill and the softmax it feeds: the arithmetic that
# applies it, and data movement (a causal mask is sliced to the sequence, gathered, tiled).
MASK_PATH = frozenset(
    {"Add", "Sub", "Where", "Div", "Mul", "Cast", "Identity", "Reshape", "Transpose", "Unsqueeze", "Squeeze",
     "Expand", "Slice", "Gather", "Concat", "Tile"}
)


def constant_range(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Cases 1-4 above for every constant in the node's main type (and a ConstantOfShape's fill value)."""
    released = lowered_reason(ctx, node)  # the release step tried the node LOW: its constants are stored rounded
    fill = _fill_value_misfit(ctx, node) if _misfit_fills(ctx) and released is None else None
    if fill is not None:
        return fill
    inputs = node.inputs
    for i in facts.main_in:
        value = inputs[i]
        if not is_constant(value):
            continue
        stats = ctx.ranges.stats(value)
        if stats is None or not (stats.overflow or stats.underflow):
            continue
        tensor = value.name or "?"
        # A fill the LOW type can store as it is (-1e4 in fp16) is no mask hazard, even
        # when a stricter max_finite flags it: rewriting it to the type's mask fill
        # would move it further past the user's own limit.
        real_fill = stats.mask_fill is not None and abs(stats.mask_fill) > low_type(ctx.low).max
        if real_fill and not stats.underflow and feeds_softmax(node):  # case 1
            ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "mask"))
            ctx.clamp[tensor] = "mask"
            continue
        if ctx.options.clamp:  # case 2
            ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "clamped"))
            ctx.clamp.setdefault(tensor, True)
            continue
        effect = flush_effect(ctx, node, i, value, stats) if stats.pins() else None
        if stats.pins() and effect is None and released is not None:  # case 6
            effect = f"its consumer runs LOW by the release step: {released}"
        if stats.pins() and effect is None:  # case 3
            ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "pinned"))
            what = misfit(stats, tensor, ctx.low)
            return Decision(HIGH, "hard-constant", f"hard: {what}; {clamp_advice(stats, ctx.low)}")
        ctx.constants.append(ConstantNote(tensor, node.name or "", stats, "reported", effect or ""))  # cases 4, 5
    return None


def fill_stats(ctx: PlanContext, node: Optional[ir.Node]) -> Optional[RangeStats]:
    """The range facts of a default-domain ConstantOfShape's float32 fill value; None for any other node."""
    if node is None or node.op_type != "ConstantOfShape" or not is_default(node):
        return None
    attribute = node.attributes.get("value")
    if attribute is None or attribute.value is None or attribute.value.dtype != ir.DataType.FLOAT:
        return None
    return range_stats(attribute.value.numpy(), ctx.low, limits=ctx.ranges.limits)


def _misfit_fills(ctx: PlanContext) -> Dict[ir.Node, RangeStats]:
    """Every ConstantOfShape of the model whose fill value pins, found once (``ctx.memo``)."""
    found = ctx.memo.get("misfit_fills")
    if found is None:
        found = {}
        for node in ctx.nodes_by_op().get("ConstantOfShape", ()):
            stats = fill_stats(ctx, node)
            if stats is not None and stats.pins():
                found[node] = stats
        ctx.memo["misfit_fills"] = found
    return found


def _fill_value_misfit(ctx: PlanContext, node: ir.Node) -> Optional[Decision]:
    """A ConstantOfShape whose fill value the LOW type cannot hold, or a node reading one, stays float32.

    The fill is an attribute, not an input, so the cases above never see it:
    retyped with its node, or cast down where a LOW node reads its output,
    1e6 would become inf in fp16 and float32's lowest -inf (a fully masked
    softmax row then turns NaN). Both the ConstantOfShape and its readers
    stay float32 (``hard-constant``), even with ``--clamp`` (a clamped fill
    would change every element of the tensor it makes).
    """
    misfits = _misfit_fills(ctx)
    if not misfits:
        return None
    for source in [node] + [value.producer() for value in node.inputs if value is not None]:
        stats = misfits.get(source)
        if stats is None:
            continue
        what = misfit(stats, f"{source.name or 'ConstantOfShape'}'s fill value", ctx.low)
        where = "" if source is node else f" (read from {source.name or 'a ConstantOfShape'})"
        return Decision(HIGH, "hard-constant", f"hard: {what}{where}; a fill value is never clamped")
    return None


def feeds_softmax(node: ir.Node, depth: int = 4) -> bool:
    """Whether ``node``'s output reaches a Softmax through at most ``depth`` mask-path ops."""
    uses = bounded_uses(node.outputs, lambda through: through.op_type in MASK_PATH, depth)
    return any(use.node.op_type in ("Softmax", "LogSoftmax") for use in uses)


CONSTANT_RANGE = builtin(Rule("hard-constant", GUARD, "a constant input holds values beyond the LOW range (or that "
                              "flush to 0)", decide=constant_range))
