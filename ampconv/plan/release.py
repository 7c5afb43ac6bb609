"""Rule family ``release``: a node the release step (``calibration.release``) runs LOW against its guard's word.

After planning with evidence (calibration data or the default synthetic run),
the release step tries the float32 islands back in LOW under emulation on that
evidence and keeps LOW whatever does not move the outputs beyond the floor
(docs/precision.md sec. 10). The nodes it keeps LOW reach the planner in
``SearchPins.lowered`` (node -> the evidence and the measured effect), and this
rule decides them LOW (``release-low``). It stands after the hard facts, the
checks' pins, the user's float32 overrides and the accuracy search's pins, and
before the data, range and level rules it overrides; the constant guard, which
stands before it, stores a released node's constant rounded and says so
(``plan.guards``).
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import RELEASE, Rule, builtin
from ampconv.policy import LOW


def released(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """LOW for a node the release step lowered; None for every other node."""
    reason = lowered_reason(ctx, node)
    if reason is None:
        return None
    return Decision(LOW, "release-low", f"release: {reason}")


def lowered_reason(ctx: PlanContext, node: ir.Node) -> Optional[str]:
    """Why the release step runs ``node`` LOW, or None when it does not."""
    lowered = ctx.tune_pins.lowered
    return lowered.get(node.name or "") if lowered else None


RELEASE_LOW = builtin(Rule(
    "release-low", RELEASE, "the release step tried this float32 node in LOW under emulation on the evidence "
    "(calibration data or the synthetic run): the outputs stay within the floor, so it runs LOW",
    decide=released, applies=lambda ctx, op: bool(ctx.tune_pins.lowered)))
