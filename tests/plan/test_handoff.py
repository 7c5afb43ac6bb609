"""What a pinned node hands on (issue 37, ``plan/handoff.py``): a float32 node whose output fits the LOW type
by evidence hands its gray readers LOW (rule ``gray-handed``); gray nodes keep the seed semantics otherwise.

The release step is turned off here (``release=False``): these are the planner's own decisions.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ampconv
import release_models as rm
from helpers import decisions


def _convert(tmp_path, model, samples, **config):
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    data = rm.write(samples, tmp_path / "cal")
    return ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(calibration_data=(str(data),), overwrite=True,
                                                                    release=False, **config))


def test_probabilities_made_in_float32_are_handed_on_low(tmp_path):
    report = _convert(tmp_path, *rm.softmax_without_max())
    d = decisions(report)
    assert [d[n]["rule"] for n in ("exp", "sum", "probs")] == ["data-overflow"] * 3
    flip = d["flip"]
    assert (flip["precision"], flip["rule"]) == ("LOW", "gray-handed")
    assert "float32 probs hands on p in float16" in flip["reason"] and "calibration sample(s) saw max |x|" in \
        flip["reason"]


def test_without_evidence_of_fit_a_pinned_node_hands_on_float32(tmp_path):
    """Negative: a Conv pinned by a 1e-9 bias whose dead channel's output (1e-9) reaches a Log hands on float32."""
    rng = np.random.default_rng(2)
    weight = rng.standard_normal((4, 3, 1, 1)).astype(np.float32)
    weight[0] = 0.0  # a pruned channel: its output is its bias, 1e-9, which fp16 flushes (Log -> -inf)
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv"), h.make_node("Relu", ["c"], ["r"], name="relu"),
             h.make_node("Log", ["r"], ["y"], name="log")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 4, 4])],
                         [nh.from_array(weight, "w"), nh.from_array(np.full(4, 1e-9, np.float32), "b")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    samples = [{"x": np.abs(rng.standard_normal((1, 3, 4, 4))).astype(np.float32)} for _ in range(2)]
    d = decisions(_convert(tmp_path, model, samples))
    assert d["conv"]["rule"] == "hard-constant"
    assert (d["relu"]["precision"], d["relu"]["rule"]) == ("HIGH", "gray-follow")


def test_a_gray_node_between_two_pinned_nodes_keeps_their_float32(tmp_path):
    """Case 7: LOW between float32 neighbours would cost a cast pair: the seed decision stands, and says why."""
    rng = np.random.default_rng(3)
    nodes = [h.make_node("MatMul", ["x", "w"], ["z"], name="scores"), h.make_node("Exp", ["z"], ["e"], name="exp"),
             h.make_node("ReduceSum", ["e", "axis"], ["s"], name="sum", keepdims=1),
             h.make_node("Div", ["e", "s"], ["p"], name="probs"), h.make_node("Relu", ["p"], ["g"], name="between"),
             h.make_node("Mul", ["g", "big"], ["y"], name="blow_up")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4, 16])],
                         [nh.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w"),
                          nh.from_array(np.array([1], np.int64), "axis"), nh.from_array(np.float32(1e6), "big")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    samples = [{"x": (rng.standard_normal((4, 16)) * 4).astype(np.float32)} for _ in range(2)]
    d = decisions(_convert(tmp_path, model, samples))
    assert d["blow_up"]["precision"] == "HIGH" and d["probs"]["rule"] == "data-overflow"
    between = d["between"]
    assert (between["precision"], between["rule"]) == ("HIGH", "gray-follow")
    assert "LOW here would cost a cast pair" in between["reason"]
