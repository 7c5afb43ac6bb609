"""Values inside If, Loop and Scan bodies are observed: calibration, localization (issue 22, item 4)."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import ampconv

SCALE = 2e4  # a constant fp16 holds; x * SCALE passes the overflow guard (32752) for |x| > 1.6


def _loop_model(path):
    """h0[1,4] -> Loop x3 {big = h * SCALE; h_out = big / SCALE} -> h_final: the overflow is inside the body."""
    body = h.make_graph(
        [h.make_node("Mul", ["h_in", "scale"], ["big"], name="body_scale"),
         h.make_node("Div", ["big", "scale"], ["h_out"], name="body_back"),
         h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "step",
        [h.make_tensor_value_info("iter", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("h_in", T.FLOAT, [1, 4])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, [1, 4])],
        [numpy_helper.from_array(np.array([SCALE], np.float32), "scale")],
    )
    graph = h.make_graph(
        [h.make_node("Loop", ["trips", "go", "h0"], ["h_final"], name="loop", body=body)],
        "g", [h.make_tensor_value_info("h0", T.FLOAT, [1, 4])], [h.make_tensor_value_info("h_final", T.FLOAT, [1, 4])],
        [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go")],
    )
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def _if_model(path):
    """x[4], flag -> If {then: big = x * SCALE, y = big / SCALE; else: y = x + 1}: the overflow is in one branch."""
    then = h.make_graph(
        [h.make_node("Mul", ["x", "scale"], ["big"], name="then_scale"),
         h.make_node("Div", ["big", "scale"], ["t_out"], name="then_back")],
        "then", [], [h.make_tensor_value_info("t_out", T.FLOAT, [4])],
        [numpy_helper.from_array(np.array([SCALE], np.float32), "scale")],
    )
    other = h.make_graph(
        [h.make_node("Add", ["x", "one"], ["e_out"], name="else_add")],
        "else", [], [h.make_tensor_value_info("e_out", T.FLOAT, [4])],
        [numpy_helper.from_array(np.array([1.0], np.float32), "one")],
    )
    graph = h.make_graph(
        [h.make_node("Relu", ["x_in"], ["x"], name="relu"),
         h.make_node("If", ["flag"], ["y"], name="branch", then_branch=then, else_branch=other)],
        "g", [h.make_tensor_value_info("x_in", T.FLOAT, [4]), h.make_tensor_value_info("flag", T.BOOL, [])],
        [h.make_tensor_value_info("y", T.FLOAT, [4])],
    )
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def test_calibration_observes_a_loop_body_and_keeps_its_overflowing_node_float32(tmp_path):
    src = _loop_model(tmp_path / "loop.onnx")
    report = ampconv.convert(src, tmp_path / "loop.fp16.onnx", ampconv.Config(level="O3", calibration_data=("random",)))
    nodes = report.decisions_by_node()
    assert nodes["body_scale"]["rule"] == "data-overflow" and "big" in nodes["body_scale"]["reason"]
    assert nodes["body_back"]["rule"] == "data-overflow"  # it reads the same values
    assert not any("not observed" in n for n in report.calibration["notes"])


@pytest.mark.parametrize("flag, pinned", [(True, True), (False, False)])
def test_calibration_observes_the_if_branch_that_runs(tmp_path, flag, pinned):
    """Only the branch a sample takes is observed: with the flag off, the then-branch has no statistics."""
    src = _if_model(tmp_path / "if.onnx")
    samples = tmp_path / "s.npz"
    np.savez(samples, x_in=np.linspace(0, 10, 4).astype(np.float32), flag=np.array(flag))
    report = ampconv.convert(src, tmp_path / "if.fp16.onnx", ampconv.Config(level="O3", calibration_data=(str(samples),)))
    nodes = report.decisions_by_node()
    assert (nodes["then_scale"]["rule"] == "data-overflow") is pinned
    assert (nodes["else_add"]["precision"] == "LOW")


def test_localization_names_the_node_inside_a_loop_body(tmp_path):
    """The overflow starts at body_scale inside the Loop; the starting commit blamed the Loop as a whole."""
    src = _loop_model(tmp_path / "loop.onnx")
    dst = tmp_path / "loop.fp16.onnx"
    ampconv.convert(src, dst, ampconv.Config(level="O3"))
    options = ampconv.ValidateOptions(localize=True, input_ranges={"h0": (3.5, 5.0)})
    result = ampconv.validate(src, dst, options)
    loc = result.localization
    assert not result.passed and loc.node == "body_scale" and loc.inside == "Loop 'loop'" and loc.overflow
    assert "body_scale" in loc.cause["nodes"]
    assert loc.fix is not None and loc.fix["passes"], loc.fix
    from ampconv.validation.render import render

    assert "drift starts at node 'body_scale' (Mul, inside Loop 'loop')" in render(result, "text")


def test_localization_inside_the_if_branch_that_ran(tmp_path):
    src = _if_model(tmp_path / "if.onnx")
    dst = tmp_path / "if.fp16.onnx"
    ampconv.convert(src, dst, ampconv.Config(level="O3"))
    samples = tmp_path / "s.npz"
    np.savez(samples, x_in=np.linspace(0, 10, 4).astype(np.float32), flag=np.array(True))
    result = ampconv.validate(src, dst, ampconv.ValidateOptions(localize=True, inputs=(str(samples),)))
    loc = result.localization
    assert not result.passed and loc.node == "then_scale" and loc.inside == "If 'branch'"


def _growing_loop_model(path):
    """h0[1,2] -> Loop x3 {h_out = Concat(h_in, h_in * 0.5)}: the carried value doubles in width every step."""
    body = h.make_graph(
        [h.make_node("Mul", ["h_in", "half"], ["halved"], name="body_half"),
         h.make_node("Concat", ["h_in", "halved"], ["h_out"], name="body_grow", axis=1),
         h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "grow",
        [h.make_tensor_value_info("iter", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("h_in", T.FLOAT, [1, None])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("h_out", T.FLOAT, [1, None])],
        [numpy_helper.from_array(np.array([0.5], np.float32), "half")],
    )
    graph = h.make_graph(
        [h.make_node("Loop", ["trips", "go", "h0"], ["h_final"], name="loop", body=body)],
        "g", [h.make_tensor_value_info("h0", T.FLOAT, [1, 2])], [h.make_tensor_value_info("h_final", T.FLOAT, [1, None])],
        [numpy_helper.from_array(np.array(3, np.int64), "trips"), numpy_helper.from_array(np.array(True), "go")],
    )
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    return path


def test_a_body_onnxruntime_cannot_route_out_falls_back_to_the_main_graph_and_says_so(tmp_path):
    """A value whose shape changes between iterations cannot leave as a scan output: calibration still runs."""
    src = _growing_loop_model(tmp_path / "grow.onnx")
    report = ampconv.convert(src, tmp_path / "grow.fp16.onnx", ampconv.Config(level="O3", calibration_data=("random",)))
    (note,) = [n for n in report.calibration["notes"] if "bodies" in n]
    assert note.startswith("3 node(s) inside If/Loop/Scan bodies are not observed: onnxruntime refused the copy")
    result = ampconv.validate(src, tmp_path / "grow.fp16.onnx", ampconv.ValidateOptions(localize=True))
    assert result.passed
