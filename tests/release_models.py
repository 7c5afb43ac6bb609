"""Small models for the release step (issue 37): float32 islands that buy nothing, and ones that do.

Each builder returns ``(onnx.ModelProto, samples)``: the float32 model (IR 8,
opset 17) and a list of feeds drawn with a fixed seed, written by ``write``
as ``--calibration-data`` files.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def _model(nodes, inputs, outputs, initializers, opset: int = 17) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "release", inputs, outputs, initializer=initializers)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


def _init(name: str, array) -> onnx.TensorProto:
    return nh.from_array(np.asarray(array, dtype=np.float32), name)


def _vi(name: str, shape, elem=T.FLOAT) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, elem, shape)


def _feeds(seed: int, scale: float, shape=(4, 16), count: int = 4):
    rng = np.random.default_rng(seed)
    return [{"x": (rng.standard_normal(shape) * scale).astype(np.float32)} for _ in range(count)]


def mish_through_exp():
    """x @ W -> Mish as m * tanh(log(1 + exp(m))) -> @ W2, with |m| up to ~50: exp overflows fp16 (data-overflow),
    but log(inf) = inf and tanh(inf) = 1, so m * 1 is what float32 gives: the island buys nothing."""
    rng = np.random.default_rng(3)
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"), h.make_node("Exp", ["m"], ["e"], name="exp"),
             h.make_node("Add", ["e", "one"], ["e1"], name="one_plus"), h.make_node("Log", ["e1"], ["sp"], name="log"),
             h.make_node("Tanh", ["sp"], ["t"], name="tanh"), h.make_node("Mul", ["m", "t"], ["mish"], name="mish"),
             h.make_node("MatMul", ["mish", "w2"], ["y"], name="mm2")]
    inits = [_init("w", rng.standard_normal((16, 16))), _init("one", 1.0),
             _init("w2", rng.standard_normal((16, 8)) / 4)]
    return _model(nodes, [_vi("x", [4, 16])], [_vi("y", [4, 8])], inits), _feeds(4, 3.0)


def residual_from_input():
    """y = (x + (x @ W) * 1e-6) @ W2: the residual Add reads the float32 graph input and a LOW branch (gray-promote);
    in LOW the 1e-6 branch is far below the residual's own rounding."""
    rng = np.random.default_rng(5)
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"), h.make_node("Mul", ["m", "g"], ["s"], name="scale"),
             h.make_node("Add", ["x", "s"], ["r"], name="residual"), h.make_node("Relu", ["r"], ["a"], name="relu"),
             h.make_node("MatMul", ["a", "w2"], ["y"], name="mm2")]
    inits = [_init("w", rng.standard_normal((16, 16)) / 4), _init("g", np.full(16, 1e-6)),
             _init("w2", rng.standard_normal((16, 8)) / 4)]
    return _model(nodes, [_vi("x", [4, 16])], [_vi("y", [4, 8])], inits), _feeds(6, 1.0)


def box_area():
    """Boxes decoded as exp(d) * anchors of 200 and 300, then sqrt(w * h): the area overflows fp16 and nothing
    downstream absorbs the inf (sqrt(inf) reaches the output): the release must keep it."""
    rng = np.random.default_rng(7)
    nodes = [h.make_node("MatMul", ["x", "w"], ["d"], name="mm"),
             h.make_node("Exp", ["d"], ["e"], name="exp"),
             h.make_node("Mul", ["e", "anchor"], ["wh"], name="scale_wh"),
             h.make_node("ReduceProd", ["wh", "axis"], ["area"], name="area", keepdims=1),
             h.make_node("Sqrt", ["area"], ["side"], name="side"),
             h.make_node("Concat", ["wh", "side"], ["y"], name="cat", axis=1)]
    inits = [_init("w", rng.standard_normal((16, 2)) / 4), _init("anchor", [[200.0, 300.0]]),
             nh.from_array(np.array([1], dtype=np.int64), "axis")]
    return _model(nodes, [_vi("x", [4, 16])], [_vi("y", [4, 3])], inits, opset=18), _feeds(8, 1.0)


def softmax_without_max():
    """Scores -> Exp / ReduceSum(Exp) -> Transpose -> @ V: Exp overflows (the island must stay float32), the
    Div's probabilities fit fp16, so it hands them on LOW to the Transpose (gray-handed)."""
    rng = np.random.default_rng(9)
    nodes = [h.make_node("MatMul", ["x", "w"], ["z"], name="scores"), h.make_node("Exp", ["z"], ["e"], name="exp"),
             h.make_node("ReduceSum", ["e", "axis"], ["s"], name="sum", keepdims=1),
             h.make_node("Div", ["e", "s"], ["p"], name="probs"),
             h.make_node("Transpose", ["p"], ["pt"], name="flip", perm=[1, 0]),
             h.make_node("MatMul", ["pt", "v"], ["y"], name="mix")]
    inits = [_init("w", rng.standard_normal((16, 16))), nh.from_array(np.array([1], dtype=np.int64), "axis"),
             _init("v", rng.standard_normal((4, 8)))]
    return _model(nodes, [_vi("x", [4, 16])], [_vi("y", [16, 8])], inits), _feeds(10, 4.0)


