"""A small model holding one node of each distinct signature: onnxruntime's load check at a fraction of the cost.

Creating an onnxruntime session costs far more than the conversion itself on
big graphs (1.4 s on a 4,000-node chain, over 60 s at 40,000: the CPU provider
wraps every float16 node in casts of its own). What the load check proves is
per node: onnxruntime has a kernel for the node's op, domain, opset, input and
output types and attributes, and its own type inference accepts it. Nodes with
the same signature get the same answer, so one node of each is enough; that
the nodes fit together (each value has one type for its producer and its
consumers) is what onnx.checker's full check proves on the whole model.

The probe only ever speeds up acceptance: a probe that loads proves the
model's nodes load; a probe that is refused proves nothing until the whole
model confirms it (``ampconv.checks.staged``). So the probe must be faithful where it
can, and is not built where it cannot be:

- Each representative node gets fresh graph inputs with the original values'
  types. Float constants (weights, biases, scales) become graph inputs; small
  integer or bool constants (shapes, axes, pads: at most
  ``SMALL_CONSTANT_BYTES``) and empty constants stay constants, and their
  values are part of the signature, because onnxruntime's checks read them
  (Reshape's shape; Resize refuses a ``scales`` it cannot see is empty).
- A computed integer or bool input (Resize ``sizes`` from Shape -> Slice ->
  Concat, a Reshape target built from Shape and Gather) is what an op's
  inference may read the values of; a fresh input has none. Such a node is
  probed with a copy of the integer computation that feeds it (its *cone*, at
  most ``MAX_CONE_NODES`` nodes), whose float roots and the node's own inputs
  carry their real shapes, so onnxruntime propagates the same values it would
  in the whole model. Each such node is a signature of its own.

A rejection of a probe node stands for every node of its signature (``members``).
Not probed (``build_probe`` returns None, and the whole model is loaded):
models with local functions, nodes with subgraphs (If/Loop/Scan: their bodies
read values of the enclosing graph), values whose type is unknown, and nodes
whose cone is too large or passes through such a node.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Hashable, List, Optional

import onnx_ir as ir

from ampconv.tensors import tensorsize
from ampconv.core.graphs import subgraphs_of
from ampconv.plan.values import constant_tensor
from ampconv.runtime.schema import normalize_domain
from ampconv.reading.shapes import ShapeSource

# Constant inputs up to this size keep their values in the probe (and in the signature).
SMALL_CONSTANT_BYTES = 1024
# Integer constants inside a copied cone (index tables, say) up to this size; a larger one makes
# the node unprobeable rather than the probe heavy.
CONE_CONSTANT_BYTES = 64 * 1024
# A shape computation longer than this is not copied: the whole model is loaded instead.
MAX_CONE_NODES = 64

_FLOAT_DATA = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16, ir.DataType.DOUBLE})



class Unprobeable(Exception):
    """A node the probe cannot represent faithfully: the whole model is loaded instead."""


@dataclasses.dataclass
class Probe:
    """The probe model and, per probe node name, the names of the nodes it stands for."""

    model: ir.Model
    members: Dict[str, List[str]]

    @property
    def nodes(self) -> int:
        """How many nodes the probe stands for by signature (its representatives)."""
        return len(self.members)


def signature(node: ir.Node, opsets: Dict[str, int], *, cones: bool = True) -> Optional[Hashable]:
    """What decides onnxruntime's kernel and type checks for ``node``; None when it cannot be probed alone.

    A node with a computed integer input has no shared signature: its cone is
    part of what onnxruntime sees, so it is keyed by the node itself. With
    ``cones`` off, such an input is keyed by its type like any other (the
    users'-session probe, ``ampconv.checks.neighborhoods``, sees the cone as
    the node's neighbours).
    """
    attributes = _attributes_key(node) if node.attributes else ()
    if attributes is None:
        return None
    domain = normalize_domain(node.domain)
    inputs = []
    for value in node.inputs:
        if value is None or not value.name:
            inputs.append(None)
            continue
        value_type = value.type
        if value_type is None:
            return None
        if type(value_type) is _TENSOR_TYPE and value_type.dtype in _FLOAT_DATA:
            # A float input is never a computed integer, and only an empty float constant is kept.
            constant = _empty_constant(value)
        elif computed_integer(value):
            if cones:
                return ("cone", id(node))
            constant = None
        else:
            constant = small_constant(value)
        content = None if constant is None else (constant.dtype, tuple(constant.shape.numpy()), constant.tobytes())
        # No shape or rank: kernels are chosen by type, shapes are onnx.checker's to
        # judge, and intermediate values carry no inferred shape (ampconv.reading.load).
        inputs.append((_type_key(value_type), content))
    outputs = tuple(
        None if (not v.name) else (_type_key(v.type) if v.type is not None else "?") for v in node.outputs
    )
    return (domain, node.op_type, opsets.get(domain, 1), tuple(inputs), outputs, attributes)


def _attributes_key(node: ir.Node) -> Optional[tuple]:
    """The node's attributes as a signature part (tensors by type and shape); None when one holds a subgraph."""
    attributes = []
    for name, attribute in sorted(node.attributes.items()):
        if attribute.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
            return None
        if attribute.type == ir.AttributeType.TENSOR:
            tensor = attribute.value
            attributes.append((name, "tensor", tensor.dtype, tuple(tensor.shape.numpy())))
        elif attribute.type == ir.AttributeType.TENSORS:
            attributes.append((name, "tensors", tuple((t.dtype, tuple(t.shape.numpy())) for t in attribute.value)))
        else:
            value = attribute.value
            attributes.append((name, attribute.type, tuple(value) if isinstance(value, (list, tuple)) else value))
    return tuple(attributes)


_TENSOR_TYPE = ir.TensorType


def _type_key(value_type: ir.TypeProtocol) -> Hashable:
    """A value's type as a signature part: a tensor's element type, or the repr of any other type.

    ``repr`` is what onnx_ir hashes types by; a plain tensor type is keyed by its
    element type directly, which is the same distinction at a fraction of the cost.
    """
    return value_type.dtype if type(value_type) is _TENSOR_TYPE else repr(value_type)


def computed_integer(value: ir.Value) -> bool:
    """Whether ``value`` is a non-float tensor computed by a node (not a constant, not a graph input)."""
    if type(value.type) is not _TENSOR_TYPE or value.type.dtype in _FLOAT_DATA:
        return False
    return value.producer() is not None and constant_tensor(value) is None


def signatures_of(model: ir.Model) -> List[Optional[Hashable]]:
    """``signature`` of every node of the main graph, in order (computed once, read by both probes)."""
    opsets = {normalize_domain(d): v for d, v in model.opset_imports.items()}
    return [signature(node, opsets) for node in model.graph]


def build_probe(
    model: ir.Model, shapes: Optional[ShapeSource] = None, signatures: Optional[List[Optional[Hashable]]] = None
) -> Optional[Probe]:
    """The probe of ``model``; None when the whole model must be loaded (see the module docstring).

    ``shapes`` gives the real shape of a value the IR holds none for (only
    asked for nodes probed with their cone); without it such values stay
    shapeless. ``signatures``: ``signatures_of(model)`` when the caller has them.
    """
    if model.functions:
        return None
    keys = signatures if signatures is not None else signatures_of(model)
    groups: Dict[Hashable, List[ir.Node]] = {}
    for node, key in zip(model.graph, keys):
        if key is None:
            return None
        groups.setdefault(key, []).append(node)
    builder = _ProbeBuilder(shapes or (lambda value: value.shape))
    try:
        for k, group in enumerate(groups.values()):
            builder.add(k, group)
    except Unprobeable:
        return None
    return builder.finish(model)


class _ProbeBuilder:
    """Collects the probe's nodes, inputs and constants, one representative (and its cone) at a time."""

    def __init__(self, shapes: ShapeSource) -> None:
        self.shapes = shapes
        self.graph_inputs: List[ir.Value] = []
        self.initializers: List[ir.Value] = []
        self.graph_outputs: List[ir.Value] = []
        self.nodes: List[ir.Node] = []
        self.members: Dict[str, List[str]] = {}

    def add(self, k: int, group: List[ir.Node]) -> None:
        """Add the representative of signature group ``k`` (its first node) and, if it needs one, its cone."""
        first = group[0]
        name = first.name or f"{first.op_type}_{k}"
        coned = any(v is not None and v.name and computed_integer(v) for v in first.inputs)
        copies: Dict[ir.Value, ir.Value] = {}
        if coned:
            self._copy_cone(first, f"p{k}", copies)
        inputs: List[Optional[ir.Value]] = []
        for j, value in enumerate(first.inputs):
            if value is None or not value.name:
                inputs.append(None)
            elif value in copies:
                inputs.append(copies[value])
            else:
                inputs.append(self._leaf(value, f"p{k}_in{j}", real_shape=coned, constant_limit=SMALL_CONSTANT_BYTES))
        outputs = [
            ir.Value(name=f"p{k}_out{j}" if value.name else "", type=value.type, shape=_copy_shape(value.shape))
            for j, value in enumerate(first.outputs)
        ]
        self.nodes.append(_clone(first, inputs, outputs, name))
        self.graph_outputs.extend(v for v in outputs if v.name)
        self.members[name] = [node.name for node in group if node.name]

    def finish(self, model: ir.Model) -> Probe:
        """The probe model of everything added."""
        graph = ir.Graph(
            self.graph_inputs, self.graph_outputs, nodes=self.nodes, initializers=self.initializers,
            opset_imports=dict(model.opset_imports), name="probe",
        )
        return Probe(ir.Model(graph, ir_version=model.ir_version), self.members)

    def _leaf(self, value: ir.Value, name: str, *, real_shape: bool, constant_limit: int) -> ir.Value:
        """A fresh probe value standing for ``value``: a kept constant, or a graph input."""
        shape = self.shapes(value) if real_shape else value.shape
        fresh = ir.Value(name=name, type=value.type, shape=_copy_shape(shape))
        constant = _kept_constant(value, constant_limit)
        if constant is not None:
            fresh.const_value = constant
            self.initializers.append(fresh)
        else:
            self.graph_inputs.append(fresh)
        return fresh

    def _copy_cone(self, node: ir.Node, prefix: str, copies: Dict[ir.Value, ir.Value]) -> None:
        """Copy the nodes computing ``node``'s integer inputs, in order; ``copies`` maps originals to copies."""
        cone: List[ir.Node] = []
        seen = set()
        stack = [v for v in node.inputs if v is not None and v.name and computed_integer(v)]
        while stack:
            producer = stack.pop().producer()
            if producer in seen:
                continue
            seen.add(producer)
            if subgraphs_of(producer) or len(seen) > MAX_CONE_NODES:
                raise Unprobeable(producer.name)
            cone.append(producer)
            stack.extend(v for v in producer.inputs if v is not None and v.name and computed_integer(v))
        position = {n: i for i, n in enumerate(node.graph)} if node.graph is not None else {}
        cone.sort(key=lambda n: position.get(n, 0))
        for i, original in enumerate(cone):
            inputs: List[Optional[ir.Value]] = []
            for j, value in enumerate(original.inputs):
                if value is None or not value.name:
                    inputs.append(None)
                elif value in copies:
                    inputs.append(copies[value])
                else:
                    too_big = constant_tensor(value) is not None and value.type is not None and (
                        value.type.dtype not in _FLOAT_DATA and _kept_constant(value, CONE_CONSTANT_BYTES) is None
                    )
                    if value.type is None or too_big:
                        raise Unprobeable(original.name)
                    copies[value] = self._leaf(
                        value, f"{prefix}_c{i}_in{j}", real_shape=True, constant_limit=CONE_CONSTANT_BYTES
                    )
                    inputs.append(copies[value])
            outputs = []
            for j, value in enumerate(original.outputs):
                fresh = ir.Value(name=f"{prefix}_c{i}_out{j}" if value.name else "", type=value.type)
                copies[value] = fresh
                outputs.append(fresh)
            self.nodes.append(_clone(original, inputs, outputs, f"{prefix}/cone/{original.name or i}"))


def _clone(node: ir.Node, inputs, outputs, name: str) -> ir.Node:
    return ir.Node(
        node.domain, node.op_type, inputs, attributes=list(node.attributes.values()),
        outputs=outputs, name=name, overload=node.overload,
    )


def _empty_constant(value: ir.Value) -> Optional[ir.TensorProtocol]:
    """The tensor of a float input that is an empty constant (the only float constant the probe keeps), or None."""
    if value.const_value is None and value.producer() is None:
        return None  # a graph input: no constant
    tensor = constant_tensor(value)
    try:
        return tensor if tensor is not None and tensorsize.size(tensor) == 0 else None
    except (TypeError, AttributeError):
        return None


def small_constant(value: ir.Value) -> Optional[ir.TensorProtocol]:
    """The tensor of a constant input the probe keeps: empty, or integer/bool of at most ``SMALL_CONSTANT_BYTES``.

    Float constants are data (a bias differs from node to node); their values
    would split every signature without changing onnxruntime's verdict.
    """
    return _kept_constant(value, SMALL_CONSTANT_BYTES)


def _kept_constant(value: ir.Value, limit: int) -> Optional[ir.TensorProtocol]:
    """``small_constant`` with the size limit of the caller (cones keep larger index tables)."""
    tensor = constant_tensor(value)  # value_float(s)/value_int(s) forms stay inputs: their types decide
    if tensor is None:
        return None
    try:
        if tensorsize.size(tensor) == 0:
            return tensor
        if tensor.dtype.is_floating_point() or tensor.dtype == ir.DataType.STRING:
            return None
        return tensor if tensorsize.nbytes(tensor) <= limit else None
    except (TypeError, AttributeError):  # no fixed size or unknown type: leave it an input
        return None


def expand(pins: Dict[str, str], probe: Probe) -> Dict[str, str]:
    """Pins on probe nodes -> the same pins on every node they stand for."""
    return {member: reason for name, reason in pins.items() for member in probe.members.get(name, [name])}


def _copy_shape(shape: Optional[ir.Shape]) -> Optional[ir.Shape]:
    return None if shape is None else ir.Shape(list(shape.dims))


__all__ = [
    "CONE_CONSTANT_BYTES",
    "MAX_CONE_NODES",
    "Probe",
    "SMALL_CONSTANT_BYTES",
    "build_probe",
    "computed_integer",
    "expand",
    "signature",
    "signatures_of",
    "small_constant",
]
