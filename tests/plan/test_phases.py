"""Issue 36: the planner's decisions are phase objects that say what they require and ensure; the driver orders them."""

from __future__ import annotations

import pytest

from ampconv.plan.driver import PHASES
from ampconv.plan.phases import Phase, missing_requirements, run_phases
from ampconv.plan.phases.facts import NODES_DECIDED


def test_the_driver_runs_every_phase_after_what_it_requires():
    assert missing_requirements(PHASES) == []
    ensured = set().union(*(phase.ensures for phase in PHASES))
    assert set().union(*(phase.requires for phase in PHASES)) <= ensured


def test_an_order_that_runs_a_phase_too_early_is_refused():
    """Negative: the outputs decided before the nodes are, or the slots fixed before the outputs, are refused."""
    swapped = list(PHASES)
    swapped[1], swapped[4] = swapped[4], swapped[1]  # DecideOutputs before DecideGraphs
    missing = missing_requirements(swapped)
    assert missing and type(missing[0][0]).__name__ == "DecideOutputs" and NODES_DECIDED in missing[0][1]
    with pytest.raises(ValueError, match="DecideOutputs runs before what it requires"):
        run_phases(swapped, state=None)


def test_every_phase_ensures_something_and_runs_once():
    assert all(phase.ensures for phase in PHASES)
    assert len({type(phase) for phase in PHASES}) == len(PHASES)
    assert all(isinstance(phase, Phase) for phase in PHASES)
