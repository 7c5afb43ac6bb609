"""What the planner's phases share: the decisions so far, each value's precision, and the questions about them.

``PlanState`` is the planner's working memory for one conversion: the phases
(``ampconv.plan.phases``) write decisions into it and ask it what a slot needs,
what a node's consumers need, and whether a value is known not to fit the LOW
type. It holds no rule: the rules are the table's and the phases'.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, List, Mapping, Optional, Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import ANY, FREE, NONE, UNKNOWN, Decision, NodePlan
from ampconv.plan.fallback import FALLBACK
from ampconv.plan.facts import NodeFacts
from ampconv.plan.ranges import misfit
from ampconv.plan.values import is_constant, is_float
from ampconv.policy import HIGH, LOW
from ampconv.policy.lists import behaviour_kind
from ampconv.runtime.schema import normalize_domain

# The precisions a node's main outputs carry (forward pass), and those its main input slots need (finalize).
CARRIED = (LOW, FREE, FALLBACK)
NEEDS = (LOW, HIGH, FALLBACK)


@dataclasses.dataclass
class PlanState:
    """One plan in the making: what the phases decided and recorded, and the questions they ask of it."""

    ctx: PlanContext
    nodes: Dict[ir.Node, NodePlan] = dataclasses.field(default_factory=dict)
    decisions: Dict[ir.Node, Decision] = dataclasses.field(default_factory=dict)
    facts: Dict[ir.Node, NodeFacts] = dataclasses.field(default_factory=dict)
    graph_output_needs: Dict[ir.Graph, Tuple[Optional[str], ...]] = dataclasses.field(default_factory=dict)
    structural_slots: Dict[ir.Node, Tuple[Tuple, Tuple]] = dataclasses.field(default_factory=dict)
    warnings: List[str] = dataclasses.field(default_factory=list)
    interface: List[object] = dataclasses.field(default_factory=list)  # InterfaceDecision, inputs then outputs
    kv_cache: tuple = ()  # the decoder's past/present pairs (``ampconv.plan.kvcache``)
    low_cache: Mapping[str, object] = dataclasses.field(default_factory=dict)  # cache names made LOW
    kept: FrozenSet[str] = frozenset()  # main-graph input/output names kept float32
    envelope: Optional[tuple] = None  # the input envelope (``plan.envelope``), None without a float32 run

    @property
    def values(self) -> Dict[ir.Value, str]:
        """The precision of each float value so far (the context's: the gray rule reads the same mapping)."""
        return self.ctx.values

    def set_decision(self, node: ir.Node, decision: Decision) -> None:
        """Replace ``node``'s decision (backward pass, shared weights) and its outputs' precision."""
        self.decisions[node] = decision
        for j in self.facts[node].main_out:
            self.values[node.outputs[j]] = decision.precision

    def value_precision(self, value: ir.Value) -> str:
        """A value's precision as its readers see it: a FREE or unrecorded float value reads as float32."""
        if not is_float(value):
            return NONE
        if value in self.values:
            p = self.values[value]
            return HIGH if p == FREE else p
        return HIGH  # constants and outer values default to float32

    def slot_need(self, node: ir.Node, index: int) -> Optional[str]:
        """What input slot ``index`` of ``node`` needs: LOW, HIGH, ANY or None."""
        if node in self.structural_slots:
            inputs, _ = self.structural_slots[node]
            return inputs[index] if index < len(inputs) else None
        facts = self.facts.get(node)
        decision = self.decisions.get(node)
        if facts is None or decision is None:
            return HIGH if is_float(node.inputs[index]) else None
        if not facts.float_in[index]:
            return None
        if index in facts.any_in:
            return ANY
        if index in facts.main_in and decision.precision in NEEDS:
            return decision.precision
        if index in facts.main_in and decision.precision == FREE:
            return UNKNOWN
        return HIGH  # a slot outside the main type, a NONE node, an unknown op: keeps float32

    def consumer_needs(self, node: ir.Node, facts: NodeFacts) -> List[str]:
        """What each float consumer of ``node``'s main outputs needs (LOW, HIGH, or UNKNOWN while FREE).

        A slot that takes any type (Shape, Size, Cast) needs nothing, so a FREE
        chain that only feeds shape arithmetic stays float32 (hazard 8); but a
        Cast the plan made LOW (a ``Cast(to=FLOAT)`` retargeted to the LOW type)
        reads LOW: fed LOW it is a no-op the cleanup removes.
        """
        needs: List[str] = []
        for j in facts.main_out:
            value = node.outputs[j]
            for use in value.uses():
                need = self.slot_need(use.node, use.idx)
                if need == ANY and self._is_low_cast(use.node):
                    needs.append(self.decisions[use.node].precision)  # LOW, or FALLBACK
                elif need is not None and need != ANY:
                    needs.append(need)
            if value.is_graph_output():
                for graph in [value.graph] if value.graph is not None else []:
                    need = self.graph_output_needs.get(graph, ())
                    index = [i for i, v in enumerate(graph.outputs) if v is value]
                    for i in index:
                        n = need[i] if i < len(need) else None
                        if n is None and graph is self.ctx.model.graph:
                            # An output keep_io_types does not keep accepts LOW,
                            # unless its values are known not to fit.
                            n = LOW if self.known_misfit(value) is None else HIGH
                        needs.append(n if n is not None else UNKNOWN)
        return needs

    def _is_low_cast(self, node: ir.Node) -> bool:
        """Whether ``node`` is a Cast whose (float) output the plan has made LOW."""
        decision = self.decisions.get(node)
        return (
            node.op_type == "Cast" and is_default(node)
            and decision is not None and decision.precision in (LOW, FALLBACK)
        )

    def known_misfit(self, value: ir.Value, depth: int = 8) -> Optional[str]:
        """Why ``value``'s data is known not to fit the LOW type, or None.

        Known: its producer was pinned float32 by a constant beyond the LOW
        range, or it is a constant that does not fit, or a transparent float32
        node (Reshape, Concat, ...) forwards such a value (same numbers).
        """
        if is_constant(value):
            stats = self.ctx.ranges.stats(value)
            return misfit(stats, value.name or "?", self.ctx.low) if stats is not None and stats.pins() else None
        producer = value.producer()
        if producer is None or depth == 0:
            return None
        decision = self.decisions.get(producer)
        if decision is not None and decision.precision == FALLBACK:
            runs = self.ctx.fallback.key
            return f"its producer {producer.name or producer.op_type} runs {runs}: {decision.reason}"
        if decision is None or decision.precision != HIGH:
            return None
        facts = self.facts.get(producer)
        if facts is None:
            return None
        if decision.rule == "hard-constant":
            # An overflowing constant shows in the result (x + 1e6); an underflow
            # pin (an epsilon) keeps the op's meaning, not an out-of-range result.
            for i in facts.main_in:
                stats = self.ctx.ranges.stats(producer.inputs[i]) if is_constant(producer.inputs[i]) else None
                if stats is not None and stats.overflow:
                    what = misfit(stats, producer.inputs[i].name or "?", self.ctx.low)
                    return f"its producer {producer.name or producer.op_type} is float32: {what}"
            return None
        if behaviour_kind(producer.op_type, normalize_domain(producer.domain)) != "transparent":
            return None
        for i in facts.main_in:
            why_not = self.known_misfit(producer.inputs[i], depth - 1)
            if why_not is not None:
                return why_not
        return None
