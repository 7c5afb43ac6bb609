"""Rule family ``gray``, and the backward pass that settles what it leaves open (docs/precision.md sec. 3-4).

Forward (``gray``): the voters are the float activations feeding the node's
main type (constants never vote; converting them is free).
  1. no voters -> FREE, decided by consumers in the backward pass;
  2. voters agree -> follow them;
  3. voters disagree -> float32 (up-casting the LOW input is exact), unless
     every float32 voter is bounded by its op's semantics (``bounds``: a
     cos/sin table, a softmax): its values fit the LOW type, casting them down
     costs one rounding like any LOW result, and the node follows LOW.
     With a fallback type (``plan.fallback``): voters LOW and FALLBACK only
     (float16 and bfloat16) -> FALLBACK, which holds both ranges (one direct
     cast of the float16 input), unless a float32 run saw every FALLBACK
     voter inside the LOW range (``fallback.seen_within_low``): then LOW, the
     bfloat16 input cast down (``gray-narrow``), keeping float16's precision.
     A node following FALLBACK whose schema does not take it runs float32.
  A float32 voter that a range guard pinned but whose output fits the LOW
  type by evidence (``plan.handoff``: calibration data, the synthetic run
  where it speaks, a semantic bound) counts as LOW in cases 2 and 3: the node
  runs LOW (``gray-handed``) and the pinned node's output is cast down once.
Backward (``backward``), in reverse order:
  4. a FREE node becomes LOW iff every float consumer is LOW (FALLBACK iff every
     one is FALLBACK and its schema takes it), else float32;
  5. a float32 transparent gray node (data movement) becomes LOW iff every
     float consumer is LOW (FALLBACK likewise): the cast moves upstream, same bits;
  6. a FREE QuantizeLinear (no float outputs) becomes LOW, so a Q/DQ region
     settles LOW between its pairs (Q/DQ at opset 19+);
  7. a ``gray-handed`` node whose every float consumer needs float32 takes the
     seed decision again (its voters' float32): LOW there would cost a cast pair;
  8. a node LOW by following whose every float consumer needs float32 runs
     float32 when that costs fewer casts: its LOW inputs are cast up for another
     reader already, and its own outputs then need no cast (``gray-sink``).
Otherwise a compute node is never flipped by its consumers.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional, Protocol, Sequence

import onnx_ir as ir

from ampconv.plan import fallback
from ampconv.plan.bounds import semantic_bound
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import FREE, Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import BACKWARD, GRAY as GRAY_FAMILY, Rule, builtin
from ampconv.plan.values import is_constant, origin
from ampconv.policy import HIGH, LOW
from ampconv.runtime.schema import normalize_domain


def gray(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Cases 1-3 above; always decides (it is the last rule of the table)."""
    return vote(ctx, node, facts, ctx.handed)


def vote(ctx: PlanContext, node: ir.Node, facts: NodeFacts, handed: Mapping[ir.Value, str]) -> Decision:
    """Cases 1-3, a float32 voter in ``handed`` (``plan.handoff``) counting as LOW (rule ``gray-handed``)."""
    voted: Optional[str] = None  # the first voter's precision, and the voter
    voter: Optional[ir.Value] = None
    via: Optional[ir.Value] = None  # the first float32 voter that hands on LOW
    values, inputs = ctx.values, node.inputs
    for i in facts.main_in:
        value = inputs[i]
        # Undecided first: a cheap look-up that skips most weights before the constant test.
        precision = values.get(value)
        if precision is None or precision == FREE or is_constant(value):
            continue
        if handed and precision == HIGH and value in handed:
            precision, via = LOW, via or value
        if voter is None:
            voted, voter = precision, value
        elif precision != voted:  # case 3
            return _disagreement(ctx, node, facts, handed)
    if voter is None:  # case 1
        return Decision(FREE, "gray-free", "gray: no activation inputs; follows its consumers")
    source = origin(voter)  # case 2
    if via is not None:
        return _handed_low(ctx, via, voter)
    if voted == fallback.FALLBACK and not fallback.admits(ctx, facts):
        return Decision(HIGH, "gray-follow", f"gray: follows {source} ({_refused(ctx, node)})", follows=source)
    return Decision(voted, "gray-follow", f"gray: follows {source}", follows=source)


