"""Derive from a converted model a float32 copy that rounds like the LOW type.

ONNX Runtime's CPU provider computes most float16 ops in float32 and has no
bfloat16 arithmetic, so running the converted model on a CPU hides overflow.
The emulated copy computes every node in float32 and rounds each LOW tensor to
its type with ``Cast(to=LOW) -> Cast(to=FLOAT)``, which the CPU provider does
implement faithfully (round to nearest even, overflow to inf, underflow to 0).

Rules, applied to the main graph and recursively to every If/Loop/Scan body:

1. A LOW initializer is widened to float32 (exact), lazily, so big weights are
   only converted while the copy is written.
2. A LOW ``to``/``dtype`` attribute becomes FLOAT, and a LOW tensor attribute
   (``Constant.value``, ``ConstantOfShape.value``) a float32 tensor; the
   node's output then takes rule 4. An existing Cast to LOW thus becomes a
   Cast to FLOAT followed by the round trip.
3. A LOW graph input becomes FLOAT and is rounded by a round trip inserted at
   the start of its graph (the harness feeds float32).
4. A LOW node output becomes FLOAT and is rounded by a round trip inserted
   right after its node. The rounded value takes the original name (so
   localization matches tensors by name); the raw one is renamed.
5. LOW sequence/optional types are retyped to FLOAT but cannot be rounded
   (counted in ``EmulationStats.unrounded``).

``float32_nodes`` asks what the model would compute with those nodes kept
float32 (a fix localization suggests, checked before it is suggested): their
outputs are rounded only where a LOW node reads them, as the Cast a converter
puts in front of that reader would round them; their inputs are what their
LOW producers hand over, rounded as before. Their LOW weights are widened as
stored (a re-conversion would keep them exact: the check is a close
estimate).

``bf16_nodes`` asks what the model would compute with those float16 nodes
in bfloat16 (the fix localization checks first against an overflow,
``--fallback-dtype bf16 --keep-bf16``): their LOW outputs are rounded to
bfloat16, and again to their own type only where a float16 node reads them
(the Cast a converter puts between the two); each of their LOW inputs is
rounded to bfloat16 as the Cast in front of them would round it: what a
float16 producer hands over, or, where a Cast to float16 feeds them, that
Cast's own input (the converter casts a float32 tensor to bfloat16
directly). Their float16 weights are widened as stored and then rounded to
bfloat16 (a re-conversion rounds them once from float32: a close estimate).

Graph optimizations must be off for the emulated session so nothing folds the
round trips away.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Collection

import numpy as np
import onnx_ir as ir

from ampconv.core.graphs import all_graphs
from ampconv.core.lowtypes import KEY_OF_DTYPE
from ampconv.numerics.modelio import ensure_types, untyped_values

FLOAT = ir.DataType.FLOAT
_DTYPE_ATTRS = ("to", "dtype")


@dataclasses.dataclass
class EmulationStats:
    """What the emulation changed (for the report and for tests)."""

    rounded: int = 0
    widened_initializers: int = 0
    retyped_attributes: int = 0
    unrounded: int = 0
    untyped: int = 0


def emulate(model: ir.Model, *, infer_types: bool = True, float32_nodes: Collection[str] = (),
            bf16_nodes: Collection[str] = ()) -> EmulationStats:
    """Rewrite ``model`` in place into its float32 emulation (rules 1-5).

    Missing tensor types are inferred first (``infer_types=False``: the caller
    already ran ``modelio.ensure_types``); outputs whose type stays unknown
    cannot be rounded and are counted in ``stats.untyped``. ``float32_nodes``
    (node names): emulate them kept float32; ``bf16_nodes``: emulate them in
    bfloat16 (see the module docstring). A node named in both stays float32.
    """
    if infer_types:
        ensure_types(model)
    stats = EmulationStats(untyped=untyped_values(model))
    names = NameMaker()
    replaced: dict[ir.Value, ir.Value] = {}
    graphs = all_graphs(model)
    kept = frozenset(float32_nodes)
    bf16 = frozenset(bf16_nodes) - kept
    low_readers = _low_compute_nodes(graphs, kept | bf16) if kept or bf16 else frozenset()
    sources = _bf16_sources(graphs, bf16) if bf16 else []
    for graph in graphs:
        _widen_initializers(graph, stats)
        _round_graph_inputs(graph, names, replaced, stats)
        for node in list(graph):
            _retype_attributes(node, stats)
            for value in node.outputs:
                if node.name in kept:
                    _round_for_readers(node, value, names, stats, low_readers)
                elif node.name in bf16:
                    _round_as_bf16(node, value, names, (replaced, stats), low_readers)
                else:
                    _round_output(node, value, names, replaced, stats)
    _round_bf16_inputs(sources, names, replaced, stats)
    _redirect_graph_outputs(graphs, replaced)
    return stats


def _low_compute_nodes(graphs, chosen) -> frozenset:
    """The nodes that compute in LOW (a LOW output, Casts aside), but those ``chosen`` to run another type."""
    return frozenset(
        node for graph in graphs for node in graph
        if node.op_type != "Cast" and node.name not in chosen and any(_low_dtype_of(v) for v in node.outputs)
    )


BFLOAT16 = ir.DataType.BFLOAT16
_CASTABLE = frozenset({FLOAT, ir.DataType.FLOAT16, BFLOAT16})


def _bf16_sources(graphs, bf16) -> list:
    """(node, input index, source) for each LOW input of a node emulated in bfloat16, read before emulation.

    ``source`` is the tensor the bfloat16 Cast in front of the node would
    read: the input of a Cast to LOW that feeds it (a float32 tensor is cast
    to bfloat16 directly), else None (the input as emulated: what a float16
    producer hands over). Inputs from other bfloat16 nodes need no Cast.
    """
    found = []
    for graph in graphs:
        for node in graph:
            if node.name not in bf16:
                continue
            for index, value in enumerate(node.inputs):
                if value is None or _low_dtype_of(value) is None:
                    continue
                producer = value.producer()
                if producer is not None and producer.name in bf16:
                    continue
                source = None
                if producer is not None and producer.op_type == "Cast" and producer.inputs \
                        and producer.inputs[0] is not None and producer.inputs[0].dtype in _CASTABLE:
                    source = producer.inputs[0]
                found.append((node, index, source))
    return found


def _round_bf16_inputs(sources, names: NameMaker, replaced, stats: EmulationStats) -> None:
    """Round each input of a bfloat16 node to bfloat16 (``_bf16_sources``), right in front of the node."""
    for node, index, source in sources:
        value = node.inputs[index] if source is None else replaced.get(source, source)
        if value is None or value.dtype != FLOAT:
            continue
        nodes, rounded = round_trip(value, BFLOAT16, names)
        node.replace_input_with(index, rounded)
        node.graph.insert_before(node, nodes)
        stats.rounded += 1


def _round_as_bf16(node: ir.Node, value: ir.Value, names: NameMaker, state, readers) -> None:
    """A node emulated in bfloat16: its LOW output rounded to bfloat16, and to its own type for LOW ``readers``."""
    replaced, stats = state
    low = _low_dtype_of(value)
    nodes = _widen_and_round(value, names, replaced, stats, as_type=BFLOAT16)
    if nodes is None:
        return
    _swap_names(value, replaced[value], names)
    rounded = replaced[value]
    uses = [use for use in rounded.uses() if use[0] in readers]
    if uses and low != BFLOAT16:
        again, narrowed = round_trip(rounded, low, names)
        for user, index in uses:
            user.replace_input_with(index, narrowed)
        nodes = nodes + again
    node.graph.insert_after(node, nodes)


def _round_for_readers(node: ir.Node, value: ir.Value, names: NameMaker, stats: EmulationStats, readers) -> None:
    """A node kept float32: widen its LOW output, rounded only for the LOW nodes among its readers."""
    low = _low_dtype_of(value)
    if low is None:
        return
    value.dtype = FLOAT
    uses = [use for use in value.uses() if use[0] in readers]
    if not uses:
        return
    nodes, rounded = round_trip(value, low, names)
    for user, index in uses:
        user.replace_input_with(index, rounded)
    node.graph.insert_after(node, nodes)
    stats.rounded += 1


class NameMaker:
    """Fresh value/node names: the original name, a reserved infix, a tag and a counter."""

    def __init__(self, prefix: str = "__ampconv_emu") -> None:
        self._counter = itertools.count()
        self._prefix = prefix

    def __call__(self, base: str | None, tag: str) -> str:
        return f"{base or 'v'}{self._prefix}_{tag}_{next(self._counter)}"


def _low_dtype_of(value: ir.Value):
    return value.dtype if value.dtype in KEY_OF_DTYPE else None


def _widen_initializers(graph: ir.Graph, stats: EmulationStats) -> None:
    # Rule 1.
    for value in graph.initializers.values():
        tensor = value.const_value
        if tensor is None or tensor.dtype not in KEY_OF_DTYPE:
            continue
        value.const_value = _widened(tensor)
        value.dtype = FLOAT
        stats.widened_initializers += 1


def _widened(tensor) -> ir.LazyTensor:
    # Lazy: external weights are read and widened only while the copy is saved.
    def widen():
        return ir.tensor(np.asarray(tensor.numpy()).astype(np.float32), name=tensor.name)

    return ir.LazyTensor(widen, dtype=FLOAT, shape=tensor.shape, name=tensor.name)


def _retype_attributes(node: ir.Node, stats: EmulationStats) -> None:
    # Rule 2.
    for name, attr in list(node.attributes.items()):
        if attr.type == ir.AttributeType.INT and name in _DTYPE_ATTRS:
            if attr.value in KEY_OF_DTYPE:
                node.attributes[name] = ir.AttrInt64(name, int(FLOAT))
                stats.retyped_attributes += 1
        elif attr.type == ir.AttributeType.TENSOR:
            tensor = attr.as_tensor()
            if tensor.dtype in KEY_OF_DTYPE:
                array = np.asarray(tensor.numpy()).astype(np.float32)
                node.attributes[name] = ir.AttrTensor(name, ir.tensor(array, name=tensor.name))
                stats.retyped_attributes += 1


def round_trip(value: ir.Value, low: ir.DataType, names: NameMaker):
    """Cast(to=low) -> Cast(to=FLOAT) nodes consuming ``value``; returns (nodes, rounded)."""
    down = ir.node("Cast", [value], {"to": int(low)}, name=names(value.name, "down"))
    down.outputs[0].name = names(value.name, "low")
    down.outputs[0].dtype = low
    down.outputs[0].shape = value.shape
    up = ir.node("Cast", [down.outputs[0]], {"to": int(FLOAT)}, name=names(value.name, "up"))
    rounded = up.outputs[0]
    rounded.dtype = FLOAT
    rounded.shape = value.shape
    return [down, up], rounded


def _redirect_uses(value: ir.Value, rounded: ir.Value, skip: ir.Node) -> None:
    # Every consumer (including nodes inside subgraphs) but the rounding Cast itself.
    for use in list(value.uses()):
        node, index = use[0], use[1]
        if node is not skip:
            node.replace_input_with(index, rounded)


def _swap_names(value: ir.Value, rounded: ir.Value, names: NameMaker) -> None:
    original = value.name
    value.name = names(original, "f32")
    rounded.name = original


def _round_graph_inputs(graph, names, replaced, stats) -> None:
    # Rule 3.
    for value in graph.inputs:
        if value.is_initializer():
            continue  # an initializer input was widened by rule 1 (exact)
        nodes = _widen_and_round(value, names, replaced, stats)
        if nodes is None:
            continue
        # Graph inputs keep their names: the harness feeds them by name.
        replaced[value].name = names(value.name, "rounded")
        if len(graph):
            graph.insert_before(graph.node(0), nodes)
        else:
            graph.extend(nodes)


def _round_output(node, value, names, replaced, stats) -> None:
    # Rule 4.
    nodes = _widen_and_round(value, names, replaced, stats)
    if nodes is not None:
        _swap_names(value, replaced[value], names)
        node.graph.insert_after(node, nodes)


def _widen_and_round(value, names, replaced, stats, as_type=None):
    """Make a LOW ``value`` float32 and route its uses through a round trip through its type (or ``as_type``).

    Returns the round-trip nodes for the caller to place (``replaced[value]``
    is their output), or None when ``value`` is not a LOW tensor.
    """
    low = _low_dtype_of(value)
    if low is None:
        if _retype_container(value):
            stats.unrounded += 1
        return None
    value.dtype = FLOAT
    if not value.name:
        # An omitted optional output (LSTM's Y left out): nothing reads it, and a Cast of "" is invalid.
        return None
    nodes, rounded = round_trip(value, as_type or low, names)
    _redirect_uses(value, rounded, skip=nodes[0])
    replaced[value] = rounded
    stats.rounded += 1
    return nodes


def _retype_container(value: ir.Value) -> bool:
    # Rule 5: Sequence/Optional of a LOW tensor.
    vtype = value.type
    elem = getattr(vtype, "elem_type", None)
    if elem is None or getattr(elem, "dtype", None) not in KEY_OF_DTYPE:
        return False
    new_elem = ir.TensorType(FLOAT)
    value.type = type(vtype)(new_elem)
    return True


def _redirect_graph_outputs(graphs, replaced) -> None:
    for graph in graphs:
        for index, value in enumerate(graph.outputs):
            if value in replaced:
                graph.outputs[index] = replaced[value]


def widen_bfloat16_io(model: ir.Model) -> int:
    """Give the main graph float32 inputs/outputs where it declares bfloat16.

    numpy cannot hand bfloat16 to or take it from onnxruntime, so the native
    runner wraps such a model: ``Cast(to=BFLOAT16)`` after a float input (the
    same rounding a caller would do) and ``Cast(to=FLOAT)`` before an output
    (exact). Names are kept. Returns the number of wrapped inputs and outputs.
    """
    graph = model.graph
    names = NameMaker()
    count = 0
    for value in list(graph.inputs):
        if value.dtype != ir.DataType.BFLOAT16 or value.is_initializer():
            continue
        original = value.name
        value.name = names(original, "bf16")
        fresh = ir.Value(name=original, type=ir.TensorType(FLOAT), shape=value.shape)
        cast = ir.node("Cast", [fresh], {"to": int(ir.DataType.BFLOAT16)}, name=names(original, "in"))
        index = list(graph.inputs).index(value)
        graph.inputs[index] = fresh
        # The old input value becomes the Cast's output.
        cast_out = cast.outputs[0]
        cast_out.dtype = ir.DataType.BFLOAT16
        cast_out.shape = value.shape
        for use in list(value.uses()):
            use[0].replace_input_with(use[1], cast_out)
        for i, out in enumerate(graph.outputs):
            if out is value:
                graph.outputs[i] = cast_out
        cast_out.name = value.name
        graph.insert_before(graph.node(0), [cast]) if len(graph) else graph.append(cast)
        count += 1
    for index, value in enumerate(list(graph.outputs)):
        if value.dtype != ir.DataType.BFLOAT16:
            continue
        original = value.name
        value.name = names(original, "bf16")
        cast = ir.node("Cast", [value], {"to": int(FLOAT)}, name=names(original, "out"))
        cast.outputs[0].name = original
        cast.outputs[0].dtype = FLOAT
        cast.outputs[0].shape = value.shape
        graph.append(cast)
        graph.outputs[index] = cast.outputs[0]
        count += 1
    return count
