"""Phase ``DecideOutputs``: the main graph's float outputs (rules ``io-*``).

A kept output is float32. One ``keep_io_types`` leaves free is LOW (the user
asked for a converted interface), except where its values are known not to
fit the LOW type: casting them down would turn them into inf or 0, so it
stays float32 and the plan warns.
"""

from __future__ import annotations

import onnx_ir as ir

from ampconv.plan import interface
from ampconv.plan.decision import FREE
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import NODES_DECIDED, OUTPUT_NEEDS, OUTPUTS_DECIDED, WEIGHTS_SHARED
from ampconv.plan.ranges import misfit
from ampconv.plan.state import PlanState
from ampconv.plan.values import is_constant, is_float


class DecideOutputs(Phase):
    """Each float main-graph output's decision; the main graph's output needs become those decisions."""

    requires = frozenset({NODES_DECIDED, WEIGHTS_SHARED, OUTPUT_NEEDS})
    ensures = frozenset({OUTPUTS_DECIDED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        graph = state.ctx.model.graph
        needs = state.graph_output_needs[graph]
        outputs = [(v, interface.kept(v.name, interface.OUTPUT) if need is not None
                    else unkept_output(state, v, state.low_cache.get(v.name)))
                   for v, need in zip(graph.outputs, needs) if is_float(v)]
        state.interface.extend(made for _, made in outputs)
        made_of = dict(outputs)
        state.graph_output_needs[graph] = tuple(
            made_of[v].precision if v in made_of else None for v in graph.outputs
        )


def unkept_output(state: PlanState, value: ir.Value, cache_pair=None) -> interface.InterfaceDecision:
    """The decision on a main-graph output that keep_io_types leaves free (see the module's words)."""
    ctx = state.ctx
    if is_constant(value):
        # An initializer output (hazard 10): converting it is free, unless its
        # values do not fit the LOW type.
        stats = ctx.ranges.stats(value)
        if stats is not None and not stats.pins():
            return interface.converted(value.name, interface.OUTPUT)
        why = "its values cannot be read" if stats is None else misfit(stats, value.name or "?", ctx.low)
        state.warnings.append(f"output {value.name!r} kept float32 despite --no-keep-io-types: {why}")
        return interface.misfit_output(value.name, why)
    if value not in state.values or state.values[value] == FREE:
        return interface.undecided_output(value.name)
    why_not = state.known_misfit(value)
    if why_not is not None:
        state.warnings.append(f"output {value.name!r} kept float32 despite --no-keep-io-types: {why_not}")
        return interface.misfit_output(value.name, why_not)
    # A float32 producer (e.g. a BLACK Softmax) gets a cast down at the output.
    if cache_pair is not None:
        return interface.cache_low(value.name, interface.OUTPUT, cache_pair)
    return interface.converted(value.name, interface.OUTPUT)
