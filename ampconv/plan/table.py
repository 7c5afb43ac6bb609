"""The rule table: the order in which rules are tried for one node. The first that decides wins.

This order is the planner's contract (docs/precision.md, "Rules and their
ids"): hard facts first, then what a check of an earlier attempt said, then the
user's float32 overrides, the constant guard, the data guards (calibration
data and the accuracy search), the user's LOW override, the range guards
(evidence on the model for a gray op once black), the level table, and the
gray rule, which always decides.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import onnx_ir as ir

from ampconv.plan import data, evidence, gray, guards, hard, levels, user
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts

RuleFunction = Callable[[PlanContext, ir.Node, NodeFacts], Optional[Decision]]

RULE_TABLE: Tuple[RuleFunction, ...] = (
    *hard.RULES,
    user.runtime_pin,
    user.block_op,
    user.keep_fp32,
    guards.constant_range,
    data.accuracy_pin,
    data.activation_range,
    user.force_low,
    *evidence.RULES,
    levels.level,
    gray.gray,
)


def decide(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Decision:
    """The first decision of ``RULE_TABLE`` for ``node``."""
    for rule in RULE_TABLE:
        decision = rule(ctx, node, facts)
        if decision is not None:
            return decision
    raise AssertionError("the gray rule always decides")  # pragma: no cover