def _handed_low(ctx: PlanContext, via: ir.Value, voter: ir.Value) -> Decision:
    """LOW because the float32 voter ``via`` hands on LOW (``plan.handoff``); ``voter`` is the first voter."""
    source = origin(voter)
    maker = via.producer()
    return Decision(
        LOW, "gray-handed",
        f"gray: follows {source}; float32 {maker.name if maker is not None else 'input'} hands on "
        f"{via.name or '?'} in {ctx.low_name} ({ctx.handed.get(via) or 'it fits'}): cast down, not followed",
        follows=source,
    )


def _refused(ctx: PlanContext, node: ir.Node) -> str:
    """Why a node following the fallback type runs float32: its schema does not take that type."""
    return (f"{ctx.fallback.key}, which {node.op_type} does not take at opset "
            f"{ctx.opsets.get(normalize_domain(node.domain), 1)}; float32")


def _disagreement(ctx: PlanContext, node: ir.Node, facts: NodeFacts, handed: Mapping[ir.Value, str]) -> Decision:
    """Case 3: float32, unless every float32 voter is bounded by semantics (then LOW, rule ``gray-narrow``) or
    hands on LOW (``plan.handoff``: then LOW, rule ``gray-handed``)."""
    low_voter, narrowed, kinds, via = None, [], set(), None
    for i in facts.main_in:
        value = node.inputs[i]
        precision = ctx.values.get(value)
        if precision is None or precision == FREE or is_constant(value):
            continue
        if handed and precision == HIGH and value in handed:
            via = via or value
            continue  # counts as LOW, but is never the voter followed
        if precision in (LOW, fallback.FALLBACK):
            low_voter = low_voter or value
            kinds.add(precision)
            continue
        bound = semantic_bound(value)
        if bound is None or bound >= ctx.low_record.max:
            return Decision(HIGH, "gray-promote", "gray: inputs disagree; promoted to float32")
        narrowed.append((value, bound))
    if via is not None:
        kinds.add(LOW)
        low_voter = low_voter or via
    if fallback.FALLBACK in kinds:
        seen = fallback.seen_within_low(ctx, [node.inputs[i] for i in facts.main_in]) if LOW in kinds else None
        if seen is not None:  # the run saw the fallback inputs well inside the LOW range: keep LOW's precision
            value, peak = seen
            source = origin(low_voter)
            return Decision(
                LOW, "gray-narrow",
                f"gray: follows {source}; {ctx.fallback.key} input {value.name or '?'} was seen at "
                f"max |x| = {peak:.3g}, inside {ctx.low_name}'s range: cast down, not promoted", follows=source)
        return _to_fallback(ctx, node, facts, narrowed)
    if not narrowed and via is not None:  # every float32 voter hands on LOW
        return _handed_low(ctx, via, low_voter)
    value, bound = narrowed[0]
    source = origin(low_voter)
    return Decision(
        LOW, "gray-narrow",
        f"gray: follows {source}; float32 input {value.name or '?'} is bounded by |x| <= {bound:g} "
        f"({_maker(value)}): cast down, not promoted",
        follows=source,
    )


def _to_fallback(ctx: PlanContext, node: ir.Node, facts: NodeFacts, narrowed: list) -> Decision:
    """Case 3 with a FALLBACK voter: every other voter is LOW or bounded, so the fallback type holds them all."""
    if not fallback.admits(ctx, facts):
        return Decision(HIGH, "gray-promote", f"gray: inputs disagree; promoted to float32 ({_refused(ctx, node)})")
    if narrowed:
        value, bound = narrowed[0]
        return Decision(fallback.FALLBACK, "gray-narrow",
                        f"gray: follows its {ctx.fallback.key} inputs; float32 input {value.name or '?'} "
                        f"is bounded by |x| <= {bound:g} ({_maker(value)}): cast down, not promoted")
    return Decision(fallback.FALLBACK, "gray-promote",
                    f"gray: inputs {ctx.low} and {ctx.fallback.key} disagree; promoted to "
                    f"{ctx.fallback.key}, which holds both ranges (one direct cast, not via float32)")


