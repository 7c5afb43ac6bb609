"""Phase ``DecideGraphs``: the rule table over every node of every graph, then each graph's backward pass.

For each graph, in file order (ONNX's topological order): every node is
decided by ``ampconv.plan.table.decide`` (the forward pass), structural nodes
by planning their subgraphs (``structural.py``), then the backward pass
(``ampconv.plan.gray.backward``) settles FREE and transparent nodes.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.core.graphs import all_graphs
from ampconv.plan import gray, handoff
from ampconv.plan.decision import Decision
from ampconv.plan.facts import node_facts
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import INPUTS_DECIDED, NODES_DECIDED, OUTPUT_NEEDS
from ampconv.plan.phases.structural import plan_structural
from ampconv.plan.state import CARRIED, PlanState
from ampconv.plan.table import decide
from ampconv.policy import HIGH


class DecideGraphs(Phase):
    """Every node's decision: the table forward, If/Loop/Scan through their subgraphs, the backward pass."""

    requires = frozenset({INPUTS_DECIDED, OUTPUT_NEEDS})
    ensures = frozenset({NODES_DECIDED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        ctx = state.ctx
        ctx.ranges.prefetch(v for g in all_graphs(ctx.model) for v in g.initializers.values())
        plan_graph(state, ctx.model.graph)


def plan_graph(state: PlanState, graph: ir.Graph) -> None:
    """Decide every node of ``graph`` (its subgraphs through its structural nodes), then settle it backward."""
    unsettled = []  # the nodes the backward pass may change, in order: it passes over the others
    for node in graph:  # ONNX requires topological order; ties keep file order
        decision = _forward(state, node)
        if decision is not None and gray.may_settle(decision):
            unsettled.append(node)
    gray.backward(state, unsettled)


def _forward(state: PlanState, node: ir.Node) -> Optional[Decision]:
    """Decide ``node`` and record its outputs' precision; None for a structural node (planned through its subgraphs)."""
    ctx, values = state.ctx, state.values
    facts = node_facts(node, ctx.opsets, ctx.ops, ctx.runtime)
    if facts.op.kind == "structural":  # a default-domain If, Loop or Scan
        plan_structural(state, node, plan_graph)
        return None
    state.facts[node] = facts
    decision = state.decisions[node] = decide(ctx, node, facts)
    precision = decision.precision
    # A LOW, FALLBACK or FREE node's main outputs take its precision; every other float output is HIGH.
    main_out = facts.main_out if precision in CARRIED else ()
    for j, is_float_out in enumerate(facts.float_out):
        if is_float_out:
            values[node.outputs[j]] = precision if j in main_out else HIGH
    if precision == HIGH:
        handoff.record(ctx, node, decision, facts)  # what a pinned node hands on its gray readers
    return decision
