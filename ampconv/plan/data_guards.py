"""Rule family ``data``: what calibration data showed about a node's activations.

Without calibration data these rules never decide. With it (``--calibration-data``),
in this order:

1. ``data-tune``: the accuracy search (``--tune``) found that this node's LOW
   rounding made validation fail; the reason quotes the error it caused.
2. ``data-overflow``: an input or output of the node in its main type reached
   values beyond ``Thresholds.max_abs`` on some sample (they would become inf).
   Values an attention-mask fill accounts for do not count: the guard stores
   the fill as the LOW type's mask value (``guards``, case 1), so the masked
   scores stay finite and softmax still gives 0 there.
   Under ``--tune`` a node over the default guard but within the LOW maximum
   (the guard's margin, ``ampconv.calibration.margin``) is left to the later rules
   when the accuracy search lowered it again (``SearchPins.released``).
3. ``data-accumulation``: a reduction's running sum exceeds the LOW type's
   largest value (a runtime that accumulates in the LOW type overflows even
   when the result fits, e.g. a ReduceMean over many terms).
4. ``data-underflow``: most non-zero values of an output lie below the LOW
   type's smallest normal (``Thresholds.below_normal``) and the output feeds,
   through at most a few value-preserving ops, an op that amplifies relative
   error (Log, a divisor, Pow, Sqrt, Reciprocal, a normalization): the lost
   digits would then dominate that op's result.

Every reason quotes the evidence: the figure, the tensor, the sample count and
the LOW type's limit. Decisions based on random calibration data say so.

The default synthetic run (``calibration.synthetic``: one seeded random sample through
the model when no data is given, within its budget) feeds rule 2 only (with the same guard),
never for a black op or for a magnitude a constant input of the node accounts
for: random inputs show when values overflow, not how real data underflows.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.core.graphs import bounded_sources
from ampconv.numerics.activations import REDUCTIONS, fmt
from ampconv.numerics.amplifiers import AMPLIFIERS, feeds_amplifier  # noqa: F401 - AMPLIFIERS: re-exported
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import DATA, Rule, builtin
from ampconv.plan.guards import MASK_PATH, feeds_softmax
from ampconv.plan.values import is_constant
from ampconv.policy import HIGH
from ampconv.policy.lists import BLACK
from ampconv.runtime.schema import normalize_domain



def accuracy_pin(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Rule 1: a node the accuracy search kept float32."""
    reason = ctx.tune_pins.kept.get(node.name or "")
    if reason is None:
        return None  # a released node is rule 2's to read (``_lowered_again``)
    return Decision(HIGH, "data-tune", f"data: {reason}")


