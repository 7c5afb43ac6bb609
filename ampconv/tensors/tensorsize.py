"""Sizes of tensors from their metadata, without building an ``ir.Shape`` per question.

``onnx_ir``'s ``TensorProtoTensor.shape`` builds a new frozen ``Shape`` on every
access, and ``size``/``nbytes`` go through it: on a graph with 15,000
initializers the report's weight totals alone cost a quarter of a second.
For a tensor still backed by its ``TensorProto`` the dims are read from the
proto; every other tensor answers through its own properties. The figures are
``onnx_ir``'s: ``nbytes`` rounds a sub-byte type (int4) up, as it does.
"""

from __future__ import annotations

import math
from typing import Optional, Tuple

import onnx
import onnx_ir as ir

_PROTO_TENSOR = ir.serde.TensorProtoTensor


def dims(tensor: ir.TensorProtocol) -> Tuple[int, ...]:
    """The tensor's dimensions (every dim of a tensor is a number)."""
    if type(tensor) is _PROTO_TENSOR:
        return tuple(tensor.raw.dims)
    return tuple(tensor.shape.numpy())


def size(tensor: ir.TensorProtocol) -> int:
    """The number of elements of ``tensor``."""
    if type(tensor) is _PROTO_TENSOR:
        return math.prod(tensor.raw.dims)
    return tensor.size


def nbytes(tensor: ir.TensorProtocol) -> int:
    """The bytes of ``tensor``'s data, as ``tensor.nbytes`` gives them."""
    if type(tensor) is _PROTO_TENSOR:
        proto = tensor.raw
        itemsize = _ITEMSIZE.get(proto.data_type)
        if itemsize is None:  # no fixed size (STRING) or unknown: onnx_ir's own answer, or its error
            itemsize = ir.DataType(proto.data_type).itemsize
        return math.ceil(itemsize * math.prod(proto.dims))
    return tensor.nbytes


def _itemsizes() -> dict:
    """Bytes per element of each fixed-size ONNX data type (``ir.DataType(...)`` per question costs an enum call)."""
    sizes = {}
    for data_type in ir.DataType:
        try:
            sizes[data_type.value] = data_type.itemsize
        except TypeError:  # STRING, UNDEFINED
            continue
    return sizes


_ITEMSIZE = _itemsizes()


def proto_float32_bytes(tensor: Optional[ir.TensorProtocol], max_elements: int) -> Optional[bytes]:
    """The little-endian bytes of a float32 tensor of 1 to ``max_elements`` values stored inline in its proto.

    Batched scans and casts of many small tensors join these bytes instead of
    building an array per tensor. External, typed-field (``float_data``) and
    in-memory tensors, and larger ones, answer None.
    """
    if type(tensor) is not _PROTO_TENSOR:
        return None
    proto = tensor.raw
    if proto.data_type != _FLOAT or proto.data_location == _EXTERNAL or not proto.HasField("raw_data"):
        return None
    raw = proto.raw_data
    if not 0 < len(raw) <= 4 * max_elements or len(raw) != 4 * math.prod(proto.dims):
        return None
    return raw


_FLOAT = onnx.TensorProto.FLOAT
_EXTERNAL = onnx.TensorProto.EXTERNAL

# Sub-byte element types and their bits (onnx packs them).
_PACKED_BITS = {
    onnx.TensorProto.UINT4: 4, onnx.TensorProto.INT4: 4, onnx.TensorProto.FLOAT4E2M1: 4,
    getattr(onnx.TensorProto, "UINT2", -1): 2, getattr(onnx.TensorProto, "INT2", -1): 2,
    getattr(onnx.TensorProto, "FLOAT6E2M3", -1): 6, getattr(onnx.TensorProto, "FLOAT6E3M2", -1): 6,
}


def tensor_bytes(data_type: int, numel: int) -> Optional[int]:
    """Bytes of ``numel`` elements of ``data_type`` as onnx stores them (sub-byte types packed); None for strings."""
    if data_type in _PACKED_BITS:
        return math.ceil(numel * _PACKED_BITS[data_type] / 8)
    if data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    return numel * onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize


__all__ = ["dims", "nbytes", "proto_float32_bytes", "size", "tensor_bytes"]
