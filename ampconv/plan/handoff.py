"""What a pinned node hands on: a float32 node whose output fits the LOW type hands its gray readers LOW.

Gray nodes inherit their voters' precision (docs/precision.md sec. 3). A node
that a guard keeps float32 for what it *computes* (an Exp whose values
overflow, a normalization's statistics, a constant out of range) often
*produces* values the LOW type holds: a softmax written as Exp / ReduceSum
hands on probabilities, a decomposed LayerNorm a normalized activation. Its
gray readers need not follow it into float32: such a voter counts as LOW, the
reader runs LOW (rule ``gray-handed``), and the rewrite casts the value down
once, right where the reader needs it. The pinned node itself still computes
in float32; only what it hands on changes.

Evidence that an output fits (``fits``), one of:

- a float32 run saw it: calibration data, or the default synthetic run where
  its numbers speak for the value (a value whose scale follows a float graph
  input's is not one: ``plan.provenance``), within the data guard
  (``Thresholds.max_abs``), finite, and with no value below the LOW normal
  range when it reaches an error amplifier (a Log, a divisor: a dead
  channel's 1e-9 that LOW flushes would turn a Log into -inf there);
- the semantics of the op that makes it bound it inside the LOW range
  (``plan.bounds``: a Sigmoid, a Softmax).

No evidence: it hands on float32, as before. The rules whose nodes hand on
(``HANDING``) are the guards that pin for range: not the black list (Range,
CumSum and the trigonometric ops pin for what their values *mean*: positions
and phases LOW would round), not the checks' or the user's pins, not the
accuracy search's (its pins are about rounding, output included).
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.numerics.activations import fmt
from ampconv.numerics.amplifiers import feeds_amplifier
from ampconv.plan.bounds import semantic_bound
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.provenance import scaled_by_user_data
from ampconv.policy import HIGH

# The rules whose float32 nodes hand on LOW when their outputs fit: they pin for the range of what they compute.
HANDING = frozenset({"hard-constant", "data-overflow", "data-accumulation", "data-underflow", "range-statistics",
                     "range-reduction", "range-mask"})


def record(ctx: PlanContext, node: ir.Node, decision: Decision, facts: NodeFacts) -> None:
    """Note in ``ctx.handed`` each main output of a float32 ``node`` (pinned by a ``HANDING`` rule) that fits LOW."""
    if decision.precision != HIGH or decision.rule not in HANDING:
        return
    for j in facts.main_out:
        value = node.outputs[j]
        evidence = fits(ctx, value)
        if evidence is not None:
            ctx.handed[value] = evidence


def fits(ctx: PlanContext, value: ir.Value) -> Optional[str]:
    """Why ``value``'s values fit the LOW type (the evidence, in words), or None when nothing says so."""
    bound = semantic_bound(value)
    if bound is not None and bound < ctx.low_record.max:
        return f"bounded by |x| <= {bound:g} by the op that makes it"
    calibration = ctx.calibration
    stats = calibration.tensor(value.name) if calibration is not None else None
    if stats is None or stats.nonfinite or stats.max_abs > ctx.thresholds.max_abs:
        return None
    if calibration.synthetic and value in scaled_by_user_data(ctx):
        return None  # random inputs at a modest scale say nothing of this value at the data's scale
    if stats.below_normal and feeds_amplifier(value) is not None:
        return None  # values below the normal range on their way to an amplifier (a Log, a divisor): kept exact
    run = "the synthetic float32 run" if calibration.synthetic else f"{calibration.samples} calibration sample(s)"
    return f"{run} saw max |x| = {fmt(stats.max_abs)}, within the guard {ctx.thresholds.max_abs:g}"

