"""Make a loaded model ready for planning: names and element types.

1. Every node gets a name (``<OpType>_<n>`` when it has none), because the
   report, ``--keep-fp32`` and localization all speak in node names.
2. Element types: onnx shape inference (weights stripped first, so it works on
   any model size) fills value types; a schema-driven pass then fills what it
   left unknown (outputs of unknown ops' neighbours, partial inference), by
   unifying each output's type variable with the inputs that share it.
   Inferred types are merged whole: onnx-ir's ``ShapeInferencePass`` (1.1)
   merges only the element type, which turns a sequence or optional value
   into ``tensor(float)`` and makes the written model fail the checker
   (SequenceErase: "has unsupported type: tensor(float)").

Both are in-place ``onnx_ir`` passes (``NameNodesPass``, ``InferTypesPass``);
``name_nodes`` and ``infer_types`` run one of them on its own.
"""

from __future__ import annotations

from typing import Optional

import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassResult

from ampconv.reading.load import INFERRED_META_KEY
from ampconv.runtime.facts import RuntimeFacts
from ampconv.runtime.schema import normalize_domain, op_info
from ampconv.core.graphs import all_graphs

_ONNX_TYPES = {
    "tensor(float)": ir.DataType.FLOAT,
    "tensor(float16)": ir.DataType.FLOAT16,
    "tensor(bfloat16)": ir.DataType.BFLOAT16,
    "tensor(double)": ir.DataType.DOUBLE,
    "tensor(int64)": ir.DataType.INT64,
    "tensor(int32)": ir.DataType.INT32,
    "tensor(bool)": ir.DataType.BOOL,
}


class NameNodesPass(InPlacePass):
    """Give every unnamed node a unique, deterministic name; ``named`` says how many."""

    def __init__(self) -> None:
        self.named = 0

    def call(self, model: ir.Model) -> PassResult:
        taken, unnamed = set(), []
        for graph in all_graphs(model):
            for node in graph:
                if node.name:
                    taken.add(node.name)
                else:
                    unnamed.append(node)
        counter = 0
        named = 0
        for node in unnamed:  # in graph order, as found
            while True:
                counter += 1
                candidate = f"{node.op_type}_{counter}"
                if candidate not in taken:
                    break
            node.name = candidate
            taken.add(candidate)
            named += 1
        self.named += named
        return PassResult(model, modified=named > 0)


class InferTypesPass(InPlacePass):
    """Fill value types: onnx inference first, then schema unification for the rest.

    ``filled`` counts the values whose type or shape it set. ``runtime``
    answers for the ops onnx does not define (the conversion's target
    runtime; None: the installed onnxruntime's).
    """

    def __init__(self, runtime: Optional[RuntimeFacts] = None) -> None:
        self.filled = 0
        self.runtime = runtime

    def call(self, model: ir.Model) -> PassResult:
        before = self.filled
        if not model.meta.get(INFERRED_META_KEY):  # not already done when the model was read
            try:
                self._onnx_inference(model)
            except Exception:  # inference is best effort: the fill-in below still runs
                pass
        opsets = {normalize_domain(d): v for d, v in model.opset_imports.items()}
        for graph in all_graphs(model):
            for node in graph:
                self.filled += _fill_outputs(node, opsets, self.runtime)
        return PassResult(model, modified=self.filled > before)

    def _onnx_inference(self, model: ir.Model) -> None:
        """onnx shape inference on a weight-free copy; merge whole types, then shapes (case 2)."""
        import onnx

        self.filled += _type_initializers(model.graph)
        proto = weight_free_proto(model)
        inferred = ir.serde.deserialize_model(
            onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=False)
        )
        del proto
        for graph, inferred_graph in zip(all_graphs(model), all_graphs(inferred)):
            known = ir.convenience.create_value_mapping(inferred_graph)
            for name, value in ir.convenience.create_value_mapping(graph).items():
                found = known.get(name)
                if found is None:
                    continue
                filled = False
                if value.type is None and found.type is not None:
                    value.type = found.type
                    filled = True
                if found.shape is not None and value.shape != found.shape:
                    value.shape = found.shape
                    filled = True
                self.filled += filled


