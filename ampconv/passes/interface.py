"""Write subgraph inputs and outputs of unknown shape untyped, as exporters do.

onnx.checker requires a shape on every graph input or output that carries a
tensor type. A Loop or Scan body often declares its inputs and outputs with no
type at all (onnx and onnxruntime infer them from the node); when the rewrite
types such a value (a loop-carried state it retyped, a cast it added before a
body output) without knowing its shape, the result would fail the checker. Such
values are left untyped again: their element type follows from the node that
produces them or from the Loop/Scan inputs, and the loop-state invariant has
already been checked on the typed graph (``ApplyPlanPass.ensures``).

The main graph's inputs and outputs are never touched: they are the model's
interface, typed as the user asked.
"""

from __future__ import annotations

import onnx_ir as ir
from ampconv.core.graphs import all_graphs
from onnx_ir.passes import InPlacePass, PassResult


class UntypeShapelessSubgraphIOPass(InPlacePass):
    """Drop the type of subgraph inputs/outputs whose shape is unknown; ``untyped`` counts them."""

    def __init__(self) -> None:
        self.untyped = 0

    def call(self, model: ir.Model) -> PassResult:
        before = self.untyped
        for graph in all_graphs(model):
            if graph is model.graph:
                continue
            for value in list(graph.inputs) + list(graph.outputs):
                if isinstance(value.type, ir.TensorType) and value.shape is None:
                    value.type = None
                    self.untyped += 1
        return PassResult(model, modified=self.untyped > before)


__all__ = ["UntypeShapelessSubgraphIOPass"]
