"""Phase ``ShareWeights``: a weight other nodes need LOW is stored once (rules ``transparent-*``)."""

from __future__ import annotations

import math
from typing import List

import onnx_ir as ir

from ampconv.core.graphs import all_graphs
from ampconv.plan.decision import Decision
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import NODES_DECIDED, WEIGHTS_SHARED
from ampconv.plan.rules import BACKWARD, Rule, builtin
from ampconv.plan.state import PlanState
from ampconv.plan.values import is_constant, is_float
from ampconv.policy import HIGH, LOW

RULES = tuple(builtin(rule) for rule in (
    Rule("transparent-shared", BACKWARD, "data movement that reads the LOW copy of a weight other nodes need LOW"),
    Rule("transparent-weight", BACKWARD, "a selection (Gather, Slice) from a large weight no LOW op reads: the "
         "weight is stored LOW and the selected values are cast"),
))
# Ops that return some of their data input's elements unchanged (an embedding lookup, a slice of a table).
SELECTION_OPS = frozenset({"Gather", "GatherElements", "GatherND", "Slice"})
# Below this many elements a weight read only by selections stays float32: a cast per step costs more.
SELECTED_WEIGHT_MIN_ELEMENTS = 16384


class ShareWeights(Phase):
    """Avoid a float32 duplicate of a weight that LOW consumers already need.

    A transparent node (e.g. an embedding Gather) that reads an initializer
    other consumers need LOW, and reads no activation in its data slots, can
    read the LOW copy instead and have its (small) output cast up: same bits,
    and the weight is stored once. A large weight that only float32
    selections read is stored LOW too (``_select_from_low_weight``).
    """

    requires = frozenset({NODES_DECIDED})
    ensures = frozenset({WEIGHTS_SHARED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        for graph in all_graphs(state.ctx.model):
            for value in graph.initializers.values():
                uses = value.uses()
                if not uses or not is_float(value):
                    continue
                needs = {}
                for use in uses:
                    needs.setdefault(state.slot_need(use.node, use.idx), []).append(use.node)
                if HIGH not in needs:
                    continue
                if LOW not in needs:
                    _select_from_low_weight(state, value, needs[HIGH])
                    continue
                readers = needs[HIGH]
                if all(_can_read_low(state, node) for node in readers):
                    for node in readers:
                        state.set_decision(node, Decision(
                            LOW, "transparent-shared",
                            f"transparent: reads the {state.ctx.low} copy of {value.name} (stored once)",
                        ))


def _select_from_low_weight(state: PlanState, value: ir.Value, readers: List[ir.Node]) -> None:
    """Store a large weight read only by float32 selection ops (an embedding Gather) LOW.

    A selection (Gather, Slice, ...) returns some of its input's elements
    unchanged, so it can select from the LOW copy and cast the rows it took
    up to float32: the weight is stored at half the bytes and a step casts
    only what it selected, not the table. Kept float32: small weights (the
    saving would not pay for the cast a step adds) and weights whose values
    do not fit the LOW type.
    """
    if _numel(value) < SELECTED_WEIGHT_MIN_ELEMENTS:
        return
    stats = state.ctx.ranges.stats(value)
    if stats is None or stats.pins():
        return
    if not all(node.op_type in SELECTION_OPS and _can_read_low(state, node) for node in readers):
        return
    for node in readers:
        state.set_decision(node, Decision(
            LOW, "transparent-weight",
            f"selection from the weight {value.name}: reads it stored {state.ctx.low} and casts the "
            "selected values (same numbers as the LOW weight)",
        ))


def _can_read_low(state: PlanState, node: ir.Node) -> bool:
    decision = state.decisions.get(node)
    facts = state.facts.get(node)
    if decision is None or facts is None or node in state.structural_slots:
        return False
    if decision.rule not in ("gray-follow", "gray-promote", "free-high"):
        return False
    if facts.op.kind != "transparent":
        return False
    if state.ctx.low_type not in facts.info.allowed(facts.info.main_type()):
        return False
    return all(is_constant(node.inputs[i]) for i in facts.main_in)


def _numel(value: ir.Value) -> int:
    """Elements of a value of static shape; 0 when its shape is not known in full."""
    shape = value.shape
    if shape is None or not all(isinstance(d, int) for d in shape.dims):
        return 0
    return math.prod(shape.dims)