def write(samples, folder: Path) -> Path:
    """The samples as ``.npz`` files in ``folder`` (created): a ``--calibration-data`` folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, feeds in enumerate(samples):
        np.savez(folder / f"sample_{index}.npz", **feeds)
    return folder


def squared_embedding():
    """Token ids -> Gather(table of values up to 300) -> square -> Tanh -> @ W: the square overflows fp16 on any
    sample (values set by the weights, not by a float input), and Tanh(inf) = 1 = Tanh(9e4)."""
    rng = np.random.default_rng(11)
    table = rng.uniform(150.0, 300.0, (32, 16)) * np.where(rng.random((32, 16)) < 0.5, -1.0, 1.0)
    nodes = [h.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             h.make_node("Mul", ["e", "e"], ["sq"], name="square"),
             h.make_node("Tanh", ["sq"], ["t"], name="squash"),
             h.make_node("MatMul", ["t", "w"], ["y"], name="proj")]
    inits = [_init("table", table), _init("w", rng.standard_normal((16, 8)))]
    return _model(nodes, [_vi("ids", [4], T.INT64)], [_vi("y", [4, 8])], inits), \
        [{"ids": rng.integers(0, 32, 4).astype(np.int64)} for _ in range(4)]


def _decomposed_norm(prefix: str, x: str, eps: float, axis: str = "axis"):
    """The legacy exporter's LayerNorm spelling: (x - mean) / sqrt(mean((x - mean)^2) + eps), then gamma, beta
    (nodes named ``prefix``_...; the eps Add is ``prefix``_eps)."""
    nodes = [h.make_node("ReduceMean", [x], [f"{prefix}_mu"], name=f"{prefix}_mean", axes=[-1]),
             h.make_node("Sub", [x, f"{prefix}_mu"], [f"{prefix}_d"], name=f"{prefix}_sub"),
             h.make_node("Pow", [f"{prefix}_d", "two"], [f"{prefix}_sq"], name=f"{prefix}_pow"),
             h.make_node("ReduceMean", [f"{prefix}_sq"], [f"{prefix}_var"], name=f"{prefix}_var", axes=[-1]),
             h.make_node("Add", [f"{prefix}_var", f"{prefix}_e"], [f"{prefix}_ve"], name=f"{prefix}_eps"),
             h.make_node("Sqrt", [f"{prefix}_ve"], [f"{prefix}_std"], name=f"{prefix}_sqrt"),
             h.make_node("Div", [f"{prefix}_d", f"{prefix}_std"], [f"{prefix}_n"], name=f"{prefix}_div"),
             h.make_node("Mul", [f"{prefix}_n", f"{prefix}_g"], [f"{prefix}_ng"], name=f"{prefix}_gamma"),
             h.make_node("Add", [f"{prefix}_ng", f"{prefix}_b"], [f"{prefix}_out"], name=f"{prefix}_beta")]
    inits = [_init(f"{prefix}_e", eps), _init(f"{prefix}_g", np.ones(16)), _init(f"{prefix}_b", np.zeros(16))]
    return nodes, inits


def norm_after_norm():
    """x (a float input of any scale) -> @ W0 -> LayerNorm (eps 1e-5) -> @ W -> Relu -> LayerNorm (eps 1e-12) -> @ W2, both
    norms in the legacy exporter's decomposed spelling. The second norm's eps flushes to 0 in fp16 (hard-constant)
    and changes nothing: its variance is about 1 whatever x's scale, because the first norm took the scale out."""
    rng = np.random.default_rng(13)
    first, first_inits = _decomposed_norm("ln0", "s", 1e-5)
    second, second_inits = _decomposed_norm("ln1", "a", 1e-12)
    nodes = [h.make_node("MatMul", ["x", "w0"], ["s"], name="stem"), *first, h.make_node("MatMul", ["ln0_out", "w"], ["m"], name="mm"),
             h.make_node("Relu", ["m"], ["a"], name="relu"), *second,
             h.make_node("MatMul", ["ln1_out", "w2"], ["y"], name="mm2")]
    inits = [_init("two", 2.0), *first_inits, *second_inits, _init("w0", rng.standard_normal((16, 16)) / 4),
             _init("w", rng.standard_normal((16, 16)) / 4),
             _init("w2", rng.standard_normal((16, 8)) / 4)]
    return _model(nodes, [_vi("x", [4, 16])], [_vi("y", [4, 8])], inits), _feeds(14, 1.0)


def norm_on_the_input():
    """x -> @ W0 -> LayerNorm (eps 1e-12, decomposed) -> @ W: the variance follows x's square, so a random
    sample's figures say nothing of the eps's effect on the user's data (of any scale)."""
    rng = np.random.default_rng(15)
    norm, norm_inits = _decomposed_norm("ln", "s", 1e-12)
    nodes = [h.make_node("MatMul", ["x", "w0"], ["s"], name="stem"), *norm,
             h.make_node("MatMul", ["ln_out", "w"], ["y"], name="mm")]
    inits = [_init("two", 2.0), *norm_inits, _init("w0", rng.standard_normal((16, 16)) / 4),
             _init("w", rng.standard_normal((16, 8)) / 4)]
    return _model(nodes, [_vi("x", [4, 16])], [_vi("y", [4, 8])], inits), _feeds(16, 1.0)
