"""Phase ``InputEnvelope``: how far each float graph input may grow before a LOW node overflows (``plan.envelope``)."""

from __future__ import annotations

from ampconv.plan.envelope import input_envelope
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import ENVELOPE_STATED, SLOTS_FIXED
from ampconv.plan.state import PlanState


class InputEnvelope(Phase):
    """The input envelope of the final decisions, read off the float32 run's figures (None without a run)."""

    requires = frozenset({SLOTS_FIXED})
    ensures = frozenset({ENVELOPE_STATED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        decided = {node: node_plan.decision for node, node_plan in state.nodes.items()}
        state.envelope = input_envelope(state.ctx, decided, state.facts)
