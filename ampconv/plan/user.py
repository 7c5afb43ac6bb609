"""Rule family ``user`` (and ``check``): what the user asked for, and what a check said of an earlier try.

``runtime_pin``, ``block_op`` and ``keep_fp32`` are tried after the hard rules
and before the constant guard; ``force_low`` after the guard, so forcing a node
LOW never casts a constant that does not fit (docs/precision.md sec. 6).
"""

from __future__ import annotations

from typing import FrozenSet, Optional

import onnx_ir as ir

from ampconv.domains import op_label
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts, OpFacts
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


def quiet(ctx: PlanContext, op: OpFacts) -> FrozenSet[object]:
    """The rules above that return None for every node of ``op`` under ``ctx``: the options not given (``table``)."""
    silent = set()
    if not ctx.runtime_pins:
        silent.add(runtime_pin)
    if op.label not in ctx.blocked:
        silent.add(block_op)
    if not ctx.keep_fp32:
        silent.add(keep_fp32)
    if not ctx.force_low:
        silent.add(force_low)
    return frozenset(silent)