def _maker(value: ir.Value) -> str:
    producer = value.producer()
    return producer.op_type if producer is not None else "input"


class BackwardState(Protocol):
    """What the backward pass reads from and writes to the planner."""

    ctx: PlanContext
    decisions: dict
    facts: dict
    structural_slots: dict

    def consumer_needs(self, node: ir.Node, facts: NodeFacts) -> List[str]: ...  # noqa: D102

    def slot_need(self, node: ir.Node, index: int) -> Optional[str]: ...  # noqa: D102

    def value_precision(self, value: ir.Value) -> str: ...  # noqa: D102

    def set_decision(self, node: ir.Node, decision: Decision) -> None: ...  # noqa: D102


_FOLLOWERS = ("gray-follow", "gray-promote")
_QUANTIZE_LOW = ("free: a QuantizeLinear has no float consumers and its schema takes the LOW type (opset 19+): "
                 "the float ops between a DequantizeLinear and it run LOW, as TensorRT's strongly typed mode expects")


def _quantizes(node: ir.Node) -> bool:
    """A default-domain QuantizeLinear (FREE only when the hard rules found its schema admits the LOW type)."""
    return node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx")  # the gray rule's float32 decisions (case 5 may flip them)


def may_settle(decision: Decision) -> bool:
    """Whether ``backward`` may change a node whose forward decision is ``decision``: FREE, float32 by the gray
    rule, LOW only because a float32 voter hands on LOW (case 7), or LOW by following (case 8)."""
    return decision.precision == FREE or (decision.precision == HIGH and decision.rule in _FOLLOWERS) \
        or decision.rule == "gray-handed" or (decision.precision == LOW and decision.rule == "gray-follow")


def backward(state: BackwardState, order: Sequence[ir.Node]) -> None:
    """Cases 4-8 above over ``order``: one graph's nodes, topological; those ``may_settle`` passes suffice."""
    for node in reversed(order):
        if node in state.structural_slots:
            continue
        decision = state.decisions[node]
        facts = state.facts.get(node)
        if facts is None or not facts.main_out:
            if decision.precision == FREE and _quantizes(node):  # case 6
                state.set_decision(node, Decision(LOW, "free-low", _QUANTIZE_LOW))
            elif decision.precision == FREE:
                state.set_decision(node, Decision(HIGH, "gray-free", "gray: no activation inputs and no float outputs"))
            continue
        if decision.rule == "gray-handed":  # case 7
            _keep_handed(state, node, facts)
            continue
        if decision.precision == LOW and decision.rule == "gray-follow":  # case 8
            sink = _sinks(state, node, facts)
            if sink is not None:
                state.set_decision(node, sink)
            continue
        flippable = decision.precision == FREE or (
            decision.precision == HIGH
            and decision.rule in _FOLLOWERS
            and facts.op.kind == "transparent"
        )
        if not flippable:
            continue
        needs = state.consumer_needs(node, facts)
        target = _shared_low(state.ctx, facts, needs)
        word = state.ctx.fallback.key if target == fallback.FALLBACK else target
        if decision.precision == FREE:  # case 4
            if target is not None:
                state.set_decision(node, Decision(target, "free-low", f"free: all float consumers are {word}"))
            else:
                state.set_decision(node, Decision(HIGH, "free-high", "free: a consumer needs float32"))
        elif target is not None:  # case 5
            state.set_decision(node, Decision(
                target, "transparent-low", f"transparent: all consumers {word}; cast moved upstream (same bits)"))


