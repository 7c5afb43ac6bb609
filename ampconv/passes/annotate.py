"""``annotate``: stamp each node's precision and rule into its ``metadata_props``.

The decision then travels with the model into any viewer (Netron shows
metadata_props) or later tool, the way onnxscript's rewriter stamps the names
of the rules that produced a node. Keys: ``ampconv.precision`` (``float16``,
``bfloat16``, ``float32``, or ``none`` for a node without float data) and
``ampconv.rule`` (the rule id, ``docs/precision.md``). Casts the rewrite
inserted, and Constants it copied, are stamped ``ampconv.rule = inserted``.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassResult

from ampconv.core.precision import Precision
from ampconv.core.lowtypes import low_type
from ampconv.plan import Plan
from ampconv.core.graphs import all_graphs

PRECISION_KEY = "ampconv.precision"
RULE_KEY = "ampconv.rule"
INSERTED = "inserted"


class AnnotatePass(InPlacePass):
    """Stamp the plan's decisions into the rewritten model's nodes (run after the rewrite and cleanup)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    def call(self, model: ir.Model) -> PassResult:
        """Stamp every node of every graph; nodes the plan never saw were inserted by the rewrite."""
        names = {Precision.LOW: low_type(self.plan.low).name, Precision.HIGH: "float32", Precision.NONE: "none"}
        for graph in all_graphs(model):
            for node in graph:
                node_plan = self.plan.nodes.get(node)
                if node_plan is None:
                    node.metadata_props[RULE_KEY] = INSERTED
                    continue
                node.metadata_props[PRECISION_KEY] = names.get(node_plan.decision.precision, "none")
                node.metadata_props[RULE_KEY] = node_plan.decision.rule
        return PassResult(model, modified=True)


__all__ = ["PRECISION_KEY", "RULE_KEY", "AnnotatePass"]
