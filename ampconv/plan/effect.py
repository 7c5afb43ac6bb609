"""Constants judged by their effect: does flushing a constant's tiny values change its consumer's output?

A value that rounds to 0 in the LOW type matters only through what it changes
in the output of the op that reads it. The constant guard (``plan.guards``,
case 3) asks this module before it keeps a consumer float32 for values that
round to 0, and stores the constant rounded, with a note, when the change is
within the output's own LOW rounding:

- a constant *added* to the output, however the addition is spelled: the
  bias of a Conv, ConvTranspose or Gemm (BatchNorm folding with beta 0
  leaves ~1e-9 there), either operand of an Add, Sub or Sum (the same bias
  after a MatMul), the bias of a normalization (BatchNormalization,
  InstanceNormalization, LayerNormalization, GroupNormalization): a value
  that rounds to 0 is at most half the LOW type's smallest subnormal, which
  is no more than rounding the output itself to LOW may move it, at any
  magnitude. Not when the output feeds, within a few ops, an op that
  amplifies relative error (a divisor, Sqrt, Log, a normalization: an
  epsilon's whole job is to keep such an input away from 0).
- an elementwise *factor* (either operand of a Mul, the dividend of a Div:
  a per-channel scale whose dead channels decayed to ~1e-9): each output is
  one input times one factor, so a flushed factor changes its output by at
  most its own magnitude times the input, relative to the largest output the
  same input makes (the largest factor): the flushed magnitudes are at most
  the edge of the LOW range, so the change is at most that edge over the
  largest factor; within the LOW unit roundoff it is below the rounding that
  output already gets. A factor whose every value flushes changes its output
  wholly and stays float32.
- a weight of a Conv, ConvTranspose, MatMul or Gemm (dead channels decayed to
  ~1e-9): per output, the flushed magnitudes summed along the contraction,
  over the largest L1 norm of any output's weights (``RangeReader.flushed_share``),
  bounds the change relative to the largest output the same input makes; at
  most the LOW unit roundoff (2^-11 for float16), it is below the rounding
  that output already gets. The activation cancels out of the ratio, so no
  input range is needed.

Constants whose limits the user set (``--min-positive``) are judged by those
limits, not by their effect: this module then says nothing.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from ampconv.tensors.low_range import RangeStats
from ampconv.core.domains import is_default
from ampconv.numerics.amplifiers import feeds_amplifier
from ampconv.plan.context import PlanContext

# (op, input slot) whose values are added to the output they reach (None: every slot of the op).
_ADDED = frozenset({("Conv", 2), ("ConvTranspose", 2), ("Gemm", 2), ("Add", None), ("Sub", None), ("Sum", None),
                    ("BatchNormalization", 2), ("InstanceNormalization", 2), ("LayerNormalization", 2),
                    ("GroupNormalization", 2)})
# (op, input slot) whose values multiply the output elementwise.
_FACTORS = frozenset({("Mul", None), ("Div", 0)})


def flush_effect(ctx: PlanContext, node: ir.Node, slot: int, value: ir.Value, stats: RangeStats) -> Optional[str]:
    """Why flushing ``value``'s tiny values (input ``slot`` of ``node``) is within the output's LOW rounding; None
    when it may not be (the consumer then stays float32, as before)."""
    if stats.overflow or ctx.ranges.limits.min_set or not is_default(node):
        return None
    record, consumer = ctx.low_record, node.name or node.op_type
    if _slot_in(_ADDED, node.op_type, slot):
        amplifier = next((found for out in node.outputs if (found := feeds_amplifier(out)) is not None), None)
        if amplifier is not None:
            return None
        return (f"added to {consumer}'s output, each flushed value changes it by at most "
                f"{record.smallest_subnormal / 2:.3g}, no more than rounding that output to {record.name} may")
    if _slot_in(_FACTORS, node.op_type, slot):
        return _factor_effect(ctx, consumer, stats)
    axis = _output_axis(node, slot)
    if axis is None:
        return None
    share = ctx.ranges.flushed_share(value, axis)
    if share is None or share > record.unit_roundoff:
        return None
    return (f"flushing them changes each output of {consumer} by at most {share:.2g} of the largest output the "
            f"same input makes, within {record.name}'s rounding of it ({record.unit_roundoff:.2g})")


def _slot_in(table: frozenset, op: str, slot: int) -> bool:
    """Whether input ``slot`` of ``op`` is one ``table`` names (an entry with slot None names every slot)."""
    return (op, slot) in table or (op, None) in table


def _factor_effect(ctx: PlanContext, consumer: str, stats: RangeStats) -> Optional[str]:
    """Why flushing an elementwise factor's tiny values is within its output's rounding; None when it may not be."""
    record, limits = ctx.low_record, ctx.ranges.limits
    edge = float(np.uint32(limits.underflow_bits).view(np.float32))  # no flushed magnitude exceeds it
    if stats.nonzero <= stats.underflow or not stats.max_abs > 0:
        return None  # every value flushes: the output is gone, not rounded
    share = edge / stats.max_abs
    if share > record.unit_roundoff:
        return None
    return (f"a factor of {consumer}'s output: each flushed value changes its output by at most {share:.2g} of "
            f"the largest output the same input makes, within {record.name}'s rounding of it "
            f"({record.unit_roundoff:.2g})")


def _output_axis(node: ir.Node, slot: int) -> Optional[int]:
    """The axis of weight input ``slot`` that indexes ``node``'s outputs; None when ``slot`` is no weight of a product."""
    op = node.op_type
    if op == "Conv" and slot == 1:
        return 0
    if op == "ConvTranspose" and slot == 1:
        return 1
    if op == "MatMul" and slot in (0, 1):
        return -1 if slot == 1 else -2
    if op == "Gemm" and slot in (0, 1):
        attribute = node.attributes.get("transB" if slot == 1 else "transA")
        transposed = bool(attribute is not None and attribute.value)
        return (0 if transposed else 1) if slot == 1 else (1 if transposed else 0)
    return None
