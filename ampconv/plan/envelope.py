"""The input envelope: how far each float graph input may grow before a LOW node overflows, and acting on it.

No converter can know an input's range without data; a float32 run (the
synthetic run's seeded sample, or calibration data) and the degree analysis
(``plan.degrees``) know where the converted model stops holding. The run saw
input ``u`` at ``|u| = a`` and a value ``v`` at ``|v| = m``; ``v`` grows as
``|u| ** d``, so it passes the LOW maximum at ``|u| = a * (max / m) ** (1/d)``.
A value that grows exponentially (``exp`` of a value ``t`` of degree ``d``)
passes it once ``t``'s largest magnitude, grown by ``s ** d``, exceeds
``ln(max)`` less what the value adds to the exponential (a sum of ``exp``
passes sooner than one ``exp``): logits straight into ``Exp`` hold to
``|logits| <= ln(65504) = 11.09`` in float16. An exponent the run saw at or
below 0 everywhere (a softmax's ``x - max``) never passes it; a value the run
saw at 0 never grows. Where the degree analysis bounds a value for every
input (its ``gain``: a sum over pixels), that bound counts too. A value that
vanishes instead (a softmax of a growing input) limits the envelope where an
op that turns a 0 into an infinity reads it (``Log``, a divisor) and its
smallest entry flushes below the LOW type's smallest subnormal (``vanishes_at``).

``input_envelope`` reads the finished plan: for each float input (not a
KV-cache past: the model's own numbers), the smallest such magnitude over the
LOW nodes' LOW values, and the node that limits it. The envelope is an
estimate: it errs low where a value adds a constant to a growing one (counted
as if all of it grew), but past a layer with learned weights it speaks for
inputs like the run's sample, whose entries are independent; entries that
move together (raw log-mel frames, pixels of one colour) add up further for
the same largest magnitude, and can overflow inside it (tests/blind/settled.py
holds such a case: 16.1 said, 14.3 reached). An input that reaches no LOW
value that can overflow gets no entry (its envelope is unbounded).

Rule ``data-envelope`` acts on it: where the user said how far an input
reaches (``--input-range``, ``Calibration.reach``), a node whose values the
run extrapolates past the LOW maximum within that reach runs in the fallback
type (float32, or bf16 with ``fallback_dtype="bf16"``).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Mapping, Optional, Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import bounded_uses
from ampconv.plan.context import PlanContext
from ampconv.plan.data_guards import mask_fill_explains
from ampconv.plan.decision import Decision
from ampconv.plan.degrees import EXPONENTIAL, Growth, InputDegrees, Structure
from ampconv.plan.evidence import reduced_extent
from ampconv.plan.facts import NodeFacts
from ampconv.plan.provenance import user_inputs
from ampconv.plan.rules import DATA, Rule, builtin
from ampconv.plan.values import constant_array, is_constant, is_float
from ampconv.policy import HIGH, LOW
from ampconv.policy.lists import BLACK
from ampconv.runtime.schema import normalize_domain


# Ops that turn a 0 into an infinity (input slots; Pow only with a negative exponent), and the data movement
# between a vanishing value and them.
_ZERO_AMPLIFIERS = {"Log": (0,), "Div": (1,), "Reciprocal": (0,), "Pow": (0,)}
_MOVING = frozenset({"Identity", "Cast", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Slice",
                     "Gather", "Concat"})


@dataclasses.dataclass(frozen=True)
class EnvelopeEntry:
    """Input ``input`` may reach ``|input| <= holds_to`` before ``limited_by``'s ``tensor`` overflows the LOW type.

    ``sample_max``: the largest ``|input|`` the float32 run saw; ``reach``: how
    far the user said it goes (``--input-range``), None when not said;
    ``acted``: the nodes rule ``data-envelope`` put in the fallback type for it.
    """

    input: str
    holds_to: float
    limited_by: str
    op_type: str
    tensor: str
    sample_max: float
    reach: Optional[float] = None
    acted: int = 0

    def record(self) -> Dict[str, object]:
        """The report's entry (``"envelope"``)."""
        return {"input": self.input, "holds_to": round(self.holds_to, 6), "limited_by": self.limited_by,
                "op_type": self.op_type, "tensor": self.tensor, "sample_max": round(self.sample_max, 6),
                "reach": self.reach, "acted": self.acted}


