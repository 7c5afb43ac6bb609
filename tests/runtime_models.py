"""Models that onnxruntime's default session treats differently from the load check's, built by hand.

- ``bigru_tagger``: a paddle2onnx-style BiGRU sequence tagger: Transpose to time-major, two
  bidirectional GRUs each followed by Transpose and Reshape (directions joined), Transpose back,
  a MatMul projection and a bias Add. In float16 (``dtype="fp16"`` builds it so, as a converter
  with every node LOW writes it), onnxruntime 1.32's CPU session at ORT_ENABLE_ALL dies with
  SIGSEGV while it loads at ORT_ENABLE_EXTENDED and below: its NCHWc transformer fails on a
  float16 Transpose feeding a float16 MatMul.
- ``stacked_layers``: ``n`` identical residual blocks (MatMul, Add bias, Relu, Add residual) with
  weights of their own: a model whose neighbourhoods repeat, for the users'-session probe.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def bigru_tagger(path: Path, dtype: str = "fp32", features: int = 32, hidden: int = 48, tags: int = 9,
                 layers: int = 2, seed: int = 0) -> Path:
    """The BiGRU tagger above, float32 (``dtype="fp32"``) or all float16 (``"fp16"``); [batch, seq, features] in."""
    rng = np.random.default_rng(seed)
    np_type, elem = (np.float32, TensorProto.FLOAT) if dtype == "fp32" else (np.float16, TensorProto.FLOAT16)
    inits = []

    def weight(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np_type), name))
        return name

    nodes = [helper.make_node("Transpose", ["x"], ["time_major"], perm=[1, 0, 2], name="tr_in")]
    current, width = "time_major", features
    for i in range(layers):
        inits.append(numpy_helper.from_array(np.array([0, 0, 2 * hidden], np.int64), f"join_shape{i}"))
        nodes += [
            helper.make_node("GRU", [current, weight(f"W{i}", (2, 3 * hidden, width), 0.2),
                                     weight(f"R{i}", (2, 3 * hidden, hidden), 0.2), weight(f"B{i}", (2, 6 * hidden), 0.1)],
                             [f"y{i}", f"y_h{i}"], hidden_size=hidden, direction="bidirectional", linear_before_reset=1,
                             name=f"gru{i}"),
            helper.make_node("Transpose", [f"y{i}"], [f"yt{i}"], perm=[0, 2, 1, 3], name=f"tr{i}"),
            helper.make_node("Reshape", [f"yt{i}", f"join_shape{i}"], [f"joined{i}"], name=f"rs{i}"),
        ]
        current, width = f"joined{i}", 2 * hidden
    nodes += [
        helper.make_node("Transpose", [current], ["batch_major"], perm=[1, 0, 2], name="tr_out"),
        helper.make_node("MatMul", ["batch_major", weight("Wo", (2 * hidden, tags), 0.2)], ["scores"], name="proj"),
        helper.make_node("Add", ["scores", weight("bo", (tags,), 0.1)], ["logits"], name="bias"),
    ]
    graph = helper.make_graph(nodes, "bigru_tagger", [helper.make_tensor_value_info("x", elem, ["batch", "seq", features])],
                              [helper.make_tensor_value_info("logits", elem, ["batch", "seq", tags])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def stacked_layers(path: Path, n: int = 40, width: int = 16, seed: int = 0) -> Path:
    """``n`` identical residual blocks ``x + relu(x @ W_i + b_i)``; node names ``block{i}/{matmul,bias,relu,residual}``."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i in range(n):
        inits += [numpy_helper.from_array((rng.standard_normal((width, width)) * 0.1).astype(np.float32), f"W{i}"),
                  numpy_helper.from_array((rng.standard_normal(width) * 0.1).astype(np.float32), f"b{i}")]
        out = "y" if i == n - 1 else f"h{i}"
        nodes += [helper.make_node("MatMul", [x, f"W{i}"], [f"m{i}"], name=f"block{i}/matmul"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"block{i}/bias"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}"], name=f"block{i}/relu"),
                  helper.make_node("Add", [x, f"r{i}"], [out], name=f"block{i}/residual")]
        x = out
    graph = helper.make_graph(nodes, "stacked", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, str(path))
    return path
