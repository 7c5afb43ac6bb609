"""The rule table: the order in which rules are tried for one node. The first that decides wins.

This order is the planner's contract (docs/precision.md, "Rules and their
ids"): hard facts first, then what a check of an earlier attempt said, then the
user's float32 overrides, the constant guard, the data guards (the accuracy
search's pins, the nodes the release step lowered, what a float32 run saw, the
input envelope), the user's LOW override, the range guards
(evidence on the model for a gray op once black), the level table, and the
gray rule, which always decides.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import onnx_ir as ir

from ampconv.plan import data_guards as data, envelope, evidence, fallback, gray, guards, hard, levels, phase, release, user
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts, OpFacts
from ampconv.plan.rules import Rule

RuleFunction = Callable[[PlanContext, ir.Node, NodeFacts], Optional[Decision]]

RULE_TABLE: Tuple[Rule, ...] = (
    *hard.RULES,
    user.RUNTIME_PIN,
    user.BLOCK_OP,
    user.KEEP_FP32,
    user.KEEP_BF16,
    guards.CONSTANT_RANGE,
    data.ACCURACY_PIN,
    release.RELEASE_LOW,
    data.ACTIVATION_RANGE,
    envelope.ENVELOPE,
    user.FORCE_LOW,
    *evidence.RULES,
    phase.PHASE,
    levels.LEVEL_RULE,
    gray.GRAY_RULE,
)


def active_rules(ctx: PlanContext, op: OpFacts) -> Tuple[RuleFunction, ...]:
    """The decision functions of ``RULE_TABLE``, in its order, of the rules that can apply to ``op`` under ``ctx``.

    A rule for another op (BitCast, the reductions), a user option not given,
    no calibration data: a rule whose ``applies`` says no would return None
    for every node of ``op``, so skipping it changes no decision, and a
    typical node then runs 8 of the 26 (the median over the sample
    models, default options). Made once per op and context. The
    user's rules (``PlanOptions.rules``) stand before ``force_low``, each
    kept only where its ``applies`` allows.
    """
    rules = ctx.active_rules.get(op)
    if rules is None:
        rules = ctx.active_rules[op] = tuple(
            rule.decide if rule.id in _BUILTIN_IDS else _checked(rule)
            for rule in _table(ctx) if rule.can_apply(ctx, op))
    return rules


_BUILTIN_IDS = frozenset(rule.id for rule in RULE_TABLE)


def _table(ctx: PlanContext) -> Tuple[Rule, ...]:
    """``RULE_TABLE`` with the user's rules inserted before ``force_low``."""
    added = tuple(ctx.options.rules)
    if not added:
        return RULE_TABLE
    at = RULE_TABLE.index(user.FORCE_LOW)
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
    """The first decision of ``RULE_TABLE`` for ``node`` (of the rules that can apply: ``active_rules``).

    A float32 decision for range alone becomes the fallback type's where one is
    in use and the schema admits it (``plan.fallback.widen``).
    """
    for rule in ctx.active_rules.get(facts.op) or active_rules(ctx, facts.op):
        decision = rule(ctx, node, facts)
        if decision is not None:
            return fallback.widen(ctx, node, facts, decision)
    raise AssertionError("the gray rule always decides")  # pragma: no cover
