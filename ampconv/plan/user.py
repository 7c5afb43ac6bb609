"""Rule family ``user`` (and ``check``): what the user asked for, and what a check said of an earlier try.

``runtime_pin``, ``block_op``, ``keep_fp32`` and ``keep_bf16`` are tried after
the hard rules and before the constant guard; ``force_low`` after the guard, so
forcing a node LOW never casts a constant that does not fit (docs/precision.md
sec. 6). ``keep_bf16`` puts a node in the fallback type (bfloat16 beside
float16, sec. 14): it holds float32's range, so no guard needs to see it.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir

from ampconv.core.domains import op_label
from ampconv.plan import fallback
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import CHECK, USER, Rule, builtin
from ampconv.policy import HIGH, LOW
from ampconv.runtime.schema import normalize_domain


def runtime_pin(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """onnx.checker or onnxruntime rejected this node in an earlier attempt (``ampconv.runtime.verdict``)."""
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


def keep_bf16(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``--keep-bf16 REGEX`` (with ``--fallback-dtype bf16``): a matching node runs in the fallback type.

    Where its schema at the model's opset does not take bfloat16 the node
    stays float32, the reason saying why (and naming the opset that would
    take it: ``fallback.refused``, which the default upgrade reads).
    """
    for pattern in ctx.keep_bf16:
        if pattern.search(node.name or ""):
            reason = f"user: --keep-bf16 {pattern.pattern!r}"
            if fallback.admits(ctx, facts):
                return Decision(fallback.FALLBACK, "user-keep-bf16", f"{reason}; runs {ctx.fallback.name}")
            kept = Decision(HIGH, "user-keep-bf16", reason)
            later = fallback.refused(ctx, node, kept)  # names the opset that takes it, if one does
            if later is not kept:
                return later
            return Decision(HIGH, "user-keep-bf16", f"{reason}; {node.op_type} does not take "
                            f"{ctx.fallback.key} at opset {ctx.opsets.get(normalize_domain(node.domain), 1)} "
                            "or later, so it runs float32")
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
KEEP_BF16 = builtin(Rule("user-keep-bf16", USER, "--keep-bf16: the node name matches a pattern; it runs in the "
                         "fallback type (bf16) where its schema admits it, else float32",
                         decide=keep_bf16, applies=lambda ctx, op: bool(ctx.keep_bf16)))
FORCE_LOW = builtin(Rule("user-force-low", USER, "--force-low: the node name matches a pattern",
                         decide=force_low, applies=lambda ctx, op: bool(ctx.force_low)))
