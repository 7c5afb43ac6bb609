"""The figures that decide GPU speed, for the summary and the report of one conversion.

Casts, the bytes they move per inference, the share of heavy ops in LOW and
the weight bytes: what ``bench/figures.py`` measures on any model file, here
read from the converted IR that the converter holds (types known, nothing
re-read). The definitions are shared with it (``heavy_ops.HEAVY_OPS``,
``tensorsize.tensor_bytes``): cast traffic is ``numel * (input itemsize + output
itemsize)`` summed over every Cast, at concrete shapes: the graph inputs'
shapes resolved from ``shapes`` (the forms of ``--shape``), every other
symbolic or unnamed dimension 1, a dimension written as an expression of
symbols (``past_sequence_length + 1``) evaluated from them
(``ampconv.core.dimexpr``). Shapes the IR does not hold are inferred once
(``ampconv.reading.shapes``), only when a Cast's tensor has none; a Cast inside a
subgraph whose size cannot be told counts as unknown, never as 0 bytes.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Mapping, Optional, Sequence, Tuple

import onnx_ir as ir

from ampconv.core.dimexpr import evaluate_dim, symbols_of
from ampconv.errors import UsageError
from ampconv.core.heavy_ops import HEAVY_OPS, is_outer_product
from ampconv.tensors.tensorsize import tensor_bytes
from ampconv.core.graphs import all_graphs
from ampconv.runtime.schema import normalize_domain
from ampconv.reading.shapes import inferred_shapes
from ampconv.core.shapespec import resolve_shape
from ampconv.numerics.modelio import declared_inputs

_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})
_LOW = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


@dataclasses.dataclass(frozen=True)
class ConversionFigures:
    """What a GPU deployment of the converted model pays (see the module docstring)."""

    casts: int
    cast_traffic_bytes: int
    cast_traffic_unknown: int
    heavy_nodes: int
    heavy_low: int
    weight_bytes: int
    dims: Tuple[Tuple[str, int], ...]  # the symbolic dims the traffic was counted at

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready figures (the report's ``figures`` section)."""
        data = dataclasses.asdict(self)
        data["dims"] = dict(self.dims)
        return data


def conversion_figures(model: ir.Model, weight_bytes: int, shapes: Sequence = ()) -> ConversionFigures:
    """The figures of the converted ``model`` (its weight total measured by the caller)."""
    concrete = _input_shapes(model, shapes)
    # Plain symbols only: an expression (``past_sequence_length + 1``) is evaluated from them where met.
    dims = {dim: size for spec, sizes in concrete for dim, size in zip(spec.dims, sizes)
            if isinstance(dim, str) and symbols_of(dim) == {dim}}
    source = inferred_shapes(model, {spec.name: sizes for spec, sizes in concrete})
    casts = unknown = traffic = heavy = heavy_low = 0
    for graph in all_graphs(model):
        main = graph is model.graph
        for node in graph:
            domain = normalize_domain(node.domain)
            if node.op_type in HEAVY_OPS.get(domain, ()) and not is_outer_product(
                    node.op_type, domain, _reduction_length(node)):
                heavy += 1
                heavy_low += _first_float(node) in _LOW
            if node.op_type != "Cast" or domain != "":
                continue
            casts += 1
            size = _cast_bytes(node, source if main else (lambda value: value.shape), dims)
            if size is None:
                unknown += 1
            else:
                traffic += size
    return ConversionFigures(casts, traffic, unknown, heavy, heavy_low, weight_bytes, tuple(sorted(dims.items())))