def degrees(ctx: PlanContext) -> InputDegrees:
    """The degree analysis of the main graph in each float input the user feeds (not a KV-cache past); once."""
    found = ctx.memo.get("input_degrees")
    if found is None:
        sources = [v for v in user_inputs(ctx) if is_float(v)]  # float32 inputs: the ones the plan converts
        structure = Structure(lambda node: reduced_extent(ctx, node), ctx.shapes)
        found = ctx.memo["input_degrees"] = InputDegrees(ctx.model.graph, sources, structure)
    return found


def holds_to(ctx: PlanContext, name: str, value: Optional[ir.Value]) -> Optional[float]:
    """The largest ``|input name|`` at which ``value`` stays inside the LOW range, by the run's figures.

    None when the run cannot say: ``value`` does not grow with the input, was
    not observed, is already not finite in float32, or holds a mask fill the
    guard stores as the LOW type's own; ``inf`` when it never passes the maximum.
    """
    calibration = ctx.calibration
    growth = degrees(ctx).growth(name, value)
    source = calibration.tensor(name) if calibration is not None else None
    stats = calibration.tensor(value.name) if growth is not None and source is not None else None
    if stats is None or stats.nonfinite or source.max_abs <= 0:
        return None
    if mask_fill_explains(ctx, value, stats.max_abs):
        return None
    limit = ctx.low_record.max
    if growth.degree == EXPONENTIAL:
        return _exponential_limit(ctx, growth, stats.max_abs, source.max_abs, limit)
    seen = math.inf if stats.max_abs == 0 else source.max_abs * (limit / stats.max_abs) ** (1.0 / growth.degree)
    # A value the input reaches through structure alone is bounded for every input, not only the sample's kind.
    bound = (limit / growth.gain) ** (1.0 / growth.degree) if growth.gain is not None else math.inf
    return min(seen, bound)


def _exponential_limit(ctx: PlanContext, growth: Growth, seen: float, sample: float, limit: float) -> float:
    """``holds_to`` of a value ``~ r * exp(t)`` whose exponent ``t`` grows as ``|u| ** exponent_degree``."""
    exponent = ctx.calibration.tensor(growth.exponent.name) if growth.exponent is not None else None
    if exponent is None or exponent.nonfinite or not math.isfinite(exponent.max_value):
        return sample  # no exponent to extrapolate: it holds where the run saw it, no further
    top = exponent.max_value
    if top <= 0:
        return math.inf  # exp of values that stay <= 0 (a softmax's x - max): at most 1 for any input
    room = math.log(limit) - (math.log(seen) - top if seen > 0 else 0.0)
    # Another input of the same magnitude may turn the exponent's largest magnitude positive: grown from there.
    return sample * (max(room, 0.0) / exponent.max_abs) ** (1.0 / growth.exponent_degree)


def vanishes_at(ctx: PlanContext, name: str, value: ir.Value) -> Optional[float]:
    """The ``|input name|`` past which ``value``'s smallest entries flush to 0 in LOW before an op that turns a 0
    into an infinity (``Log``, a divisor); None when it does not vanish so, or the run cannot say.

    The run saw its smallest non-zero entry at ``p < 1``; it shrinks like ``p ** (s ** d)`` as the input
    grows by ``s`` (a softmax's ``exp(-spread)``), and flushes below the LOW type's smallest subnormal.
    """
    calibration = ctx.calibration
    found = degrees(ctx).vanishing.get(name, {}).get(value)
    if found is None or calibration is None or _zero_amplifier(value) is None:
        return None
    stats, source = calibration.tensor(value.name), calibration.tensor(name)
    if stats is None or source is None or source.max_abs <= 0 or not 0 < stats.min_nonzero_abs < 1:
        return None
    tiny = ctx.low_record.smallest_subnormal
    return source.max_abs * (math.log(tiny) / math.log(stats.min_nonzero_abs)) ** (1.0 / found[1])


def _zero_amplifier(value: ir.Value) -> Optional[ir.Node]:
    """The op that turns a 0 of ``value`` into an infinity, reached through data movement only (an ``Add`` of an
    epsilon or a ``Max`` guards it); None when there is none."""
    for use in bounded_uses([value], lambda through: is_default(through) and through.op_type in _MOVING, 4):
        if use.node.inputs[use.idx] in _amplified(use.node):
            return use.node
    return None


