"""The fallback type: bfloat16 where float16 cannot hold a node's values (``fallback_dtype="bf16"``, issue 32).

The planner decides LOW and float32 by the same rules as ever. A float32
decision whose only complaint is *range* (the values do not fit float16, and
float32's exponent holds them) becomes ``FALLBACK`` (bfloat16: float16's
speed on the GPU, float32's range) when the node's schema at the model's
opset admits bfloat16 in its main type; everything else keeps its decision.
The range rules (docs/precision.md, "The fallback type"):

- ``hard-constant``: a constant input beyond float16's range (1e6, an
  epsilon that flushes to 0), when every such constant fits bfloat16;
- ``range-statistics``, ``range-reduction``: the statistics of a decomposed
  normalization, sums and magnitudes that overflow float16;
- ``data-overflow``, ``data-accumulation``, ``data-underflow``: what a float32
  run (calibration data or the default synthetic run) saw beyond float16's
  range, or below its normal range; ``data-envelope``: what it extrapolates
  beyond float16's range within an input range the user gave.

Rules about precision (``range-phase``, ``data-tune``), the level table, the
user's overrides and the runtime's pins stay float32: bfloat16 has fewer bits
than float16, so it is no answer to them. The gray rule and the backward pass
carry the fallback type to their neighbours as they carry LOW (``plan.gray``),
so an island grows without casts where the gray rule allows; a cast between
the two LOW types is one direct Cast (``passes.apply``).
"""

from __future__ import annotations

from collections import Counter
from typing import Optional

import numpy as np
import onnx_ir as ir

from ampconv.errors import named
from ampconv.plan.context import PlanContext
from ampconv.plan.data_guards import observed_input_peak
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.values import is_constant
from ampconv.policy import HIGH
from ampconv.core.precision import Precision
from ampconv.runtime.schema import first_opset_allowing, normalize_domain

FALLBACK = Precision.FALLBACK
# Cast (and every default-domain op) takes bfloat16 from this opset on.
CAST_BF16_OPSET = 13
# The rules whose float32 decision means "the values do not fit float16's range".
RANGE_RULES = frozenset({
    "hard-constant", "range-statistics", "range-reduction", "data-overflow", "data-accumulation", "data-underflow",
    "data-envelope",
})


def active(ctx: PlanContext) -> bool:
    """Whether a fallback type is in use (``fallback_dtype="bf16"`` under ``dtype="fp16"``)."""
    return ctx.fallback is not None


def admits(ctx: PlanContext, facts: Optional[NodeFacts]) -> bool:
    """Whether the node's schema at the model's opset takes the fallback type in its main type variable."""
    if facts is None or not active(ctx) or ctx.opsets.get("", 1) < CAST_BF16_OPSET:
        return False  # the rewrite casts to and from bfloat16: Cast takes it from opset 13
    info = facts.info
    return ctx.fallback.type_string in info.allowed(info.main_type())


def widen(ctx: PlanContext, node: ir.Node, facts: NodeFacts, decision: Decision) -> Decision:
    """``decision``, or its fallback form when it keeps ``node`` float32 for range alone and the schema admits it."""
    if decision.precision != HIGH or decision.rule not in RANGE_RULES or not active(ctx):
        return decision
    if not admits(ctx, facts):
        return refused(ctx, node, decision)
    underflow = decision.rule == "data-underflow"
    beyond = _data_beyond(ctx, node, facts, decision)
    if beyond is not None:
        return Decision(decision.precision, decision.rule, f"{decision.reason}; {beyond}", follows=decision.follows)
    if decision.rule == "hard-constant":
        fit = _constants_fit(ctx, node, facts)
        if fit is None:
            return decision
        underflow = fit == "underflow"
    return Decision(FALLBACK, decision.rule, f"{decision.reason}; {because(ctx, underflow)}",
                    follows=decision.follows)


def refused(ctx: PlanContext, node: ir.Node, decision: Decision) -> Decision:
    """The float32 decision of a node whose schema refuses the fallback type at the model's opset.

    Where a later opset admits it, the reason names that opset and the node is
    counted for the plan's warning (``refused_warning``): the user upgrades with
    ``--opset N``, which the converter confirms as every upgrade (it loads).
    """
    domain = normalize_domain(node.domain)
    opset = ctx.opsets.get(domain, 1)
    later = first_opset_allowing(domain, node.op_type, opset, ctx.fallback.key, ctx.runtime)
    if domain != "" and ctx.opsets.get("", 1) < CAST_BF16_OPSET:
        later = None  # a contrib op that takes it: the default domain's Cast does not yet
    if later is None:
        return decision
    ctx.memo.setdefault("fallback_refused", Counter())[(node.op_type, later)] += 1
    record = ctx.fallback
    return Decision(decision.precision, decision.rule,
                    f"{decision.reason}; {node.op_type} takes {record.name} only from opset {later}, so it runs "
                    f"float32 at opset {opset}", follows=decision.follows)


