"""The report's and summary's GPU figures (ampconv.pipeline.figures) agree with the benchmarks' instrument (bench/figures.py) on the written file."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ampconv
from bench.figures import deploy_figures

ATTENTION_ISH = """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x) => (float[b2, s2, 8] y) <float[8, 8] w = {%s}> {
    h = MatMul (x, w)
    c = Cos (h)
    y = MatMul (c, w)
}""" % ", ".join(str(0.01 * k) for k in range(64))


def _save(tmp_path, text):
    from helpers import model_from_text, save

    return save(model_from_text(text), tmp_path / "m.onnx")


@pytest.mark.parametrize("shapes,dims", [((), {"batch": 1, "seq": 1}), ((("batch", (2,)), ("seq", (5,))), {"batch": 2, "seq": 5})])
def test_figures_in_the_report_match_the_written_file(tmp_path, shapes, dims):
    src = _save(tmp_path, ATTENTION_ISH)
    dst = tmp_path / "out.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(shapes=shapes))
    figures = report.figures
    on_file = deploy_figures(dst, dims=dims)
    assert figures["casts"] == on_file.casts == 4  # x down, Cos up and down, y up
    assert figures["cast_traffic_bytes"] == on_file.cast_traffic_bytes
    # x, the Cos pair and y: each numel * (2 + 4) bytes
    assert figures["cast_traffic_bytes"] == 4 * dims["batch"] * dims["seq"] * 8 * 6
    assert (figures["heavy_low"], figures["heavy_nodes"]) == (on_file.heavy_low, on_file.heavy_nodes) == (2, 2)
    assert figures["weight_bytes"] == report.weight_bytes_after
    assert figures["dims"] == dims
    line = next(ln for ln in report.summary().splitlines() if "GPU figures" in ln)
    assert "4 cast(s)" in line and "2 of 2 heavy op(s)" in line and f"batch={dims['batch']}" in line


def test_the_dry_run_and_the_json_report_carry_the_figures(tmp_path):
    src = _save(tmp_path, ATTENTION_ISH)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(), dry_run=True)
    assert report.figures["casts"] == 4
    data = json.loads(json.dumps(report.to_dict()))
    assert data["figures"]["heavy_nodes"] == 2


def test_a_cast_of_unknown_size_is_counted_as_unknown_not_as_zero(tmp_path):
    # The Loop body's cast: its tensor has no shape anywhere (the body declares none).
    body = helper.make_graph(
        [helper.make_node("MatMul", ["acc_in", "w"], ["mm"], name="body_mm"),
         helper.make_node("Cos", ["mm"], ["acc_out"], name="body_cos"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond")],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 onnx.ValueInfoProto(name="acc_in")],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), onnx.ValueInfoProto(name="acc_out")],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(np.eye(4, dtype=np.float32), "w"), numpy_helper.from_array(np.array(2), "n")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    src = tmp_path / "loop.onnx"
    onnx.save(model, str(src))
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    # The body casts its state down for the MatMul and back up for the Cos: two casts, sizes unknown.
    assert {k: report.figures[k] for k in ("casts", "cast_traffic_bytes", "cast_traffic_unknown")} == {
        "casts": 2, "cast_traffic_bytes": 0, "cast_traffic_unknown": 2}
    assert "(+2 cast(s) of unknown size)" in report.summary()
