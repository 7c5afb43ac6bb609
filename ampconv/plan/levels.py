"""Rule family ``level``: the level table applied to the op's list class (docs/precision.md sec. 1).

At O3 every op is LOW except sources (Constant, Cast to float, ...), which
follow their consumers: retyping them is free, and forcing them LOW would only
add casts back. A class whose level entry is INHERIT (GRAY at O1/O2) is left
to the gray rule.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import LEVEL, Rule, builtin
from ampconv.policy import BLACK, HIGH, LOW
from ampconv.policy.lists import behaviour_kind
from ampconv.runtime.schema import normalize_domain


def level(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """LOW or HIGH from the level table; None for sources at O3 and for INHERIT.

    The answer depends on the op and the policy only: found once per op and
    context, and the same (frozen) ``Decision`` serves every node of the op.
    """
    known = ctx.memo.get("level")
    if known is None:
        known = ctx.memo["level"] = {}
    if facts.op not in known:
        known[facts.op] = _level(ctx, normalize_domain(node.domain), node.op_type)
    return known[facts.op]


def _level(ctx: PlanContext, domain: str, op_type: str) -> Optional[Decision]:
    """``level`` for any node of ``domain::op_type`` (``domain`` normalized)."""
    if ctx.policy.level == "O3":
        if behaviour_kind(op_type, domain) == "source":
            return None
        return Decision(LOW, "level-O3", "level O3: everything LOW")
    op_class = ctx.policy.class_of(domain, op_type)
    precision = ctx.policy.rule(op_class)
    if precision == LOW:
        return Decision(LOW, op_class.lower(), f"{op_class.lower()} list at {ctx.policy.level}")
    if precision == HIGH:
        why = " (range or accumulated rounding)" if op_class == BLACK else ""
        return Decision(HIGH, op_class.lower(), f"{op_class.lower()} list at {ctx.policy.level}{why}")
    return None


LEVEL_RULE = builtin(Rule(
    "level-O3", LEVEL, "level O3: every op LOW", decide=level,
    also=(Rule("white", LEVEL, "the op is on the white list: LOW at O1-O3"),
          Rule("black", LEVEL, "the op is on the black list: float32 at O1 and O2"),
          Rule("unlisted", LEVEL, "the op is on no list: float32 at O1, LOW at O2 and O3")),
))
