"""Real shapes of a model's values, found once and only when someone asks.

A model read without inferred shapes (``ampconv.reading.load`` keeps element types
only for graphs without control flow: deserializing every shape costs a third
of reading a big graph) holds none on its intermediate values. The few
questions that need one (the load-check probe's shape computations, the range
guard's reduction extents) ask an ``inferred_shapes`` source: the IR's own
shape when it has one, else onnx shape inference's, run once on a weight-free
copy of the model the first time a value lacks a shape.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Sequence

import onnx.shape_inference
import onnx_ir as ir

from ampconv.reading.prepare import weight_free_proto

ShapeSource = Callable[[ir.Value], Optional[ir.Shape]]


def inferred_shapes(model: ir.Model, inputs: Optional[Mapping[str, Sequence[int]]] = None) -> ShapeSource:
    """A ``ShapeSource`` for ``model`` (see the module docstring); main-graph values only.

    With ``inputs`` (graph input name -> concrete shape), inference runs at
    those shapes and the IR's own shapes are not consulted: every dim it can
    propagate (through Shape -> Gather -> Concat -> Reshape) comes out a number.
    """
    found: Dict[str, ir.Shape] = {}
    done: List[bool] = []

    def shape(value: ir.Value) -> Optional[ir.Shape]:
        if value.shape is not None and inputs is None:
            return value.shape
        if not done:
            done.append(True)
            found.update(_infer_main_graph_shapes(model, inputs or {}))
        return found.get(value.name)

    return shape


def _infer_main_graph_shapes(model: ir.Model, inputs: Mapping[str, Sequence[int]]) -> Dict[str, ir.Shape]:
    """Shapes onnx inference finds for the main graph's values (empty when it fails)."""
    try:
        proto = weight_free_proto(model)
        _forget_negative_dims(proto.graph)
        for info in proto.graph.input:
            if info.name in inputs and info.type.HasField("tensor_type"):
                dims = info.type.tensor_type.shape.dim
                for dim, size in zip(dims, inputs[info.name]):
                    dim.Clear()
                    dim.dim_value = size
        proto = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - best effort: a value without a shape stays shapeless
        return {}
    shapes: Dict[str, ir.Shape] = {}
    for info in list(proto.graph.value_info) + list(proto.graph.output) + list(proto.graph.input):
        if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape"):
            shapes[info.name] = ir.serde.deserialize_type_proto_for_shape(info.type)
    return shapes


def _forget_negative_dims(graph: onnx.GraphProto) -> None:
    """Clear declared dims of -1 (paddle2onnx's word for unknown): inference then computes them, not copies -1."""
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        if info.type.HasField("tensor_type"):
            for dim in info.type.tensor_type.shape.dim:
                if dim.HasField("dim_value") and dim.dim_value < 0:
                    dim.Clear()


__all__ = ["ShapeSource", "inferred_shapes"]
