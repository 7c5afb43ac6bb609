"""How a model's open dimensions relate, read from the shapes its graph records, and sizes that agree.

An exporter that names no dimension (torch's dynamo: ``s4``, ``s70``, ``s60``)
gives every open input axis a symbol of its own, and random data draws each at
size 1. Where the graph needs two of them to agree (a mask reshaped to the
length of the present cache, ``s60 + s70``; rotary tables multiplied into the
queries), size 1 for all fails at run time, and a hint that names one
dimension per failure costs one run per dimension. The shapes the graph
records (dynamo writes every intermediate's, expressions included; onnx's
inference adds what it propagates) say how they relate:

- an elementwise op broadcasts its inputs: two different sizes on one axis are
  equal (or one of them is 1); Concat's inputs agree off the joined axis;
  MatMul's contracted axes agree;
- a Reshape keeps the element count: once the factors both sides share are
  cancelled, one factor left on each side are equal (``[s4, s43] -> [s4, 1, 1,
  s60 + s70]``: ``s43 = s60 + s70``);
- an output whose axis is an expression of input symbols grows with them
  (``present_key`` axis 2 is ``s60 + s70``).

``unset_dims_hint`` names every unset dimension at once, the relations found,
and one set of sizes that satisfies them (``--shape`` entries to copy).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Optional

import onnx_ir as ir

from ampconv.core.dimexpr import evaluate_dim, symbols_of
from ampconv.core.shapespec import DeclaredInput, dimension_names, placeholder, unset_symbols_of
from ampconv.errors import UsageError, named

# Ops whose inputs broadcast against each other, axis by axis from the last.
BROADCASTING = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Where", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "And", "Or", "Xor", "Max", "Min", "Sum", "Mean", "BitShift", "PRelu",
})


@dataclasses.dataclass(frozen=True)
class Relation:
    """``symbol`` = ``size`` (a symbol, an expression of symbols, or a number), as node ``where`` requires."""

    symbol: str
    size: object
    where: str

    def text(self) -> str:
        """``s43 = s60 + s70 (Reshape 'mask_reshape')``."""
        return f"{self.symbol} = {self.size} ({self.where})"


def _dims(value: Optional[ir.Value]) -> Optional[list]:
    """The recorded dims of ``value``: ints, symbol texts, None for an unknown one; None without a shape."""
    if value is None or value.shape is None:
        return None
    return [d if isinstance(d, int) else (d.value or None) for d in value.shape]


def _where(node: ir.Node) -> str:
    return f"{node.op_type} {node.name!r}" if node.name else node.op_type


def relations(model: ir.Model, symbols: Sequence[str]) -> list[Relation]:
    """The equalities among ``symbols`` (the inputs' dimension symbols) the main graph's recorded shapes imply."""
    known = set(symbols)
    found: dict[tuple, Relation] = {}

    def relate(a, b, node: ir.Node) -> None:
        for left, right in ((a, b), (b, a)):
            if not isinstance(left, str) or left not in known or left == right or right in (None, 1):
                continue
            if isinstance(right, str) and not symbols_of(right) <= known:
                continue  # an inference-made symbol (unk__0) says nothing the user can set
            if isinstance(right, str) and right in known and right < left:
                continue  # two symbols: one relation, named once
            found.setdefault((left, str(right)), Relation(left, right, _where(node)))
            return

    for node in model.graph:
        for a, b in _paired_dims(node):
            relate(a, b, node)
    return list(found.values())


def _paired_dims(node: ir.Node):
    """Pairs of dims ``node`` requires to be equal (or 1, for a broadcast), from its values' recorded shapes."""
    shapes = [_dims(v) for v in node.inputs]
    if node.op_type in BROADCASTING:
        present = [s for s in shapes if s]
        for i, first in enumerate(present):
            for second in present[i + 1:]:
                yield from zip(reversed(first), reversed(second))
    elif node.op_type == "Concat" and shapes and all(shapes):
        axis = next((a.value for a in node.attributes.values() if a.name == "axis"), 0)
        for first, second in zip(shapes, shapes[1:]):
            if len(first) == len(second):
                yield from (pair for k, pair in enumerate(zip(first, second)) if k != axis % len(first))
    elif node.op_type == "MatMul" and len(shapes) == 2 and all(shapes) and len(shapes[1]) >= 2:
        yield shapes[0][-1], shapes[1][-2]
    elif node.op_type == "Reshape" and shapes and shapes[0] and node.outputs:
        pair = _reshape_pair(shapes[0], _dims(node.outputs[0]))
        if pair is not None:
            yield pair


def _reshape_pair(before: list, after: Optional[list]):
    """The one factor left on each side of a Reshape once shared factors cancel, or None."""
    if not after or None in before or None in after:
        return None
    left, right = Counter(d for d in before if d != 1), Counter(d for d in after if d != 1)
    shared = left & right
    left, right = list((left - shared).elements()), list((right - shared).elements())
    return (left[0], right[0]) if len(left) == 1 and len(right) == 1 else None


def grown_outputs(model: ir.Model, symbols: Sequence[str]) -> list[str]:
    """``present_key, present_value axis 2 is s60 + s70``: outputs whose axis is an expression of ``symbols``."""
    known = set(symbols)
    grouped: dict[tuple, list] = {}
    for value in model.graph.outputs:
        for axis, dim in enumerate(_dims(value) or ()):
            if isinstance(dim, str) and symbols_of(dim) != {dim} and symbols_of(dim) <= known:
                grouped.setdefault((axis, dim), []).append(value.name)
    return [f"{', '.join(names)} axis {axis} is {dim}" for (axis, dim), names in grouped.items()]


def agreeing_sizes(unset: Sequence[str], given: Mapping[str, int], found: Sequence[Relation]) -> dict[str, int]:
    """Sizes for the ``unset`` symbols that satisfy ``found`` with the ``given`` ones: free symbols 1, the rest
    computed from them (``s43 = s60 + s70`` -> 2)."""
    sizes = dict(given)
    pending = [s for s in unset if s not in sizes]
    bound_by = {r.symbol for r in found}
    while pending:
        progress = False
        for relation in found:
            size = relation.size
            if relation.symbol not in sizes and (isinstance(size, int) or symbols_of(size) <= set(sizes)):
                sizes[relation.symbol] = max(evaluate_dim(size, sizes), 1)
                progress = True
            elif isinstance(size, str) and size in pending and size not in sizes and relation.symbol in sizes:
                sizes[size] = sizes[relation.symbol]
                progress = True
        pending = [s for s in pending if s not in sizes]
        if not progress and pending:
            free = next((s for s in pending if s not in bound_by), pending[0])
            sizes[free] = 1
    return {s: sizes[s] for s in unset}


def unset_dims_hint(model: ir.Model, specs: Sequence[DeclaredInput], shapes: Mapping[str, tuple]) -> Optional[str]:
    """Every dimension random data leaves at 1, in one message: who uses it, how the graph relates them, and
    sizes that agree (a ``shapes`` marker: ``--shape s4:1 --shape s43:2 ...`` at the command line). None when
    every dimension is set, or when ``shapes`` itself cannot be resolved (its own error says why)."""
    try:
        unset = unset_symbols_of(specs, shapes)
    except UsageError:
        return None
    unnamed = _unnamed_axes(specs, shapes)
    if not unset and not unnamed:
        return None
    symbols = dimension_names(specs)
    given = {name: int(tuple(size)[0]) for name, size in shapes.items() if name in symbols and len(tuple(size)) == 1}
    found = [r for r in relations(model, symbols) if r.symbol in unset or symbols_of(r.size) & set(unset)]
    sizes = agreeing_sizes(list(unset), given, found)
    listed = [f"{symbol!r} (input {', '.join(names)})" for symbol, names in unset.items()]
    listed += [f"input {name!r} axis {axis} (unnamed)" for name, axis in unnamed]
    parts = [f"{len(listed)} dimension(s) left unset, size 1 in random data: {', '.join(listed)}"]
    said = [r.text() for r in found] + grown_outputs(model, [*unset, *given])
    if said:
        parts.append(f"the graph relates them: {'; '.join(said)}")
    if found:
        # The sizes all at 1 broke a relation: sizes that keep them (free ones 1, the rest computed) to copy.
        wanted = {**sizes, **{f"{name}[{axis}]": 1 for name, axis in unnamed}}
        parts.append(f"sizes that agree: {named('shapes', wanted)} (set your own, keeping the relations)")
    else:
        # No relation: size 1 itself may be what the model refuses (a reflect Pad, a window): the user's sizes.
        size = placeholder([*unset, *(name for name, _ in unnamed)])
        wanted = {**{symbol: size for symbol in unset}, **{f"{name}[{axis}]": size for name, axis in unnamed}}
        parts.append(f"pass {named('shapes', wanted)} for the sizes the model will see")
    return "; ".join(parts)


def _unnamed_axes(specs: Sequence[DeclaredInput], shapes: Mapping[str, tuple]) -> list[tuple[str, int]]:
    """(input, axis) of every -1 or unnamed axis no ``shapes`` entry sets."""
    found = []
    for spec in specs:
        if spec.dims is None or spec.name in shapes:
            continue
        for axis, dim in enumerate(spec.dims):
            if (dim is None or dim == "?" or (isinstance(dim, int) and dim < 0)) and f"{spec.name}[{axis}]" not in shapes:
                found.append((spec.name, axis))
    return found
