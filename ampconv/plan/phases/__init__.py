"""The planner's phases: each decides one kind of thing, says what it needs done before it and what it ensures.

After onnx-ir's passes (``requires``/``call``/``ensures``): a ``Phase`` names
the facts it requires of the plan so far and the facts it ensures, and
``run_phases`` runs a sequence of them, refusing an order in which a phase
would run before what it requires. The driver (``ampconv.plan.driver``) only
orders them (``PHASES``):

- ``DecideInputs`` (``inputs.py``): the main graph's float inputs and which
  outputs ``keep_io_types`` keeps (rules ``io-*``);
- ``DecideGraphs`` (``graphs.py``): the rule table over every node, If/Loop/Scan
  through their subgraphs (``structural.py``, rule ``structural``), and the
  backward pass of each graph (``ampconv.plan.gray``);
- ``ShareWeights`` (``weights.py``): a transparent reader of a weight others need
  LOW reads the LOW copy (``transparent-shared``, ``transparent-weight``);
- ``NamePatterns``, ``FallbackRefused`` (``warnings.py``): the plan's warnings
  about the user's name patterns and the fallback type's opset;
- ``DecideOutputs`` (``outputs.py``): the main graph's outputs that
  ``keep_io_types`` leaves free;
- ``FinalizeSlots`` (``finalize.py``): each node's ``NodePlan``: its final
  decision and what each slot needs, for the rewrite;
- ``InputEnvelope`` (``envelope.py``): how far each float input may grow
  before a LOW node overflows, read off the float32 run (``plan.envelope``).
"""

from __future__ import annotations

from typing import FrozenSet, Sequence

from ampconv.plan.state import PlanState


class Phase:
    """One step of planning (a subclass per phase).

    Attributes:
        requires: the facts of the plan that must hold before it runs.
        ensures: the facts that hold after it ran.
    """

    requires: FrozenSet[str] = frozenset()
    ensures: FrozenSet[str] = frozenset()

    def run(self, state: PlanState) -> None:
        """Decide what this phase decides, in ``state``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return type(self).__name__


def missing_requirements(phases: Sequence[Phase]) -> list:
    """``(phase, facts it requires that no earlier phase ensures)`` for each phase run too early."""
    done: set = set()
    missing = []
    for phase in phases:
        lacking = phase.requires - done
        if lacking:
            missing.append((phase, sorted(lacking)))
        done |= phase.ensures
    return missing


def run_phases(phases: Sequence[Phase], state: PlanState) -> None:
    """Run ``phases`` in order over ``state``; an order that runs a phase before what it requires is refused."""
    missing = missing_requirements(phases)
    if missing:
        phase, lacking = missing[0]
        raise ValueError(f"planner phase {phase!r} runs before what it requires: {', '.join(lacking)}")
    for phase in phases:
        phase.run(state)
