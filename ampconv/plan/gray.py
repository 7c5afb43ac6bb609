"""Rule family ``gray``, and the backward pass that settles what it leaves open (docs/precision.md sec. 3-4).

Forward (``gray``): the voters are the float activations feeding the node's
main type (constants never vote; converting them is free).
  1. no voters -> FREE, decided by consumers in the backward pass;
  2. voters agree -> follow them;
  3. voters disagree -> float32 (up-casting the LOW input is exact).
Backward (``backward``), in reverse order:
  4. a FREE node becomes LOW iff every float consumer is LOW, else float32;
  5. a float32 transparent gray node (data movement) becomes LOW iff every
     float consumer is LOW: the cast moves upstream, same bits.
A compute node is never flipped by its consumers.
"""

from __future__ import annotations

from typing import List, Optional, Protocol, Sequence, Tuple

import onnx_ir as ir

from ampconv.plan.context import PlanContext
from ampconv.plan.decision import FREE, Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.values import is_constant, origin
from ampconv.policy import HIGH, LOW
from ampconv.policy.lists import behaviour_kind
from ampconv.schema import normalize_domain


def gray(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Cases 1-3 above; always decides (it is the last rule of the table)."""
    votes: List[Tuple[str, str]] = []
    for i in facts.main_in:
        value = node.inputs[i]
        if is_constant(value):
            continue
        precision = ctx.values.get(value)
        if precision is None or precision == FREE:
            continue
        votes.append((precision, origin(value)))
    if not votes:  # case 1
        return Decision(FREE, "gray-free", "gray: no activation inputs; follows its consumers")
    if len({p for p, _ in votes}) == 1:  # case 2
        return Decision(votes[0][0], "gray-follow", f"gray: follows {votes[0][1]}", follows=votes[0][1])
    return Decision(HIGH, "gray-promote", "gray: inputs disagree; promoted to float32")  # case 3


class BackwardState(Protocol):
    """What the backward pass reads from and writes to the planner."""

    decisions: dict
    facts: dict
    structural_slots: dict

    def consumer_needs(self, node: ir.Node, facts: NodeFacts) -> List[str]: ...  # noqa: D102

    def set_decision(self, node: ir.Node, decision: Decision) -> None: ...  # noqa: D102


def backward(state: BackwardState, order: Sequence[ir.Node]) -> None:
    """Cases 4-5 above over one graph's nodes in ``order`` (topological)."""
    for node in reversed(order):
        if node in state.structural_slots:
            continue
        decision = state.decisions[node]
        facts = state.facts.get(node)
        if facts is None or not facts.main_out:
            if decision.precision == FREE:
                state.set_decision(node, Decision(HIGH, "gray-free", "gray: no activation inputs and no float outputs"))
            continue
        transparent = behaviour_kind(node.op_type, normalize_domain(node.domain)) == "transparent"
        flippable = decision.precision == FREE or (
            decision.precision == HIGH and decision.rule in ("gray-follow", "gray-promote") and transparent
        )
        if not flippable:
            continue
        needs = state.consumer_needs(node, facts)
        all_low = bool(needs) and all(n == LOW for n in needs)
        if decision.precision == FREE:  # case 4
            if all_low:
                state.set_decision(node, Decision(LOW, "free-low", "free: all float consumers are LOW"))
            else:
                state.set_decision(node, Decision(HIGH, "free-high", "free: a consumer needs float32"))
        elif all_low:  # case 5
            state.set_decision(
                node, Decision(LOW, "transparent-low", "transparent: all consumers LOW; cast moved upstream (same bits)")
            )
