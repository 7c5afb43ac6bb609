"""A small model holding one node of each distinct signature: onnxruntime's load check at a fraction of the cost.

Creating an onnxruntime session costs far more than the conversion itself on
big graphs (1.4 s on a 4,000-node chain, over 60 s at 40,000: the CPU provider
wraps every float16 node in casts of its own). What the load check proves is
per node: onnxruntime has a kernel for the node's op, domain, opset, input and
output types and attributes, and its own type inference accepts it. Nodes with
the same signature get the same answer, so one node of each is enough; that
the nodes fit together (each value has one type for its producer and its
consumers) is what onnx.checker's full check proves on the whole model.

The probe gives each representative node fresh graph inputs and outputs with
the original values' types and shapes, named after its first node. Float
constants (weights, biases, scales) become graph inputs; small integer or bool
constants (shapes, axes, pads: at most ``SMALL_CONSTANT_BYTES``) and empty
constants stay constants, and their values are part of the signature, because
onnxruntime's checks read them (Reshape's shape; Resize refuses a ``scales``
it cannot see is empty). A rejection of a probe node stands for every node of
its signature (``members``).

Not probed (``build_probe`` returns None, and the whole model is loaded):
models with local functions, nodes with subgraphs (If/Loop/Scan: their bodies
read values of the enclosing graph), or values whose type is unknown.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Hashable, List, Optional

import onnx_ir as ir

from ampconv import tensorsize
from ampconv.plan.values import constant_tensor
from ampconv.schema import normalize_domain


# Constant inputs up to this size keep their values in the probe (and in the signature).
SMALL_CONSTANT_BYTES = 1024


@dataclasses.dataclass
class Probe:
    """The probe model and, per probe node name, the names of the nodes it stands for."""

    model: ir.Model
    members: Dict[str, List[str]]

    @property
    def nodes(self) -> int:
        """How many nodes the probe holds (distinct signatures)."""
        return len(self.members)


def signature(node: ir.Node, opsets: Dict[str, int]) -> Optional[Hashable]:
    """What decides onnxruntime's kernel and type checks for ``node``; None when it cannot be probed alone."""
    domain = normalize_domain(node.domain)
    inputs = []
    for value in node.inputs:
        if value is None or not value.name:
            inputs.append(None)
        elif value.type is None:
            return None
        else:
            constant = small_constant(value)
            content = None if constant is None else (constant.dtype, tuple(constant.shape.numpy()), constant.tobytes())
            # No shape or rank: kernels are chosen by type, shapes are onnx.checker's to
            # judge, and intermediate values carry no inferred shape (ampconv.load).
            inputs.append((_type_key(value.type), content))
    outputs = tuple(
        None if (not v.name) else (_type_key(v.type) if v.type is not None else "?") for v in node.outputs
    )
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
    return (domain, node.op_type, opsets.get(domain, 1), tuple(inputs), outputs, tuple(attributes))


_TENSOR_TYPE = ir.TensorType


def _type_key(value_type: ir.TypeProtocol) -> Hashable:
    """A value's type as a signature part: a tensor's element type, or the repr of any other type.

    ``repr`` is what onnx_ir hashes types by; a plain tensor type is keyed by its
    element type directly, which is the same distinction at a fraction of the cost.
    """
    return value_type.dtype if type(value_type) is _TENSOR_TYPE else repr(value_type)


def build_probe(model: ir.Model) -> Optional[Probe]:
    """The probe of ``model``; None when the whole model must be loaded (see the module docstring)."""
    if model.functions:
        return None
    opsets = {normalize_domain(d): v for d, v in model.opset_imports.items()}
    groups: Dict[Hashable, List[ir.Node]] = {}
    for node in model.graph:
        key = signature(node, opsets)
        if key is None:
            return None
        groups.setdefault(key, []).append(node)
    graph_inputs: List[ir.Value] = []
    initializers: List[ir.Value] = []
    graph_outputs: List[ir.Value] = []
    nodes: List[ir.Node] = []
    members: Dict[str, List[str]] = {}
    for k, group in enumerate(groups.values()):
        first = group[0]
        inputs: List[Optional[ir.Value]] = []
        for j, value in enumerate(first.inputs):
            if value is None or not value.name:
                inputs.append(None)
                continue
            fresh = ir.Value(name=f"p{k}_in{j}", type=value.type, shape=_copy_shape(value.shape))
            constant = small_constant(value)
            if constant is not None:
                fresh.const_value = constant
                initializers.append(fresh)
            else:
                graph_inputs.append(fresh)
            inputs.append(fresh)
        outputs: List[ir.Value] = []
        for j, value in enumerate(first.outputs):
            fresh = ir.Value(name=f"p{k}_out{j}" if value.name else "", type=value.type, shape=_copy_shape(value.shape))
            outputs.append(fresh)
        name = first.name or f"{first.op_type}_{k}"
        nodes.append(
            ir.Node(
                first.domain, first.op_type, inputs, attributes=list(first.attributes.values()),
                outputs=outputs, name=name, overload=first.overload,
            )
        )
        graph_outputs.extend(v for v in outputs if v.name)
        members[name] = [node.name for node in group if node.name]
    graph = ir.Graph(
        graph_inputs, graph_outputs, nodes=nodes, initializers=initializers,
        opset_imports=dict(model.opset_imports), name="probe",
    )
    return Probe(ir.Model(graph, ir_version=model.ir_version), members)


def small_constant(value: ir.Value) -> Optional[ir.TensorProtocol]:
    """The tensor of a constant input the probe keeps: empty, or integer/bool of at most ``SMALL_CONSTANT_BYTES``.

    Float constants are data (a bias differs from node to node); their values
    would split every signature without changing onnxruntime's verdict.
    """
    tensor = constant_tensor(value)  # value_float(s)/value_int(s) forms stay inputs: their types decide
    if tensor is None:
        return None
    try:
        if tensorsize.size(tensor) == 0:
            return tensor
        if tensor.dtype.is_floating_point() or tensor.dtype == ir.DataType.STRING:
            return None
        return tensor if tensorsize.nbytes(tensor) <= SMALL_CONSTANT_BYTES else None
    except (TypeError, AttributeError):  # no fixed size or unknown type: leave it an input
        return None


def expand(pins: Dict[str, str], probe: Probe) -> Dict[str, str]:
    """Pins on probe nodes -> the same pins on every node they stand for."""
    return {member: reason for name, reason in pins.items() for member in probe.members.get(name, [name])}


def _copy_shape(shape: Optional[ir.Shape]) -> Optional[ir.Shape]:
    return None if shape is None else ir.Shape(list(shape.dims))


__all__ = ["Probe", "SMALL_CONSTANT_BYTES", "build_probe", "expand", "signature", "small_constant"]

