"""Find a decoder's KV cache by structure: past inputs and the present outputs they become.

A decode step reads the cache of earlier tokens as graph inputs (past key and
value per layer) and returns it grown by the new tokens as graph outputs
(present). Exporters spell this two ways, and both are found here without
reading a name:

- a graph input concatenated with new values (``Concat``), the result
  returned as a graph output (torch dynamo, the legacy exporter; inside an
  ``If`` branch in optimum's merged decoder);
- a graph input in an attention op's past slot, whose present slot is a graph
  output (onnxruntime's GroupQueryAttention, MultiHeadAttention and Attention,
  ONNX's Attention from opset 23).

Between the input and the Concat, and between the Concat and the output, only
layout changes may stand (``LAYOUT_OPS``: Reshape, Transpose, ...): the values
are the same numbers. The Concat must join the past with something else. With ``kv_cache="low"`` the planner takes the pairs found out of
``keep_io_types``, so the cache is read and written in the LOW type and never
round-trips through float32.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Tuple

import onnx_ir as ir

from ampconv.core.dimexpr import evaluate_dim, unset_symbols
from ampconv.core.domains import is_default, normalize_domain
from ampconv.core.graphs import subgraphs_of

# (domain, op) -> ((past input slot, present output slot), ...)
ATTENTION_CACHE_SLOTS: Dict[Tuple[str, str], Tuple[Tuple[int, int], ...]] = {
    ("com.microsoft", "GroupQueryAttention"): ((3, 1), (4, 2)),
    ("com.microsoft", "MultiHeadAttention"): ((6, 1), (7, 2)),
    ("com.microsoft", "DecoderMaskedMultiHeadAttention"): ((5, 1), (6, 2)),
    ("com.microsoft", "Attention"): ((4, 1),),
    ("", "Attention"): ((4, 1), (5, 2)),
}

_TYPE_NAMES = {ir.DataType.FLOAT: "float32", ir.DataType.FLOAT16: "float16", ir.DataType.BFLOAT16: "bfloat16"}
# Ops that change only a tensor's layout: every element passes unchanged.
LAYOUT_OPS = frozenset({"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose"})
_DEPTH = 6  # data-movement nodes allowed on each side of the Concat


@dataclasses.dataclass(frozen=True)
class CachePair:
    """One cache tensor: the past input, the present output it becomes, and what joins them."""

    past: str
    present: str
    via: str  # the joining node's op label: Concat, GroupQueryAttention, ...

    def record(self) -> dict:
        """The report's entry."""
        return {"past": self.past, "present": self.present, "via": self.via}


def find_cache_pairs(graph: ir.Graph) -> Tuple[CachePair, ...]:
    """The past/present pairs of ``graph`` (a main graph), in input order; empty for a model without a cache."""
    outputs = {id(v): v for v in graph.outputs}
    owners = _Owners(graph)
    pairs: List[CachePair] = []
    taken = set()
    for value in graph.inputs:
        if value.dtype != ir.DataType.FLOAT:
            continue
        found = _present_of(value, outputs, owners)
        if found is not None and found[0].name not in taken:
            present, via = found
            taken.add(present.name)
            pairs.append(CachePair(value.name, present.name, via))
    return tuple(pairs)


class _Owners:
    """Subgraph -> the node holding it, found on first need (most graphs never ask: a walk of every node)."""

    def __init__(self, graph: ir.Graph) -> None:
        self._graph = graph
        self._owners: Optional[Dict[int, ir.Node]] = None

    def get(self, graph: ir.Graph) -> Optional[ir.Node]:
        if graph is self._graph:
            return None
        if self._owners is None:
            self._owners = {id(sub): node for node in self._graph.all_nodes() for sub in subgraphs_of(node)}
        return self._owners.get(id(graph))


