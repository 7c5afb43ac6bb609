"""Phase ``DecideInputs``: the main graph's float inputs, and the outputs ``keep_io_types`` keeps float32.

An initializer the model also lists as a graph input (a weight a caller may
feed; IR-3 exports list every weight so) is no part of the interface unless
``keep_io_types`` names it: it takes the type its readers need, with its graph
input (``passes.apply``, rule 5), and the report says so.
"""

from __future__ import annotations

from ampconv.plan import interface
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import INPUTS_DECIDED, OUTPUT_NEEDS
from ampconv.plan.state import PlanState
from ampconv.plan.values import is_float
from ampconv.policy import HIGH


class DecideInputs(Phase):
    """A LOW cache input (``kv_cache="low"``), an input kept float32, or one converted (rules ``io-*``)."""

    ensures = frozenset({INPUTS_DECIDED, OUTPUT_NEEDS})

    def run(self, state: PlanState) -> None:  # noqa: D102
        ctx = state.ctx
        graph = ctx.model.graph
        keep = interface.kept_names(graph, ctx.options.keep_io_types)
        state.kv_cache = ctx.cache_pairs()
        state.low_cache = interface.low_cache_names(state.kv_cache, ctx.options.kv_cache)
        state.kept = keep - state.low_cache.keys()
        named = set(ctx.options.keep_io_types) if isinstance(ctx.options.keep_io_types, tuple) else set()
        for value in graph.inputs:
            # A weight an old exporter also lists as an input follows its readers (passes.apply, rule 5),
            # unless keep_io_types names it.
            if value.is_initializer() and value.name not in named and value.name not in state.low_cache:
                continue
            if is_float(value):
                made = input_decision(value.name, state.kept, state.low_cache)
                state.values[value] = made.precision
                state.interface.append(made)
        state.graph_output_needs[graph] = tuple(
            (HIGH if v.name in state.kept else None) if is_float(v) else None for v in graph.outputs
        )


def input_decision(name: str, keep, low_cache) -> interface.InterfaceDecision:
    """The decision on a float main-graph input: a LOW cache input, kept float32, or converted."""
    if name in low_cache:
        return interface.cache_low(name, interface.INPUT, low_cache[name])
    return (interface.kept if name in keep else interface.converted)(name, interface.INPUT)
