"""Ranges from numbers (issue 29): the magnitude analysis and the default synthetic float32 run.

A layer norm whose sum of squares passes 65504 is kept accurate whatever the
exporter's spelling (jax2tf, TF-Keras, by hand), from the model's numbers
(``plan.magnitude``) or from one seeded float32 run on random inputs
(``data.synthetic``); a norm whose sums fit stays LOW.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import ampconv
import hazard_models as hm
from ampconv.calibration import synthetic
from ampconv.plan.magnitude import MagnitudeAnalysis, Scale, threshold
from ampconv.plan.ranges import RangeReader
from ampconv.validation.options import ValidateOptions
from helpers import decisions


def _convert(tmp_path, proto, name="m", **options):
    src = hm.save(proto, tmp_path, name)
    out = tmp_path / f"{name}.out.onnx"
    report = ampconv.convert(src, out, ampconv.Config(overwrite=True, **options))
    return src, out, report


def _emulated(src, out) -> bool:
    return ampconv.validate(src, out, ValidateOptions(backend="emulate", samples=2)).passed


@pytest.mark.parametrize("style", hm.NORM_STYLES)
@pytest.mark.parametrize("gain", [30.0, 300.0])
def test_every_spelling_whose_sum_overflows_converts_accurate_by_default(tmp_path, style, gain):
    src, out, report = _convert(tmp_path, hm.spelled_layer_norm(style, gain=gain), style)
    assert _emulated(src, out), [(n["name"], n["precision"], n["rule"]) for n in report.nodes]
    assert decisions(report)["dense"]["precision"] == "LOW"


@pytest.mark.parametrize("style", ["jax2tf", "hand"])
def test_the_analysis_alone_keeps_a_sum_of_256_squares_float32(tmp_path, style):
    """Without the run, the numbers say it: 256 * |x|^2 passes 65504 at |x| = 16."""
    src, out, report = _convert(tmp_path, hm.spelled_layer_norm(style), style, synthetic_run=False)
    d = decisions(report)
    summing = "sum_sq" if style == "jax2tf" else "sum_by_matmul"
    assert (d[summing]["precision"], d[summing]["rule"]) == ("HIGH", "range-reduction")
    assert "256 * |x|^2" in d[summing]["reason"] and "|x| = 16" in d[summing]["reason"]
    assert report.calibration is None
    assert _emulated(src, out)


@pytest.mark.parametrize("style", hm.NORM_STYLES)
def test_a_narrow_norm_whose_sums_fit_stays_low(tmp_path, style):
    """64 values of |x| ~ 3: neither the numbers nor the run find an overflow, so every op runs LOW."""
    src, out, report = _convert(tmp_path, hm.spelled_layer_norm(style, width=64, gain=1.0), style)
    high = [(n["name"], n["rule"]) for n in report.nodes if n["precision"] == "HIGH"]
    assert high == [], high
    assert report.calibration["synthetic"] is True
    assert _emulated(src, out)


def test_the_run_is_said_in_the_summary_with_how_to_give_data_or_turn_it_off(tmp_path):
    _src, _out, report = _convert(tmp_path, hm.spelled_layer_norm("keras", gain=300.0), "k")
    note = report.calibration["notes"][0]
    assert "synthetic float32 run: 1 seeded random sample (seed 0; x [2, 4, 256])" in note
    assert "--calibration-data" in note and "--no-synthetic-run" in note
    reasons = [n["reason"] for n in report.nodes if n["rule"] == "data-overflow"]
    assert reasons and all("synthetic float32 run" in r for r in reasons)


def test_a_model_too_large_for_the_run_falls_back_to_the_analysis_with_a_note(tmp_path):
    """Over its budget (here a budget no run fits), the run is skipped; the note says what that cost."""
    _src, _out, report = _convert(tmp_path, hm.spelled_layer_norm("jax2tf"), "big", synthetic_budget=1e-6)
    assert report.calibration is None
    note = next(n for n in report.note_texts() if "synthetic float32 run skipped" in n)
    assert "MiB of weights" in note and "> 1e-06 s budget" in note
    high = sum(1 for n in report.nodes if n["precision"] == "HIGH")
    assert f"{high} node(s) stay float32 for want of numbers (2 long sums)" in note
    assert "synthetic_run=True" in note and "calibration_data" in note
    assert decisions(report)["sum_sq"]["rule"] == "range-reduction"


def test_a_model_that_cannot_run_falls_back_with_a_note(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise RuntimeError("no kernel for this op")

    monkeypatch.setattr(synthetic, "observe", refuse)
    _src, _out, report = _convert(tmp_path, hm.spelled_layer_norm("hand"), "norun")
    assert report.calibration is None
    assert any("could not run on random inputs (no kernel for this op)" in n for n in report.notes)
    assert decisions(report)["sum_by_matmul"]["rule"] == "range-reduction"


def test_no_run_at_o3_under_the_mindspore_preset_or_with_real_data(tmp_path):
    for options in ({"level": "O3"}, {"preset": "mindspore"}, {"calibration_data": "random", "calibration_samples": 2}):
        _src, _out, report = _convert(tmp_path, hm.spelled_layer_norm("keras", width=64, gain=1.0), "n", **options)
        assert report.calibration is None or report.calibration["synthetic"] is False, options


def test_the_run_overrules_the_estimate_only_with_4x_headroom(tmp_path):
    """A sum of 256 squares the run saw at ~400 (activations could grow 12x) runs LOW; at gain 6 (seen near 1.5e4: 2x room) it stays float32."""
    _src, _out, quiet = _convert(tmp_path, hm.spelled_layer_norm("jax2tf", gain=1.0), "quiet")
    assert decisions(quiet)["sum_sq"]["precision"] == "LOW"
    _src, _out, loud = _convert(tmp_path, hm.spelled_layer_norm("jax2tf", gain=6.0), "loud")
    node = decisions(loud)["sum_sq"]
    assert (node["precision"], node["rule"]) == ("HIGH", "range-reduction")
    assert "the synthetic float32 run saw max |x| =" in node["reason"]


# ------------------------------------------------------------------ the analysis itself
def _scales(proto):
    model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))
    analysis = MagnitudeAnalysis(model.graph, RangeReader("fp16"), lambda node: 256)
    return {value.name: analysis.scale(value) for node in model.graph for value in node.outputs}


def test_squares_spelled_three_ways_are_degree_two():
    for style, names in (("jax2tf", ("sq", "ssq")), ("hand", ("sq", "ssq")), ("keras", ("sq", "var"))):
        scales = _scales(hm.spelled_layer_norm(style))
        assert scales[names[0]].degree == 2, style
        assert scales["h"] == Scale(1.0, 1.0)  # a layer with weights makes a new activation
    jax = _scales(hm.spelled_layer_norm("jax2tf"))
    assert jax["ssq"] == Scale(2.0, 256.0) and jax["msq"] == Scale(2.0, 1.0)  # the sum, then / 256
    assert _scales(hm.spelled_layer_norm("hand"))["ssq"] == Scale(2.0, 256.0)  # MatMul with ones is a sum
    assert _scales(hm.spelled_layer_norm("jax2tf"))["z"].degree == 0  # normalized: no longer grows with |x|


def test_threshold_is_where_the_scale_meets_the_maximum():
    assert threshold(Scale(2.0, 256.0), 65504.0) == pytest.approx(15.996, abs=1e-3)
    assert threshold(Scale(1.0, 1.0), 65504.0) == 65504.0
    assert threshold(Scale(0.0, 1.0), 65504.0) == np.inf