def activation_range(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Rules 2-4 for ``node``, from the calibration statistics of its tensors."""
    calibration = ctx.calibration
    if calibration is None or not (facts.main_in or facts.main_out):
        return None
    if calibration.synthetic and not _synthetic_speaks(ctx, node):
        return None
    limit = ctx.thresholds.max_abs
    observed = _observed(ctx, node, facts)
    if observed:
        # The worst slot is the evidence: a square's output says more than its input.
        stats, kind, index, value = max(observed, key=lambda entry: entry[0].max_abs)
        if stats.max_abs > limit and not _lowered_again(ctx, node, stats.max_abs):
            within = stats.max_abs <= ctx.low_record.max and ctx.options.data_max is None
            return Decision(
                HIGH,
                "data-overflow",
                f"data: max |x| = {fmt(stats.max_abs)} at {kind} {index} ({value.name}) over "
                f"{_samples(ctx)}; {ctx.low_name} max {ctx.low_record.max:g}"
                + (f", guard {limit:g}" if limit != ctx.low_record.max else "")
                + (" (within the LOW range: only the guard's margin keeps it)" if within else ""),
            )
    if calibration.synthetic:
        return None  # random inputs say when values overflow, not how a runtime accumulates or underflows
    accumulated = calibration.accumulations.get(node.name or "")
    if (
        accumulated is not None
        and node.op_type in REDUCTIONS
        and accumulated.max_sum > ctx.low_record.max
    ):
        return Decision(
            HIGH,
            "data-accumulation",
            f"data: {node.op_type} accumulates sums up to {fmt(accumulated.max_sum)} over {accumulated.terms} "
            f"terms ({_samples(ctx)}); {ctx.low_name} max {ctx.low_record.max:g}",
        )
    for j in facts.main_out:
        value = node.outputs[j]
        stats = calibration.tensor(value.name)
        if stats is None or stats.below_normal_fraction < ctx.thresholds.below_normal or not stats.below_normal:
            continue
        amplifier = feeds_amplifier(value)
        if amplifier is None:
            continue
        return Decision(
            HIGH,
            "data-underflow",
            f"data: {stats.below_normal_fraction:.0%} of the non-zero values of {value.name} are below "
            f"{ctx.low_name}'s smallest normal {fmt(ctx.low_record.smallest_normal)} ({_samples(ctx)}) and feed "
            f"{amplifier.op_type} {amplifier.name!r}, which amplifies their error",
        )
    return None


def _observed(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> list:
    """``(stats, kind, index, value)`` of each observed main slot of ``node`` whose magnitude is its own.

    Left out: a slot whose largest values a mask fill accounts for (the fill
    is stored as the type's mask value) and, on the synthetic run, one a
    constant input accounts for.
    """
    calibration = ctx.calibration
    slots = [("input", i, node.inputs[i]) for i in facts.main_in] + [
        ("output", j, node.outputs[j]) for j in facts.main_out
    ]
    # A constant's values are no data (every sample holds the same): the constant guard judged and reported
    # them (``guards``), so the data guard never speaks for them a second time.
    return [(stats, kind, index, value) for kind, index, value in slots
            if value is not None and not is_constant(value)
            and (stats := calibration.tensor(value.name)) is not None
            and not mask_fill_explains(ctx, value, stats.max_abs)
            and not (calibration.synthetic and _constant_explains(ctx, node, stats.max_abs))]


def observed_input_peak(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[float]:
    """The largest magnitude a float32 run saw in the main inputs ``node`` reads, as ``data-overflow`` reads
    them; None: none seen.

    Inputs only: what the node reads from a node of another type is cast to
    its own, while what it computes (an Attention's own mask fill) is computed
    in its type. A reduction's running sum counts too (``data-accumulation``):
    a runtime that accumulates in the node's type holds it.
    """
    if ctx.calibration is None or not facts.main_in:
        return None
    peaks = [stats.max_abs for stats, kind, *_ in _observed(ctx, node, facts) if kind == "input"]
    accumulated = ctx.calibration.accumulations.get(node.name or "")
    if accumulated is not None and node.op_type in REDUCTIONS:
        peaks.append(accumulated.max_sum)
    return max(peaks) if peaks else None


def _constant_explains(ctx: PlanContext, node: ir.Node, max_abs: float) -> bool:
    """Whether a constant input of ``node`` holds at least half of ``max_abs``: on random inputs such a magnitude
    is the constant's (the constant guard judged it), not the activations'."""
    for value in node.inputs:
        if value is not None and is_constant(value):
            stats = ctx.ranges.stats(value)
            if stats is not None and stats.max_abs >= 0.5 * max_abs:
                return True
    return False


def _synthetic_speaks(ctx: PlanContext, node: ir.Node) -> bool:
    """Whether the default synthetic run's figures judge ``node``.

    Not a black op (the level table keeps it float32 anyway), and not a node
    reading a constant the constant guard clamps or stores as a mask fill:
    the float32 run saw the unclamped value, which the converted model never holds.
    """
    if ctx.policy.class_of(normalize_domain(node.domain), node.op_type) == BLACK:
        return False
    return not any(value is not None and value.name in ctx.clamp for value in node.inputs)


def mask_fill_explains(ctx: PlanContext, value: ir.Value, max_abs: float, depth: int = 4) -> bool:
    """Whether an attention-mask fill reaching ``value`` accounts for its largest magnitude ``max_abs``.

    Looks upstream through at most ``depth`` mask-path ops (``guards.MASK_PATH``)
    for a constant the guard stores as the LOW mask value: one with a mask
    fill beyond the LOW range, consumed by an op that feeds a softmax. A fill
    of -3.4e38 makes every masked score about -3.4e38, so a magnitude of at
    least half the fill is the fill's, not the scores'. The scores the fill is
    added to must themselves stay within the guard: then every value of
    ``value`` does, but the fill's.
    """
    for producer, source in bounded_sources(value, lambda through: through.op_type in MASK_PATH, depth):
        if not is_constant(source):
            continue
        stats = ctx.ranges.stats(source)
        fill = stats.mask_fill if stats is not None else None
        if fill is not None and abs(fill) > ctx.low_record.max and abs(fill) >= 0.5 * max_abs:
            return feeds_softmax(producer) and _scores_within_guard(ctx, producer)
    return False


def _scores_within_guard(ctx: PlanContext, node: ir.Node) -> bool:
    """Whether every observed non-constant input of ``node`` (the scores a mask is added to) is within the guard."""
    for source in node.inputs:
        if source is None or is_constant(source):
            continue
        stats = ctx.calibration.tensor(source.name)
        if stats is not None and stats.max_abs > ctx.thresholds.max_abs:
            return False
    return True


def _lowered_again(ctx: PlanContext, node: ir.Node, max_abs: float) -> bool:
    """The accuracy search lowered ``node`` across the margin, and the margin is all that kept it.

    Checked here again, not trusted from the pin: real overflow (over the LOW
    maximum) and a threshold the user set (``--data-max``) are never released.
    """
    return (
        (node.name or "") in ctx.tune_pins.released
        and ctx.options.data_max is None
        and max_abs <= ctx.low_record.max
    )


def _samples(ctx: PlanContext) -> str:
    calibration = ctx.calibration
    if calibration.synthetic:
        return "the synthetic float32 run (1 seeded random sample; --calibration-data gives real ones)"
    text = f"{calibration.samples} sample{'s' if calibration.samples != 1 else ''}"
    return f"{text}, random data" if calibration.random else text


ACCURACY_PIN = builtin(Rule("data-tune", DATA, "--tune: the accuracy search found this node's LOW rounding fails "
                            "validation", decide=accuracy_pin, applies=lambda ctx, op: bool(ctx.tune_pins.kept)))
ACTIVATION_RANGE = builtin(Rule(
    "data-overflow", DATA, "calibration data: an input or output exceeds the LOW range (with margin)",
    decide=activation_range, applies=lambda ctx, op: ctx.calibration is not None,
    also=(Rule("data-accumulation", DATA, "calibration data: a reduction's running sum exceeds the LOW range"),
          Rule("data-underflow", DATA, "calibration data: an output mostly below the LOW normal range feeds an "
               "error amplifier")),
))
