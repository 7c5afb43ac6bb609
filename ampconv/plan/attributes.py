"""Precision attributes the plan sets on nodes it decided: each one a named rule, applied by the rewrite.

Some ops carry the precision of an inner step as an attribute instead of a
tensor type. The planner decides those too, so the report names the rule
and the rewrite only copies what the plan says (``NodePlan.attributes``).
"""

from __future__ import annotations

from typing import Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.plan.decision import AttributeDecision, Decision
from ampconv.plan.rules import ATTRIBUTE, Rule, builtin
from ampconv.core.precision import Precision


RULES = (builtin(Rule(
    "attention-softmax-fp32", ATTRIBUTE,
    "a LOW Attention computes its softmax in float32 (softmax_precision = FLOAT): scores are what LOW risks")),)


def attribute_decisions(node: ir.Node, decision: Decision) -> Tuple[AttributeDecision, ...]:
    """The precision attributes ``node`` gets from the plan, given its final ``decision``.

    A LOW ``Attention`` computes its softmax in float32 (``softmax_precision``
    = FLOAT, rule ``attention-softmax-fp32``): the scores are what a LOW
    softmax risks, and the GPU kernels accumulate in float32 anyway. Not
    when the model set the attribute itself, and not when the node outputs
    its softmax (``_exports_softmax``).
    """
    if node.op_type != "Attention" or decision.precision != Precision.LOW or not is_default(node):
        return ()
    if "softmax_precision" in node.attributes or _exports_softmax(node):
        return ()
    return (
        AttributeDecision(
            "softmax_precision", ir.DataType.FLOAT.value, "attention-softmax-fp32",
            "softmax computed in float32 inside the LOW Attention",
        ),
    )


def _exports_softmax(node: ir.Node) -> bool:
    """Whether an Attention node outputs its softmax (``qk_matmul_output_mode`` 3).

    Attention's ONNX function body takes that output after the softmax, in
    ``softmax_precision``, so with float32 softmax it would be float32 while the
    schema types it like Q: the model would not type-check (onnxruntime refuses
    it). Such a node keeps its softmax in the LOW type.
    """
    mode = node.attributes.get("qk_matmul_output_mode")
    wanted = len(node.outputs) > 3 and node.outputs[3] is not None and bool(node.outputs[3].name)
    return wanted and mode is not None and mode.value == 3


__all__ = ["attribute_decisions"]
