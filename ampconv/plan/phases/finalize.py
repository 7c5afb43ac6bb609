"""Phase ``FinalizeSlots``: each node's ``NodePlan``, what the rewrite reads."""

from __future__ import annotations

from typing import Dict, Tuple

import onnx_ir as ir

from ampconv.plan.attributes import attribute_decisions
from ampconv.plan.decision import ANY, FREE, UNKNOWN, Decision, NodePlan
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import OUTPUTS_DECIDED, SLOTS_FIXED, WEIGHTS_SHARED
from ampconv.plan.state import NEEDS, PlanState
from ampconv.plan.values import is_float
from ampconv.policy import HIGH


class FinalizeSlots(Phase):
    """Fix every node's ``NodePlan``: its final decision, what each input slot needs, each output's precision.

    An input's need is ``PlanState.slot_need`` (an UNKNOWN need read as HIGH).
    For a planned node it depends only on the op, which slots are float and
    main, and the node's precision, so it is computed once per such pattern
    (``shared``): one loop over tens of thousands of nodes, kept tight.
    """

    requires = frozenset({OUTPUTS_DECIDED, WEIGHTS_SHARED})
    ensures = frozenset({SLOTS_FIXED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        shared: Dict[tuple, Tuple] = {}
        nodes, structural_slots, facts_of, values = state.nodes, state.structural_slots, state.facts, state.values
        for node, decision in state.decisions.items():
            precision = decision.precision
            if precision == FREE:  # unreachable in a well-formed graph; stay safe
                decision = Decision(HIGH, "free-high", "free: undecided; kept float32")
                state.decisions[node] = decision
                precision = HIGH
            slots = structural_slots.get(node)
            facts = facts_of.get(node) if slots is None else None
            if slots is not None:
                inputs, outputs = slots
            elif facts is None:  # not planned by the forward pass: every slot asks the general way
                inputs, outputs = _general_slots(state, node)
            else:
                # A main slot needs the node's precision; a NONE node's main slots need HIGH.
                main_need = precision if precision in NEEDS else HIGH
                key = (facts.op, facts.float_in, facts.main_in, main_need)
                inputs = shared.get(key)
                if inputs is None:
                    any_in, main_in = facts.any_in, facts.main_in
                    inputs = shared[key] = tuple([
                        None if not is_float_in else ANY if i in any_in else main_need if i in main_in else HIGH
                        for i, is_float_in in enumerate(facts.float_in)
                    ])
                outputs = tuple([
                    values.get(v) if is_float_out else None for v, is_float_out in zip(node.outputs, facts.float_out)
                ])
            nodes[node] = NodePlan(decision, inputs, outputs, attribute_decisions(node, decision))
        for value, precision in list(values.items()):
            if precision == FREE:
                values[value] = HIGH


def _general_slots(state: PlanState, node: ir.Node) -> Tuple[Tuple, Tuple]:
    """The slots of a node without facts: ``slot_need`` per input, the recorded output precisions."""
    inputs = tuple(state.slot_need(node, i) if v is not None else None for i, v in enumerate(node.inputs))
    outputs = tuple(state.values.get(v) if is_float(v) else None for v in node.outputs)
    return tuple(HIGH if n == UNKNOWN else n for n in inputs), outputs
