"""Every graph of a model, found without visiting a generator per node.

``onnx_ir.Model.graphs()`` walks every node through a chain of nested
generators; on a 40,000-node graph one walk costs about 0.12 s, and a
conversion asks for the graph list about twenty times. This walk reads each
node's attribute table directly (most nodes have none) and returns the same
graphs in the same order (depth first, each subgraph right after the node that
holds it), as a list that the caller may reuse while no graph is added.

Inside ``fixed_graph_list(model)`` the list is walked once, on entry, and
every ``all_graphs(model)`` returns (a copy of) it. The converter holds that
scope over a whole conversion: its passes insert and remove casts and
constants but never a node that holds a graph, so the list cannot change.
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Iterator, List, Tuple

import onnx_ir as ir

_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS

# The key of ``model.meta`` that holds the graph list inside ``fixed_graph_list``: the list lives
# and dies with the model it describes (no module-level cache to outlive it).
_META_KEY = "ampconv.fixed_graph_list"


def all_graphs(model: ir.Model) -> List[ir.Graph]:
    """The main graph of ``model`` and all its subgraphs, in ``ir.Model.graphs()`` order."""
    fixed = model.meta.get(_META_KEY)
    if fixed is not None:
        return list(fixed)
    return walk_graphs(model)


def walk_graphs(model: ir.Model) -> List[ir.Graph]:
    """``all_graphs`` without the scope's saved list: always walks the model."""
    found: List[ir.Graph] = []
    _collect(model.graph, found)
    return found


@contextlib.contextmanager
def fixed_graph_list(model: ir.Model) -> Iterator[None]:
    """Walk ``model`` once; inside the block ``all_graphs(model)`` returns that walk's list.

    Only for code that adds and removes no node holding a subgraph (If, Loop,
    Scan) while the block runs. Nested scopes over one model share the outer
    walk.
    """
    if _META_KEY in model.meta:
        yield
        return
    model.meta[_META_KEY] = walk_graphs(model)
    try:
        yield
    finally:
        model.meta.pop(_META_KEY, None)


def subgraphs_of(node: ir.Node) -> List[ir.Graph]:
    """The graphs held directly by ``node``'s attributes (If branches, Loop/Scan bodies)."""
    held: List[ir.Graph] = []
    for attr in node.attributes.values():
        kind = attr.type
        if kind == _GRAPH:
            held.append(attr.value)
        elif kind == _GRAPHS:
            held.extend(attr.value)
    return held


def _collect(graph: ir.Graph, found: List[ir.Graph]) -> None:
    found.append(graph)
    for node in graph:
        if node.attributes:  # most nodes carry no attribute at all
            for held in subgraphs_of(node):
                _collect(held, found)


def bounded_uses(values: Iterable[ir.Value], passes: Callable[[ir.Node], bool], depth: int) -> Iterator[ir.Usage]:
    """Every use of ``values`` and, through the nodes ``passes`` accepts, of their outputs: ``depth`` nodes deep.

    Breadth first, nearest uses first; a use is yielded before the walk goes
    through its node, so a caller looking for the first node of a kind can
    stop there. The downstream twin of ``bounded_sources``.
    """
    frontier = list(values)
    for _ in range(depth):
        following: List[ir.Value] = []
        for value in frontier:
            for use in value.uses():
                yield use
                if passes(use.node):
                    following.extend(use.node.outputs)
        frontier = following


def bounded_sources(value: ir.Value, passes: Callable[[ir.Node], bool], depth: int) -> Iterator[Tuple[ir.Node, ir.Value]]:
    """``(producer, input)`` for every input of ``value``'s producer, and upstream through the producers ``passes``.

    At most ``depth`` producers deep, nearest first, each value visited once;
    the walk goes on through an input only when the caller's ``passes``
    accepts the producer it came from. The upstream twin of ``bounded_uses``.
    """
    frontier, seen = [value], set()
    for _ in range(depth):
        following: List[ir.Value] = []
        for current in frontier:
            producer = current.producer() if current is not None else None
            if producer is None or not passes(producer):
                continue
            for source in producer.inputs:
                if source is None or source in seen:
                    continue
                seen.add(source)
                yield producer, source
                following.append(source)
        frontier = following


__all__ = ["all_graphs", "bounded_sources", "bounded_uses", "fixed_graph_list", "subgraphs_of", "walk_graphs"]
