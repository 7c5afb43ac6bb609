"""Rule family ``user`` (and ``check``): what the user asked for, and what a check said of an earlier try.

``runtime_pin``, ``block_op`` and ``keep_fp32`` are tried after the hard rules
and before the constant guard; ``force_low`` after the guard, so forcing a node
LOW never casts a constant that does not fit (docs/precision.md sec. 6).
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.domains import op_label
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import CHECK, USER, Rule, builtin
from ampconv.policy import HIGH, LOW


def runtime_pin(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """onnx.checker or onnxruntime rejected this node in an earlier attempt (``ampconv.verdict``)."""
    reason = ctx.runtime_pins.get(node.name or "")
    return Decision(HIGH, "runtime-pin", reason) if reason is not None else None


def block_op(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``--block-op``: the op type stays float32 at every level, O3 included."""
    op = op_label(node)
    return Decision(HIGH, "user-block-op", f"user: --block-op {op}") if op in ctx.blocked else None


def keep_fp32(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``--keep-fp32 REGEX``: a matching node name stays float32."""
    for pattern in ctx.keep_fp32:
        if pattern.search(node.name or ""):
            return Decision(HIGH, "user-keep-fp32", f"user: --keep-fp32 {pattern.pattern!r}")
    return None


def force_low(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``--force-low REGEX``: a matching node name is LOW unless a hard rule or guard said otherwise."""
    for pattern in ctx.force_low:
        if pattern.search(node.name or ""):
            return Decision(LOW, "user-force-low", f"user: --force-low {pattern.pattern!r}")
    return None


# Each rule applies only where its option is given (the check its function makes first).
RUNTIME_PIN = builtin(Rule("runtime-pin", CHECK, "onnx.checker or onnxruntime rejected this node in LOW in an "
                           "earlier attempt", decide=runtime_pin, applies=lambda ctx, op: bool(ctx.runtime_pins)))
BLOCK_OP = builtin(Rule("user-block-op", USER, "--block-op: the op type stays float32 at every level, O3 included",
                        decide=block_op, applies=lambda ctx, op: op.label in ctx.blocked))
KEEP_FP32 = builtin(Rule("user-keep-fp32", USER, "--keep-fp32: the node name matches a pattern",
                         decide=keep_fp32, applies=lambda ctx, op: bool(ctx.keep_fp32)))
FORCE_LOW = builtin(Rule("user-force-low", USER, "--force-low: the node name matches a pattern",
                         decide=force_low, applies=lambda ctx, op: bool(ctx.force_low)))
