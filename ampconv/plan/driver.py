"""The planner's driver: orders the phases (``ampconv.plan.phases``) and makes the ``Plan`` of their state.

The phases, in order: the main graph's inputs, every node of every graph (the
rule table forward, If/Loop/Scan through their subgraphs, the backward pass),
weights shared with transparent readers, the warnings about name patterns,
the main graph's outputs, each node's slot needs, the input envelope (how far
each float input may grow before a LOW node overflows), the fallback type's
opset warning. Each phase declares what it requires and ensures; ``run_phases``
refuses an order that breaks that.
"""

from __future__ import annotations

from typing import Mapping, Optional, Tuple

import onnx_ir as ir

from ampconv.numerics.activations import Calibration
from ampconv.options.groups import PlanOptions
from ampconv.plan import attributes, gray, interface
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Plan
from ampconv.plan.phases import Phase, run_phases
from ampconv.plan.phases import structural, weights
from ampconv.plan.phases.envelope import InputEnvelope
from ampconv.plan.phases.finalize import FinalizeSlots
from ampconv.plan.phases.graphs import DecideGraphs
from ampconv.plan.phases.inputs import DecideInputs
from ampconv.plan.phases.outputs import DecideOutputs
from ampconv.plan.phases.warnings import FallbackRefused, NamePatterns
from ampconv.plan.search_pins import SearchPins
from ampconv.plan.state import PlanState
from ampconv.plan.table import RULE_TABLE
from ampconv.policy import Policy
from ampconv.runtime.target import Target

PHASES: Tuple[Phase, ...] = (
    DecideInputs(), DecideGraphs(), weights.ShareWeights(), NamePatterns(), DecideOutputs(),
    FinalizeSlots(), InputEnvelope(), FallbackRefused(),
)
# Every rule id in the order the planner tries them: the table's for one node, then the phases around it.
RULE_ORDER: Tuple[str, ...] = tuple(
    rule_id
    for rule in (*RULE_TABLE, *gray.BACKWARD_RULES, *weights.RULES, *structural.RULES, *interface.RULES,
                 *attributes.RULES)
    for rule_id in rule.ids()
)


class Planner:
    """Builds a ``Plan``; one instance per conversion (no module-level state)."""

    def __init__(
        self,
        model: ir.Model,
        policy: Policy,
        options: PlanOptions,
        runtime_pins: Optional[Mapping[str, str]] = None,
        calibration: Optional[Calibration] = None,
        tune_pins: Optional[SearchPins] = None,
        target: Optional[Target] = None,
    ) -> None:
        self.ctx = PlanContext.create(model, policy, options, runtime_pins or {}, calibration, tune_pins, target)
        self.state = PlanState(self.ctx)

    def run(self) -> Plan:
        """Run the phases over the main graph (and, through structural nodes, every subgraph)."""
        run_phases(PHASES, self.state)
        state, ctx = self.state, self.ctx
        return Plan(
            low=ctx.low,
            fallback=None if ctx.fallback is None else ctx.fallback.key,
            fallback_refused=tuple((op, opset, n) for (op, opset), n in
                                   sorted(ctx.memo.get("fallback_refused", {}).items())),
            level=ctx.policy.level,
            nodes=state.nodes,
            values=state.values,
            graph_output_needs=state.graph_output_needs,
            constants=ctx.constants,
            clamp_tensors=dict(ctx.clamp),
            limits=ctx.ranges.limits,
            ranges=ctx.ranges,
            warnings=list(state.warnings),
            interface=tuple(state.interface),
            kv_cache=state.kv_cache,
            envelope=state.envelope,
            target=ctx.target,
        )