def _amplified(node: ir.Node) -> Tuple[ir.Value, ...]:
    """The inputs of ``node`` it turns into an infinity where they are 0 (``Pow`` only with a negative exponent)."""
    slots = _ZERO_AMPLIFIERS.get(node.op_type, ()) if is_default(node) else ()
    if node.op_type == "Pow" and slots:
        exponent = node.inputs[1] if len(node.inputs) > 1 else None
        array = constant_array(exponent) if exponent is not None and is_constant(exponent) else None
        if array is None or not (array < 0).any():
            return ()
    return tuple(node.inputs[i] for i in slots if i < len(node.inputs) and node.inputs[i] is not None)


def node_limit(ctx: PlanContext, node: ir.Node, facts: NodeFacts, name: str) -> Optional[Tuple[float, ir.Value]]:
    """The smallest ``holds_to`` (or ``vanishes_at``, for what it makes) over ``node``'s main values for input
    ``name``, and the value; None if none limits."""
    if any(v is not None and v.name in ctx.clamp for v in node.inputs):
        return None  # the run saw the constant unclamped; the converted model never holds it
    worst = None
    # A vanishing value flushes where it is made in LOW, or where an amplifier reads it cast down to LOW.
    flushed = set(node.outputs[j] for j in facts.main_out) | set(_amplified(node))
    for value in [node.inputs[i] for i in facts.main_in] + [node.outputs[j] for j in facts.main_out]:
        limits = [holds_to(ctx, name, value)] if value is not None else []
        if value is not None and value in flushed:
            limits.append(vanishes_at(ctx, name, value))
        for limit in limits:
            if limit is not None and (worst is None or limit < worst[0]):
                worst = (limit, value)
    return worst


def input_envelope(ctx: PlanContext, decisions: Mapping[ir.Node, Decision],
                   facts: Mapping[ir.Node, NodeFacts]) -> Optional[Tuple[EnvelopeEntry, ...]]:
    """The envelope of the finished plan (None without a float32 run): one entry per input a LOW node limits."""
    calibration = ctx.calibration
    if calibration is None:
        return None
    entries: List[EnvelopeEntry] = []
    acted = [node for node, decision in decisions.items() if decision.rule == "data-envelope" and node in facts]
    for name in degrees(ctx).by_input:
        source = calibration.tensor(name)
        if source is None:
            continue
        worst = None
        for node in ctx.model.graph:
            decision = decisions.get(node)
            if decision is None or decision.precision != LOW or node not in facts:
                continue
            found = node_limit(ctx, node, facts[node], name)
            if found is not None and math.isfinite(found[0]) and (worst is None or found[0] < worst[0]):
                worst = (found[0], node, found[1])
        if worst is not None:
            limit, node, value = worst
            reach = calibration.reach.get(name)
            moved = sum(1 for each in acted if reach is not None
                        and (found := node_limit(ctx, each, facts[each], name)) is not None and found[0] < reach)
            entries.append(EnvelopeEntry(name, limit, node.name or "", node.op_type, value.name or "",
                                         source.max_abs, reach, moved))
    return tuple(entries)


def beyond_reach(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``data-envelope``: a value of ``node`` the run extrapolates past the LOW maximum within an input's reach."""
    if ctx.calibration is None or not ctx.calibration.reach:
        return None  # the rule's ``applies``, restated: no run, or no reach the user gave
    if ctx.policy.class_of(normalize_domain(node.domain), node.op_type) == BLACK:
        return None  # the level table keeps it float32 anyway
    for name, reach in sorted(ctx.calibration.reach.items()):
        found = node_limit(ctx, node, facts, name)
        if found is None or not found[0] < reach:
            continue
        limit, value = found
        growth = degrees(ctx).growth(name, value)
        grows = "exponentially" if growth.degree == EXPONENTIAL else f"as |{name}|^{growth.degree:g}"
        return Decision(
            HIGH, "data-envelope",
            f"data: input {name} reaches |{name}| = {reach:g} (--input-range); {value.name} grows "
            f"{grows} and passes {ctx.low_name}'s max {ctx.low_record.max:g} beyond |{name}| = {limit:.3g} "
            f"(the {'synthetic ' if ctx.calibration.synthetic else ''}float32 run saw |{name}| up to "
            f"{ctx.calibration.tensor(name).max_abs:.3g})",
        )
    return None


ENVELOPE = builtin(Rule(
    "data-envelope", DATA, "an input range the user gave reaches beyond where the float32 run's figures keep this "
    "node's values inside the LOW range", decide=beyond_reach,
    applies=lambda ctx, op: ctx.calibration is not None and bool(ctx.calibration.reach),
))


__all__ = ["ENVELOPE", "EnvelopeEntry", "beyond_reach", "degrees", "holds_to", "input_envelope", "node_limit"]