def moved_bytes(model: ir.Model, shapes: Sequence = ()) -> int:
    """Bytes the main graph's nodes read and write in float tensors per inference, at the figures' shapes.

    Where a GPU is memory-bound this is what a node costs: a float32 node
    moves twice the bytes of a LOW one, and a Cast moves its input and its
    output. The release step (``calibration.release``) compares candidates by
    it, so an island's boundary is drawn where the GPU moves least, not where
    the fewest nodes stay float32. A Cast of a graph input or to a graph
    output is left out: a float32 interface (``keep_io_types``) costs every
    LOW conversion that cast, wherever its islands lie. A tensor whose size
    cannot be told counts one element.
    """
    concrete = _input_shapes(model, shapes)
    dims = {dim: size for spec, sizes in concrete for dim, size in zip(spec.dims, sizes)
            if isinstance(dim, str) and symbols_of(dim) == {dim}}
    source = inferred_shapes(model, {spec.name: sizes for spec, sizes in concrete})
    interface = {*model.graph.inputs, *model.graph.outputs}
    total = 0
    for node in model.graph:
        if node.op_type == "Cast" and (node.inputs[0] in interface or node.outputs[0] in interface):
            continue
        for value in (*node.inputs, *node.outputs):
            if value is None or value.dtype not in _FLOATS:
                continue
            shape = value.shape if value.shape is not None and _bound(value.shape, dims) else source(value)
            numel = math.prod(_size(d, dims) for d in shape.dims) if shape is not None else 1
            total += tensor_bytes(value.dtype.value, numel) or 0
    return total


def _cast_bytes(node: ir.Node, shape_of, dims: Mapping[str, int]) -> Optional[int]:
    """Input plus output bytes of one Cast at ``dims``; None when its size or types are unknown."""
    source, target = node.inputs[0], node.outputs[0]
    if source is None or source.dtype is None or target.dtype is None:
        return None
    # Declared shapes first (an interface Cast); inference runs only when neither side has a shape
    # whose dims are all known: an exporter often names an output's dims apart from the inputs'.
    declared = [shape for shape in (source.shape, target.shape) if shape is not None]
    shape = next((shape for shape in declared if _bound(shape, dims)), None) or shape_of(source)
    shape = shape if shape is not None else next(iter(declared), None)
    if shape is None:
        return None
    numel = math.prod(_size(d, dims) for d in shape.dims)
    sizes = [tensor_bytes(dtype.value, numel) for dtype in (source.dtype, target.dtype)]
    return None if None in sizes else sum(sizes)


def _size(dim, dims: Mapping[str, int]) -> int:
    """One dim's size: a number, a symbol's bound size, an expression of symbols evaluated, else 1.

    A negative number is no size: some exporters (paddle2onnx) declare an
    unknown dim as -1, which counted as a number made the traffic negative.
    """
    if isinstance(dim, int):
        return dim if dim >= 0 else 1
    return evaluate_dim(dim, dims)


def _bound(shape: ir.Shape, dims: Mapping[str, int]) -> bool:
    """Whether every dim of ``shape`` is a size (a number >= 0) or a symbol (expression) the graph inputs bind."""
    return all(d >= 0 if isinstance(d, int) else not (symbols_of(d) - dims.keys()) for d in shape.dims)


def _reduction_length(node: ir.Node) -> Optional[int]:
    """A MatMul's reduction length (A's last dimension, or B's next to last) when the IR holds it, else None."""
    for index, axis in ((0, -1), (1, -2)):
        value = node.inputs[index] if len(node.inputs) > index else None
        shape = value.shape if value is not None else None
        if shape is not None and len(shape.dims) >= -axis and isinstance(shape.dims[axis], int):
            return shape.dims[axis]
    return None


def _first_float(node: ir.Node) -> Optional[ir.DataType]:
    """The element type of the node's first float input (else output), as ``figures`` reads a heavy op."""
    for value in list(node.inputs) + list(node.outputs):
        if value is not None and value.dtype in _FLOATS:
            return value.dtype
    return None


def _input_shapes(model: ir.Model, shapes: Sequence):
    """(spec, concrete shape) of each graph input: ``shapes`` resolved as ``--shape`` does, open dims 1."""
    given = dict(shapes)
    resolved = []
    for spec in declared_inputs(model):
        if spec.dims is None:
            continue
        try:
            sizes = resolve_shape(spec, given)
        except UsageError:  # a named dim left open: 1, as an unnamed one
            sizes = tuple(given.get(d, 1) if isinstance(d, str) else (d if isinstance(d, int) else 1)
                          for d in spec.dims)
        resolved.append((spec, tuple(sizes)))
    return resolved


__all__ = ["ConversionFigures", "conversion_figures", "moved_bytes"]
