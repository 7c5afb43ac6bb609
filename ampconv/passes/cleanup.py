"""Remove casts that do nothing, repeated until a fixed point (docs/precision.md sec. 8).

Cases (comments refer to them):
  1. Identity cast: ``Cast(to=T)`` of a value already of type T.
  2. Exact round trip: ``Cast(to=LOW)(Cast(to=FLOAT)(x))`` with x of that LOW
     type: widening then narrowing back is exact, so the pair is bypassed.
     The reverse (narrowing then widening) is lossy and always stays.
  3. Duplicate siblings: two casts of the same value to the same type in the
     same graph; the second is merged into the first.
  4. Dead casts and Constants: no consumer and not a graph output.
Graph outputs keep their public names: a bypassed cast that produced an output
hands its name to the value that replaces it, or stays when it cannot.

``CleanupPass`` is one sweep over every graph, the four cases tried node by
node in graph order; ``cast_cleanup`` wraps it in a ``PassManager`` that
repeats the sweep until it changes nothing. The cases stay in one sweep rather
than four passes: which of two casts survives, and so the written model,
depends on that node-by-node order.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple

import onnx_ir as ir
from ampconv.core.domains import is_default
from ampconv.core.graphs import all_graphs
from onnx_ir.passes import InPlacePass, PassManager, PassResult

WIDE = ir.DataType.FLOAT
NARROW = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


@dataclasses.dataclass
class CleanupResult:
    """How many nodes each case removed."""

    identity: int = 0
    round_trip: int = 0
    duplicate: int = 0
    dead: int = 0

    @property
    def removed(self) -> int:
        """Total nodes removed."""
        return self.identity + self.round_trip + self.duplicate + self.dead


def _is_cast(node: ir.Node) -> bool:
    return node.op_type == "Cast" and is_default(node) and "to" in node.attributes


def _cast_to(node: ir.Node) -> ir.DataType:
    return ir.DataType(node.attributes["to"].value)


def _bypass(node: ir.Node, replacement: ir.Value) -> bool:
    """Route every use of ``node``'s output to ``replacement``; False if impossible."""
    out = node.outputs[0]
    graph = node.graph
    if out.is_graph_output():
        # Case-independent rule: keep the public name on the replacement.
        if (
            replacement.is_graph_output()
            or replacement.is_graph_input()
            or replacement.is_initializer()
            or replacement.producer() is None
            or replacement.graph is not graph
            or graph is None
        ):
            return False
        public = out.name
        out.replace_all_uses_with(replacement, replace_graph_outputs=True)
        out.name = None
        replacement.name = public
        if replacement.shape is None:
            # The public output keeps the shape it declared: the checker requires one
            # on graph outputs, and it is the same tensor (a cast changes no shape).
            replacement.shape = out.shape
    else:
        out.replace_all_uses_with(replacement)
    return True


def _try_identity(node: ir.Node, stats: CleanupResult) -> bool:
    source = node.inputs[0]
    if source is None or source.dtype is None or source.dtype != _cast_to(node):
        return False
    if not _bypass(node, source):
        return False
    stats.identity += 1
    return True


def _try_round_trip(node: ir.Node, stats: CleanupResult) -> bool:
    target = _cast_to(node)
    if target not in NARROW:
        return False
    inner = node.inputs[0].producer() if node.inputs[0] is not None else None
    if inner is None or not _is_cast(inner) or _cast_to(inner) != WIDE:
        return False
    original = inner.inputs[0]
    if original is None or original.dtype != target:
        return False  # narrowing then widening (or another type): lossy, keep
    if not _bypass(node, original):
        return False
    stats.round_trip += 1
    return True


def _try_dead(node: ir.Node, stats: CleanupResult) -> bool:
    if node.op_type not in ("Cast", "Constant") or node.domain != "":
        return False
    if any(v.uses() or v.is_graph_output() for v in node.outputs):
        return False
    node.graph.remove(node, safe=True)
    stats.dead += 1
    return True


def cleanup_graph(graph: ir.Graph, stats: CleanupResult) -> bool:
    """One sweep over ``graph`` (not its subgraphs); True when anything changed."""
    changed = False
    seen: Dict[Tuple[int, int], ir.Value] = {}
    for node in list(graph):
        if node.graph is not graph:
            continue  # removed earlier in this sweep
        if _is_cast(node):
            if _try_identity(node, stats) or _try_round_trip(node, stats):
                changed = True
            else:
                source: Optional[ir.Value] = node.inputs[0]
                key = (id(source), _cast_to(node).value)
                first = seen.get(key)
                if first is not None and _bypass(node, first):
                    stats.duplicate += 1
                    changed = True
                elif first is None:
                    seen[key] = node.outputs[0]
        if _try_dead(node, stats):
            changed = True
    return changed


class CleanupPass(InPlacePass):
    """One sweep of cases 1-4 over every graph; ``result`` adds up what each sweep removed."""

    def __init__(self) -> None:
        self.result = CleanupResult()

    def call(self, model: ir.Model) -> PassResult:
        changed = False
        for graph in list(all_graphs(model)):
            changed |= cleanup_graph(graph, self.result)
        return PassResult(model, modified=changed)


MAX_ROUNDS = 20


def cast_cleanup(sweep: CleanupPass, max_rounds: int = MAX_ROUNDS) -> PassManager:
    """``sweep`` repeated until it changes nothing (at most ``max_rounds`` times)."""
    return PassManager([sweep], steps=max_rounds, early_stop=True)


def cleanup(model: ir.Model, max_rounds: int = MAX_ROUNDS) -> CleanupResult:
    """Run the cases over every graph until nothing changes."""
    sweep = CleanupPass()
    cast_cleanup(sweep, max_rounds)(model)
    return sweep.result
