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

from ampconv.plan import data, evidence, fallback, gray, guards, hard, levels, phase, user
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts, OpFacts
from ampconv.plan.rules import Rule

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
    phase.phase,
    levels.level,
    gray.gray,
)


# The families that name the rules they cannot fire under a context (``quiet``); the others
# (guards, levels, gray) read the node itself, so they always run.
_SCREENS = (hard.quiet, user.quiet, data.quiet, evidence.quiet, phase.quiet)


def active_rules(ctx: PlanContext, op: OpFacts) -> Tuple[RuleFunction, ...]:
    """``RULE_TABLE`` in its order, less the rules that return None for every node of ``op`` under ``ctx``.

    A rule for another op (BitCast, the reductions), a user option not given,
    no calibration data: skipping such rules changes no decision, and a
    typical node then runs 7 of the 22. Made once per op and context. The
    user's rules (``PlanOptions.rules``) stand before ``force_low``, each
    kept only where its ``applies`` allows.
    """
    rules = ctx.active_rules.get(op)
    if rules is None:
        silent = frozenset().union(*(screen(ctx, op) for screen in _SCREENS))
        rules = ctx.active_rules[op] = tuple(rule for rule in _table(ctx, op) if rule not in silent)
    return rules


def _table(ctx: PlanContext, op: OpFacts) -> Tuple[RuleFunction, ...]:
    """``RULE_TABLE`` with the user's rules that can apply to ``op`` inserted before ``force_low``."""
    added = tuple(_checked(rule) for rule in ctx.options.rules if rule.applies is None or rule.applies(ctx, op))
    if not added:
        return RULE_TABLE
    at = RULE_TABLE.index(user.force_low)
    return RULE_TABLE[:at] + added + RULE_TABLE[at:]


def _checked(rule: Rule) -> RuleFunction:
    """``rule.decide``, refusing a decision that names another rule (the report would blame the wrong rule)."""

    def decide(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
        decision = rule.decide(ctx, node, facts)
        if decision is not None and decision.rule != rule.id:
            raise ValueError(f"user rule {rule.id!r} returned a decision of rule {decision.rule!r}")
        return decision

    return decide


def decide(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Decision:
    """The first decision of ``RULE_TABLE`` for ``node`` (of the rules that can decide: ``active_rules``).

    A float32 decision for range alone becomes the fallback type's where one is
    in use and the schema admits it (``plan.fallback.widen``).
    """
    for rule in ctx.active_rules.get(facts.op) or active_rules(ctx, facts.op):
        decision = rule(ctx, node, facts)
        if decision is not None:
            return fallback.widen(ctx, node, facts, decision)
    raise AssertionError("the gray rule always decides")  # pragma: no cover