def _keep_handed(state: BackwardState, node: ir.Node, facts: NodeFacts) -> None:
    """Case 7: a node LOW by what a float32 voter hands on goes back to the seed rule when every float consumer
    needs float32 and that costs fewer casts: run LOW, it costs a cast down of each handed value and a cast up
    of its output (none when only the graph's float32 interface reads it: every LOW conversion pays that one);
    run float32, a cast up of each LOW voter."""
    needs = state.consumer_needs(node, facts)
    if not needs or any(need != HIGH for need in needs):
        return
    ctx, voters = state.ctx, {node.inputs[i] for i in facts.main_in}
    precisions = [ctx.values.get(v) for v in voters if v is not None and not is_constant(v)]
    handed = sum(1 for v in voters if v is not None and v in ctx.handed and ctx.values.get(v) == HIGH)
    read_inside = any(node.outputs[j].uses() for j in facts.main_out)
    if precisions.count(LOW) >= handed + read_inside:
        return  # float32 here would cast up as many values as LOW casts, or more
    seed = vote(ctx, node, facts, {})
    if seed.precision == HIGH:
        state.set_decision(node, dataclasses.replace(
            seed, reason=f"{seed.reason}; a float32 voter hands on {state.ctx.low_name}, but every float consumer "
                         "needs float32: LOW here would cost a cast pair"))


def _sinks(state: BackwardState, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Case 8: a node LOW only by following, whose every float consumer needs float32, runs float32 when that
    costs fewer casts: LOW, each of its outputs is cast up for its readers; float32, each LOW activation input
    is cast up, unless another reader needs it float32 already (the cast exists: this node reads it too).
    Running float32 never loses accuracy; what decides is the casts (a HardSwish written x * Clip(x + 3)
    / 6 whose Clip has no LOW kernel: the Add reads the cast of x the Mul already needs)."""
    needs = state.consumer_needs(node, facts)
    if not needs or any(need != HIGH for need in needs):
        return None
    saved = sum(1 for j in facts.main_out if node.outputs[j].uses() or node.outputs[j].is_graph_output())
    added = 0
    for value in {node.inputs[i] for i in facts.main_in}:
        if value is None or is_constant(value) or state.value_precision(value) != LOW:
            continue
        if not any(use.node is not node and state.slot_need(use.node, use.idx) == HIGH for use in value.uses()):
            added += 1
    if added >= saved:
        return None
    return Decision(HIGH, "gray-sink", f"gray: every float consumer needs float32 and its {state.ctx.low_name} "
                    "inputs are cast up for another reader already: float32 here saves a cast")


def _shared_low(ctx: PlanContext, facts: NodeFacts, needs: List[str]) -> Optional[str]:
    """LOW when every need is LOW; FALLBACK when every one is FALLBACK and the schema takes it; else None."""
    if not needs:
        return None
    first = needs[0]
    if first not in (LOW, fallback.FALLBACK) or any(n != first for n in needs):
        return None
    if first == fallback.FALLBACK and not fallback.admits(ctx, facts):
        return None
    return first


GRAY_RULE = builtin(Rule(
    "gray-follow", GRAY_FAMILY, "gray op: follows the precision of its activation inputs", decide=gray,
    also=(Rule("gray-promote", GRAY_FAMILY, "gray op: its activation inputs disagree, so it runs in float32"),
          Rule("gray-narrow", GRAY_FAMILY, "gray op whose float32 voters are bounded by their op's semantics (cos, "
               "sin, softmax): they are cast down and the op follows its LOW inputs"),
          Rule("gray-free", GRAY_FAMILY, "gray op without activation inputs: decided by its consumers"),
          Rule("gray-handed", GRAY_FAMILY, "gray op whose float32 voters are pinned nodes whose outputs fit the LOW "
               "type by evidence (plan/handoff.py): they hand on LOW, cast down once, and the op runs LOW")),
))
# Decided by ``backward`` after the forward pass (no ``decide``: the pass above is their decision).
BACKWARD_RULES = tuple(builtin(rule) for rule in (
    Rule("free-low", BACKWARD, "decided by consumers: every float consumer is LOW"),
    Rule("free-high", BACKWARD, "decided by consumers: a consumer needs float32"),
    Rule("transparent-low", BACKWARD, "data movement whose consumers are all LOW: the cast moves upstream (same "
         "bits)"),
    Rule("gray-sink", BACKWARD, "gray op LOW by following whose consumers all need float32 and whose LOW inputs "
         "are cast up for another reader already: float32 saves a cast"),
))
