"""Rule ``range-phase``: the angle of a periodic function made from integers is computed in float32.

``cos(position * frequency)`` is what rotary embeddings compute. Cos and Sin
stay float32 (black list), but the angle they read is a product of an
integer (a token position) and a frequency, often a MatMul and so LOW on its
own. An integer's magnitude is the data's, not the model's: at position
4,000 a float16 angle is a multiple of 2 radians (its spacing there), so the
table computed from it in float32 holds the cosine of the wrong angle, by up
to a radian. Nothing about the spelling matters: any float node that lies on
the way from a Cast of a (non-constant) integer to the argument of a periodic
function, through the arithmetic and data movement an angle is built with,
stays float32, as the function it feeds. The table it makes is cast down once
(``gray-narrow``), so the rule costs no Cast the black Cos/Sin did not.
"""

from __future__ import annotations

from typing import FrozenSet, Optional

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import bounded_sources
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.evidence import numbers_guarded
from ampconv.plan.facts import NodeFacts
from ampconv.plan.rules import RANGE, Rule, builtin
from ampconv.plan.values import is_constant
from ampconv.policy import HIGH

# Functions whose result depends on their argument's absolute value modulo a period.
PERIODIC = frozenset({"Cos", "Sin"})
# What an angle is built with between the integer and the function.
_ANGLE_OPS = frozenset({
    "Cast", "Mul", "MatMul", "Add", "Sub", "Div", "Einsum", "Concat", "Reshape", "Unsqueeze", "Squeeze",
    "Transpose", "Identity", "Expand", "Tile", "Slice", "Gather", "Flatten",
})
_INTEGERS = frozenset({ir.DataType.INT64, ir.DataType.INT32, ir.DataType.INT16, ir.DataType.INT8,
                       ir.DataType.UINT64, ir.DataType.UINT32, ir.DataType.UINT16, ir.DataType.UINT8})
_DEPTH = 8


def phase(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``range-phase``: ``node`` computes part of a periodic function's angle from an integer."""
    if not numbers_guarded(ctx) or node not in angle_nodes(ctx):
        return None
    spacing = 4096 * ctx.low_record.epsilon
    return Decision(
        HIGH, "range-phase",
        f"range: computes the angle of a Cos/Sin from an integer input (positions): at 4096 a {ctx.low_name} "
        f"angle is a multiple of {spacing:g} rad; computed in float32, as the function it feeds",
    )


def angle_nodes(ctx: PlanContext) -> FrozenSet[ir.Node]:
    """The float nodes between a Cast of a non-constant integer and a periodic function's input (once, ``ctx.memo``)."""
    if "angle_nodes" not in ctx.memo:
        found = set()
        index = ctx.nodes_by_op()
        for op in sorted(PERIODIC):
            for function in index.get(op, ()):
                if is_default(function) and function.inputs and function.inputs[0] is not None:
                    found |= _angle_of(function.inputs[0])
        ctx.memo["angle_nodes"] = frozenset(found)
    return ctx.memo["angle_nodes"]


def _angle_of(argument: ir.Value) -> set:
    """The float nodes making ``argument`` when one of its sources is a Cast of a non-constant integer, else none."""
    passes = (lambda node: node.op_type in _ANGLE_OPS and is_default(node))  # noqa: E731
    makers, from_integer = set(), False
    producer = argument.producer()
    if producer is not None and passes(producer):
        makers.add(producer)
    for node, source in bounded_sources(argument, passes, _DEPTH):
        makers.add(node)
        if node.op_type == "Cast" and source.dtype in _INTEGERS and not is_constant(source):
            from_integer = True
    if not from_integer:
        return set()
    return {node for node in makers if node.op_type != "Cast"}


# Silent for every op when range evidence does not speak or no angle is built from integers.
PHASE = builtin(Rule("range-phase", RANGE, "computes the angle of a Cos/Sin from an integer (positions): kept float32",
                     decide=phase, applies=lambda ctx, op: numbers_guarded(ctx) and bool(angle_nodes(ctx))))


__all__ = ["PERIODIC", "PHASE", "angle_nodes", "phase"]
