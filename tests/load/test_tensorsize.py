"""ampconv.tensors.tensorsize gives onnx_ir's own figures, read from the proto when it can."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from ampconv.tensors import tensorsize


def _proto_tensor(array: np.ndarray, dtype=None) -> ir.TensorProtocol:
    proto = onnx.numpy_helper.from_array(array, name="t")
    if dtype is not None:
        proto = onnx.helper.make_tensor("t", dtype, array.shape, array.reshape(-1).tolist())
    tensor = ir.serde.deserialize_tensor(proto)
    assert type(tensor) is ir.serde.TensorProtoTensor  # the fast path is what this test is about
    return tensor


@pytest.mark.parametrize("array", [np.zeros((3, 4, 5), np.float32), np.zeros((0, 7), np.float32),
                                   np.float32(2.5).reshape(()), np.arange(6, dtype=np.int64).reshape(2, 3)])
def test_proto_backed_tensor_figures_match_onnx_ir(array):
    tensor = _proto_tensor(array)
    assert tensorsize.dims(tensor) == tuple(tensor.shape.numpy())
    assert tensorsize.size(tensor) == tensor.size == array.size
    assert tensorsize.nbytes(tensor) == tensor.nbytes == array.nbytes


def test_sub_byte_type_rounds_up_as_onnx_ir_does():
    tensor = _proto_tensor(np.zeros(3, np.int8), dtype=onnx.TensorProto.INT4)
    assert tensorsize.nbytes(tensor) == tensor.nbytes == 2  # 3 half-bytes


def test_other_tensors_answer_through_their_own_properties():
    tensor = ir.Tensor(np.ones((2, 8), np.float16))
    assert type(tensor) is not ir.serde.TensorProtoTensor
    assert tensorsize.dims(tensor) == (2, 8)
    assert tensorsize.size(tensor) == 16
    assert tensorsize.nbytes(tensor) == 32
