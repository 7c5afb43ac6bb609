"""``emulate(model, bf16_nodes=...)`` (issue 32): chosen float16 nodes emulated as bfloat16.

Their outputs round to bfloat16 (and again to float16 where a float16 node
reads them); their inputs round to bfloat16 as the Cast in front of them
would: a Cast to float16 that feeds them is looked through, so a float32
tensor reaches them rounded once, to bfloat16.
"""

import numpy as np
import onnx
from ml_dtypes import bfloat16
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from ampconv.numerics import emulate as emulation
from ampconv.numerics import modelio, runners


def _fp16_chain(path) -> str:
    """A converted-like model: x (float32) -> Cast fp16 -> Mul 'big' (x 1000) -> Div 'small' (/ 1e4) -> Cast -> y."""
    nodes = [
        h.make_node("Cast", ["x"], ["x16"], to=T.FLOAT16, name="cast_in"),
        h.make_node("Mul", ["x16", "k"], ["big"], name="big"),
        h.make_node("Div", ["big", "d"], ["small"], name="small"),
        h.make_node("Cast", ["small"], ["y"], to=T.FLOAT, name="cast_out"),
    ]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [3])],
                         [h.make_tensor_value_info("y", T.FLOAT, [3])],
                         [numpy_helper.from_array(np.array(1000, np.float16), "k"),
                          numpy_helper.from_array(np.array(1e4, np.float16), "d")])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return str(path)


def _run(path, tmp_path, x, tag, **chosen):
    model = modelio.load(path)
    emulation.emulate(model, **chosen)
    out = modelio.save_derived(model, str(tmp_path), tag, external=False)
    runner = runners.make_session(out, tag, runners.CPU, optimize=False)
    return runner.run({"x": x}, ["y"])["y"]


X = np.array([100.0, 3.14159, 7.03], np.float32)


def _bf(values):
    return np.asarray(values, np.float32).astype(bfloat16).astype(np.float32)


def test_fp16_overflows_and_bf16_nodes_hold_the_range(tmp_path):
    path = _fp16_chain(tmp_path / "m.onnx")
    plain = _run(path, tmp_path, X, "plain")
    assert np.isinf(plain[0])  # 100 * 1000 overflows float16
    both = _run(path, tmp_path, X, "both", bf16_nodes=("big", "small"))
    assert np.all(np.isfinite(both))
    # bf16 arithmetic, step by step: the input rounded once (not via fp16), each output rounded to bf16.
    big = _bf(_bf(X) * _bf(np.float16(1000)))
    expected = _bf(big / _bf(np.float16(1e4)))
    np.testing.assert_array_equal(both, expected)


def test_a_float16_reader_gets_the_bf16_output_rounded_again_to_float16(tmp_path):
    """Only 'big' in bf16: 'small' (float16) reads it through a Cast to float16, where 1e5 overflows."""
    path = _fp16_chain(tmp_path / "m.onnx")
    one = _run(path, tmp_path, X, "one", bf16_nodes=("big",))
    assert np.isinf(one[0])
    small = X[1:] * 1000  # the values that fit float16 take both roundings
    expected = np.float16(_bf(_bf(X[1:]) * 1000)).astype(np.float32) / np.float32(1e4)
    np.testing.assert_allclose(one[1:], np.float16(expected).astype(np.float32), rtol=0)
    assert np.all(np.abs(one[1:] - small / 1e4) <= 0.01 * small / 1e4)


def test_the_cast_in_front_is_looked_through(tmp_path):
    """The input of a bf16 node fed by Cast(float32 -> fp16) is the float32 tensor rounded once, to bf16:
    a value float16 flushes to 0 (1e-8) survives in bfloat16."""
    path = _fp16_chain(tmp_path / "m.onnx")
    tiny = np.array([1e-8, 2e-8, 3e-8], np.float32)
    plain = _run(path, tmp_path, tiny, "plain_tiny")
    assert np.all(plain == 0)
    both = _run(path, tmp_path, tiny, "both_tiny", bf16_nodes=("big", "small"))
    assert np.all(both > 0)


def test_no_bf16_nodes_changes_nothing(tmp_path):
    """Negative: an empty ``bf16_nodes`` (or a name that is no node) emulates exactly as before."""
    path = _fp16_chain(tmp_path / "m.onnx")
    plain = _run(path, tmp_path, X, "a")
    other = _run(path, tmp_path, X, "b", bf16_nodes=("no_such_node",))
    np.testing.assert_array_equal(plain, other)


def test_float32_wins_where_a_node_is_named_twice(tmp_path):
    path = _fp16_chain(tmp_path / "m.onnx")
    kept = _run(path, tmp_path, X, "kept", float32_nodes=("big", "small"))
    both = _run(path, tmp_path, X, "both", float32_nodes=("big", "small"), bf16_nodes=("big", "small"))
    np.testing.assert_array_equal(kept, both)