def _present_of(past: ir.Value, outputs: Dict[int, ir.Value], owners: _Owners) -> Optional[Tuple[ir.Value, str]]:
    """The graph output that ``past`` becomes through one join (Concat or an attention op's cache slots)."""
    for value in _moved(past):
        for use in value.uses():
            node, index = use.node, use.idx
            slots = ATTENTION_CACHE_SLOTS.get((normalize_domain(node.domain), node.op_type), ())
            for past_slot, present_slot in slots:
                if index == past_slot and present_slot < len(node.outputs):
                    out = _reaches_output(node.outputs[present_slot], outputs, owners)
                    if out is not None:
                        return out, node.op_type
            joins_new = any(v is not None and v is not value for v in node.inputs)
            if node.op_type == "Concat" and is_default(node) and joins_new:
                out = _reaches_output(node.outputs[0], outputs, owners)
                if out is not None:
                    return out, "Concat"
    return None


def _moved(value: ir.Value, depth: int = _DEPTH) -> Iterator[ir.Value]:
    """``value`` and the values data movement makes of it (same numbers, other layout)."""
    yield value
    if depth == 0:
        return
    for use in value.uses():
        node = use.node
        if use.idx == 0 and len(node.outputs) == 1 and _is_movement(node):
            yield from _moved(node.outputs[0], depth - 1)


def _reaches_output(value: ir.Value, outputs: Dict[int, ir.Value], owners: _Owners,
                    depth: int = _DEPTH) -> Optional[ir.Value]:
    """The main-graph output ``value`` is returned as, through data movement and If branches; else None."""
    if id(value) in outputs:
        return value
    if depth == 0:
        return None
    graph = value.graph
    owner = owners.get(graph) if graph is not None and value.is_graph_output() else None
    if owner is not None and owner.op_type == "If":
        index = [id(v) for v in graph.outputs].index(id(value))
        return _reaches_output(owner.outputs[index], outputs, owners, depth - 1)
    for use in value.uses():
        node = use.node
        if use.idx == 0 and len(node.outputs) == 1 and _is_movement(node):
            found = _reaches_output(node.outputs[0], outputs, owners, depth - 1)
            if found is not None:
                return found
    return None


def _is_movement(node: ir.Node) -> bool:
    return is_default(node) and node.op_type in LAYOUT_OPS


def cache_summary(pairs: Tuple[CachePair, ...], graph: ir.Graph, dims: Mapping[str, int],
                  given: Iterable[str] = ()) -> Optional[dict]:
    """The report's ``kv_cache`` entry: the pairs, their element types, and the bytes read and written per step.

    Sizes are taken at ``dims`` (the figures' symbol sizes): a dimension is a
    number, a symbol (1 when ``dims`` lacks it), or an expression of symbols
    such as ``past_sequence_length + 1``, evaluated from them. Symbols the
    user did not give (not in ``given``) are listed under ``unset``. None
    when the graph has no cache.
    """
    given = frozenset(given)
    if not pairs:
        return None
    by_name = {v.name: v for v in list(graph.inputs) + list(graph.outputs)}
    unset = set()

    def size(name: str) -> int:
        value = by_name.get(name)
        if value is None or value.shape is None or value.dtype is None:
            return 0
        unset.update(unset_symbols(value.shape.dims, given))
        return math.prod(evaluate_dim(d, dims) for d in value.shape.dims) * value.dtype.itemsize

    types = sorted({_TYPE_NAMES.get(by_name[n].dtype, by_name[n].dtype.name.lower())
                    for p in pairs for n in (p.past, p.present) if n in by_name and by_name[n].dtype is not None})
    return {
        "pairs": [p.record() for p in pairs],
        "types": types,
        "bytes_read": sum(size(p.past) for p in pairs),
        "bytes_written": sum(size(p.present) for p in pairs),
        "unset": sorted(unset),
    }


__all__ = ["ATTENTION_CACHE_SLOTS", "CachePair", "cache_summary", "find_cache_pairs"]
