"""Which values the scale of the user's float data sets.

The default synthetic run (``calibration.synthetic``) feeds random float inputs of
modest magnitude. Where a value depends on such an input, the run measured the
value at the random input's scale, not at the scale of the data the model
will see (raw pixels, audio samples, unnormalized features): how far its
figures speak is the input envelope's question (``plan.degrees`` says how
fast each value grows, ``plan.envelope`` where it stops holding). Where a
value depends only on the model's own constants, on integer inputs (token ids
index a weight table), on ops whose output is bounded whatever their input
(``plan.bounds``), or on the model's own KV cache (a past key or value is
what an earlier step of the same model wrote), the run saw the model's numbers.

``user_inputs`` are the float graph inputs that carry the user's data (not a
KV-cache past); ``data_reach`` the values they reach, by one forward walk over
the main graph and every subgraph (a branch reads outer values directly).
Calibration data is real data: its figures speak for every value.
"""

from __future__ import annotations

from typing import FrozenSet, Iterable, List, Set

import onnx_ir as ir

from ampconv.core.graphs import subgraphs_of
from ampconv.plan.bounds import semantic_bound
from ampconv.plan.context import PlanContext

# The float element types: a value of one of them carries a scale (an integer output stops the walk).
FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})


def user_inputs(ctx: PlanContext) -> List[ir.Value]:
    """The float graph inputs of ``ctx``'s model that carry the user's data: all but a KV cache's pasts (and the
    initializers an old exporter also lists as graph inputs: weights)."""
    cache = {pair.past for pair in ctx.cache_pairs()}
    return [v for v in ctx.model.graph.inputs
            if v.dtype in FLOAT_TYPES and v.name not in cache and not v.is_initializer()]


def scaled_by_user_data(ctx: PlanContext) -> FrozenSet[ir.Value]:
    """The float values of ``ctx``'s model whose magnitude follows a user's float input (``user_inputs``); once."""
    found = ctx.memo.get("scaled_by_user_data")
    if found is None:
        found = ctx.memo["scaled_by_user_data"] = frozenset(data_reach(ctx.model.graph, user_inputs(ctx)))
    return found


def data_reach(graph: ir.Graph, sources: Iterable[ir.Value]) -> Set[ir.Value]:
    """The float values of ``graph`` (subgraphs included) computed from ``sources`` by ops that pass a scale on.

    An op whose output is bounded by its semantics (Softmax, Sigmoid, Cos, ...)
    stops the walk there, and so does an integer output (a Shape, an ArgMax).
    """
    reached: Set[ir.Value] = set(sources)
    _walk(graph, reached)
    return reached


def _walk(graph: ir.Graph, reached: Set[ir.Value]) -> None:
    """Mark, in graph order, the outputs of every node that reads a reached value (a subgraph's nodes first;
    a Loop or Scan body's own inputs count as reached when the node's inputs are)."""
    for node in graph:
        bodies = list(subgraphs_of(node))
        read = any(v is not None and v in reached for v in node.inputs)
        for body in bodies:
            if read:
                reached.update(body.inputs)
            _walk(body, reached)
        read = read or any(v is not None and v in reached for body in bodies for v in body.outputs)
        if not read:
            continue
        for out in node.outputs:
            if out.dtype not in FLOAT_TYPES and out.dtype is not None:
                continue
            if semantic_bound(out, depth=1) is not None:
                continue
            reached.add(out)


__all__ = ["FLOAT_TYPES", "data_reach", "scaled_by_user_data", "user_inputs"]