def refused_warning(ctx: PlanContext) -> Optional[str]:
    """One warning for the nodes that would run the fallback type at a later opset; None if none."""
    refused = ctx.memo.get("fallback_refused")
    if not refused:
        return None
    target = max(opset for _, opset in refused)
    ops = Counter()
    for (op, _), count in refused.items():
        ops[op] += count
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops.most_common(4))
    record = ctx.fallback
    return (f"{sum(ops.values())} node(s) ({listed}) whose values do not fit {ctx.low_name} run float32, not "
            f"{record.name}: opset {ctx.opsets.get('', 1)} does not accept {record.name} for them; convert with "
            f"{named('opset', target)} to upgrade the model first")


def seen_within_low(ctx: PlanContext, inputs) -> Optional[tuple]:
    """``(value, max |x|)`` of the largest FALLBACK activation among ``inputs`` when a float32 run saw every one
    of them inside the LOW type's range; None when one was not seen, or not inside it.

    Inside: within the data guard's limit (half the LOW max by default) for
    calibration data; 4x below it for the synthetic run (random inputs
    understate, as ``evidence.OBSERVED_HEADROOM`` says). A gray node whose
    LOW and FALLBACK voters disagree then runs LOW, the FALLBACK input cast
    down: the node keeps float16's precision where its values fit.
    """
    calibration = ctx.calibration
    if calibration is None:
        return None
    limit = ctx.thresholds.max_abs / (4.0 if calibration.synthetic else 1.0)
    worst = None
    for value in inputs:
        if value is None or ctx.values.get(value) != FALLBACK or is_constant(value):
            continue
        stats = calibration.tensor(value.name)
        if stats is None or stats.nonfinite or not stats.max_abs <= limit:
            return None
        if worst is None or stats.max_abs > worst[1]:
            worst = (value, stats.max_abs)
    return worst


def because(ctx: PlanContext, underflow: bool = False) -> str:
    """What a fallback decision's reason adds: the type, and why it holds the values."""
    record = ctx.fallback
    fails = "flushes them" if underflow else "overflows"
    return f"runs {record.name} ({ctx.low_name} {fails}; {record.name} has float32's range)"


# The data rules whose figure is a magnitude: it must fit the fallback type too.
_MAGNITUDE_RULES = frozenset({"data-overflow", "data-accumulation"})


def _data_beyond(ctx: PlanContext, node: ir.Node, facts: NodeFacts, decision: Decision) -> Optional[str]:
    """Why ``node`` stays float32 though the fallback type admits it: a float32 run saw it read values beyond that
    type too.

    bfloat16's largest value (3.39e38) is below float32's (3.40e38): a value
    between them (float32's lowest, written as a mask fill and carried
    through arithmetic a mask fill cannot be told apart in) read from a
    float32 node is cast to inf. None when what the run saw fits, or the rule
    is not about a magnitude.
    """
    if decision.rule not in _MAGNITUDE_RULES:
        return None
    peak = observed_input_peak(ctx, node, facts)
    record = ctx.fallback
    if peak is None or fits(peak, record):
        return None
    return (f"a float32 run saw it read |x| = {peak:.4g}, beyond {record.name}'s range too (max {record.max:.4g}): "
            "runs float32")


def fits(magnitude: float, record) -> bool:
    """Whether a float32 magnitude rounds to a finite value of the LOW type ``record`` (below its overflow bits)."""
    bits = int(np.array(abs(magnitude), dtype=np.float32).view(np.uint32))
    return bits < record.overflow_bits


def _constants_fit(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[str]:
    """Whether every constant input of ``node``'s main type, and the fill it reads, fits the fallback type.

    None when one does not (a float32-lowest mask fill, a value beyond bf16's
    max); else what float16 did to them: ``overflow`` when one overflows it,
    ``underflow`` when they only flush to 0 there.
    """
    record = ctx.fallback
    kind = "underflow"
    for i in facts.main_in:
        value = node.inputs[i]
        if value is None or not is_constant(value):
            continue
        stats = ctx.ranges.stats(value)
        if stats is None or not fits(stats.max_abs, record):
            return None
        kind = "overflow" if stats.overflow else kind
    for source in [node] + [v.producer() for v in node.inputs if v is not None]:
        if source is not None and source.op_type == "ConstantOfShape":
            attribute = source.attributes.get("value")
            if attribute is not None and attribute.value is not None:
                array = attribute.value.numpy()
                peak = float(abs(array.astype("float64")).max()) if array.size else 0.0
                if not fits(peak, record):
                    return None
                kind = "overflow" if peak > ctx.low_record.max else kind
    return kind


__all__ = ["FALLBACK", "RANGE_RULES", "active", "admits", "because", "fits", "refused", "refused_warning", "seen_within_low",
           "widen"]