def name_nodes(model: ir.Model) -> int:
    """Run ``NameNodesPass`` on ``model``; returns how many nodes it named."""
    step = NameNodesPass()
    step(model)
    return step.named


def infer_types(model: ir.Model) -> None:
    """Run ``InferTypesPass`` on ``model``."""
    InferTypesPass()(model)


# Initializers above this many bytes are left out of the inference copy (their
# type and shape travel as graph inputs): inference never reads weight values.
_INFERENCE_TENSOR_LIMIT = 1000


def _type_initializers(graph: ir.Graph) -> int:
    """Give main-graph initializers without a type or shape those of their tensor; returns how many."""
    filled = 0
    for value in graph.initializers.values():
        tensor = value.const_value
        if tensor is not None and (value.shape is None or value.dtype is None):
            if value.shape is None:
                value.shape = tensor.shape
            if value.dtype is None:
                value.dtype = tensor.dtype
            filled += 1
    return filled


def weight_free_proto(model: ir.Model):
    """The model as a ModelProto without its large main-graph weights; ``model`` is unchanged after.

    Each initializer becomes a graph input for the call (so inference knows its
    type and shape, which ``_type_initializers`` filled) and the large ones lose
    their data. This does what
    ``onnx_ir``'s ``call_onnx_api`` does, but with set membership instead of
    list scans (that helper made inference quadratic: 1.1 s of a 40,000-node
    chain's conversion) and restoring the initializers in their file order, so
    output bytes do not depend on tensor sizes.
    """
    graph = model.graph
    initializers = list(graph.initializers.values())
    inputs = list(graph.inputs)
    is_input = set(inputs)
    detached = {}
    try:
        for value in initializers:
            tensor = value.const_value
            if value not in is_input:
                graph.inputs.append(value)
            if tensor is None or tensor.nbytes > _INFERENCE_TENSOR_LIMIT:
                graph.initializers.pop(value.name)
                detached[value] = tensor
                value.const_value = None
        return ir.serde.serialize_model(model)
    finally:
        for value, tensor in detached.items():
            value.const_value = tensor
        for value in list(graph.initializers.values()):
            graph.initializers.pop(value.name)
        for value in initializers:
            graph.initializers.add(value)
        graph.inputs.clear()
        graph.inputs.extend(inputs)


def _fill_outputs(node: ir.Node, opsets, runtime: Optional[RuntimeFacts]) -> int:
    """Type ``node``'s untyped outputs from its schema and inputs; returns how many it typed."""
    missing = [v for v in node.outputs if v.type is None]
    if not missing:
        return 0
    domain = normalize_domain(node.domain)
    if domain == "" and node.op_type == "Cast" and "to" in node.attributes:
        _set(node.outputs[0], ir.DataType(node.attributes["to"].value))
        return 1
    if domain == "" and node.op_type == "Constant":
        attr = node.attributes.get("value")
        if attr is not None and attr.type == ir.AttributeType.TENSOR:
            _set(node.outputs[0], attr.value.dtype)
            return 1
        if "value_float" in node.attributes or "value_floats" in node.attributes:
            _set(node.outputs[0], ir.DataType.FLOAT)
            return 1
        return 0
    info = op_info(domain, node.op_type, opsets.get(domain, 1), runtime=runtime)
    if not info.known:
        return 0
    typed = 0
    for j, value in enumerate(node.outputs):
        if value.type is not None:
            continue
        type_str = info.output_type(j)
        dtype = _from_inputs(node, info, type_str)
        if dtype is None and type_str is not None:
            allowed = info.allowed(type_str)
            if len(allowed) == 1:
                dtype = _ONNX_TYPES.get(next(iter(allowed)))
        if dtype is not None:
            _set(value, dtype)
            typed += 1
    return typed


def _from_inputs(node: ir.Node, info, type_str: Optional[str]) -> Optional[ir.DataType]:
    if type_str is None:
        return None
    for i, value in enumerate(node.inputs):
        if value is not None and info.input_type(i) == type_str and isinstance(value.type, ir.TensorType):
            return value.dtype
    return None


def _set(value: ir.Value, dtype: ir.DataType) -> None:
    value.type = ir.TensorType(dtype)
