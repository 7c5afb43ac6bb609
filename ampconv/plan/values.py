"""Questions about values the rules and the rewrite ask: is it float32, is it a constant, its data."""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default


_TENSOR_TYPE = ir.TensorType
_FLOAT = ir.DataType.FLOAT


def is_float(value: Optional[ir.Value]) -> bool:
    """Only tensor(float) is ever a conversion candidate (docs/precision.md, preamble)."""
    if value is None:
        return False
    kind = value.type  # asked for every input and output of every node: one property read, no isinstance
    return type(kind) is _TENSOR_TYPE and kind.dtype == _FLOAT


def is_constant(value: ir.Value) -> bool:
    """Initializers and Constant outputs never vote (converting them is free)."""
    producer = value.producer()
    if producer is None:
        return value.is_initializer() or value.const_value is not None
    # A node's output is never an initializer (onnx_ir refuses one): asked for every
    # activation a rule reads, this skips that question.
    return value.const_value is not None or (producer.op_type == "Constant" and is_default(producer))


def constant_tensor(value: ir.Value) -> Optional[ir.TensorProtocol]:
    """The tensor of a constant value: an initializer's, or a Constant node's ``value`` attribute; else None."""
    if value.const_value is not None:
        return value.const_value
    producer = value.producer()
    if producer is None or producer.op_type != "Constant":
        return None
    attr = producer.attributes.get("value")
    return attr.value if attr is not None and attr.type == ir.AttributeType.TENSOR else None


def constant_array(value: ir.Value) -> Optional[np.ndarray]:
    """The numpy data of a constant value (initializer or Constant node), or None."""
    tensor = constant_tensor(value)
    if tensor is None:
        producer = value.producer()
        if producer is None or producer.op_type != "Constant":
            return None
        for name in ("value_float", "value_floats"):
            a = producer.attributes.get(name)
            if a is not None:
                return np.asarray(a.value, dtype=np.float32)
        return None
    try:
        return tensor.numpy()
    except Exception:  # noqa: BLE001 - unreadable data is reported by the loader, not here
        return None


def origin(value: ir.Value) -> str:
    """How a reason names where ``value`` comes from: its producer, or the graph input."""
    producer = value.producer()
    if producer is not None:
        return producer.name or producer.op_type
    return f"input {value.name}"
