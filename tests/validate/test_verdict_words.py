"""Verdict words that hold (issue 39): each sentence of the result says what is true of these outputs.

Found on a dynamo SSDLite export and the bundled CNN sample:

- "No tolerance would pass: the converted model has NaN/Inf ..." was printed
  when no output gained a NaN or Inf (a detection set has no elementwise
  tolerance, which is how it is judged, not a NaN);
- ``labels`` read "FAIL (exact)" while its values were identical, because
  its detection set failed;
- a row's "x floor" column and its "decided by" words gave two multiples
  (1.6x and 0.95x): the column took the largest ratio over samples, the words
  the deciding sample's; and a failing figure quoted its own ratio in the
  words while the column showed the RMS error's.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import ampconv
from ampconv.numerics import metrics
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.criteria import default_criteria, judge
from ampconv.validation.render import render

import validate_models as vm


@pytest.fixture(scope="module")
def broken_boxes(tmp_path_factory):
    """An NMS head converted to fp16, whose boxes are then scaled by 1.15 after the NMS: the set fails on its
    boxes, its labels come out identical, and no value is NaN or Inf."""
    folder = tmp_path_factory.mktemp("det")
    model = vm.nms_detector()
    model.ir_version = vm.IR_VERSION
    src, dst = str(folder / "nms.onnx"), str(folder / "nms.fp16.onnx")
    onnx.save(model, src)
    ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    converted = onnx.load(dst)
    for node in converted.graph.node:
        node.output[:] = ["boxes_before" if o == "boxes" else o for o in node.output]
    converted.graph.initializer.append(numpy_helper.from_array(np.array(1.15, np.float32), "shift"))
    converted.graph.node.append(helper.make_node("Mul", ["boxes_before", "shift"], ["boxes"]))
    onnx.save(converted, dst)
    return validate(src, dst, ValidateOptions(backend="emulate"))


def _row(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(name + " "))


def test_a_failing_detection_set_without_nan_claims_no_nan(broken_boxes):
    result = broken_boxes
    assert not result.passed and not any(o.worst.new_nonfinite for o in result.outputs)
    for fmt in ("text", "markdown"):
        text = render(result, fmt)
        assert "No tolerance would pass" not in text and "has NaN/Inf" not in text and "NaN/Inf value" not in text


def test_an_output_that_gains_nan_is_still_named(tmp_path):
    """Negative: where a NaN/Inf is new, the sentence stays, naming the output and the count."""
    ref, conv = vm.overflow_pair(tmp_path)
    for strict in ({}, {"rtol": 0.01}):
        result = validate(ref, conv, ValidateOptions(backend="emulate", shapes={"batch": (2,)},
                                                     input_ranges={"x": (66.0, 80.0)}, **strict))
        text = render(result, "text")
        line = next(line for line in text.splitlines() if line.startswith("No tolerance would pass"))
        assert re.fullmatch(r"No tolerance would pass: y has \d+ NaN/Inf value\(s\) where the reference is finite\.",
                            line), line


def test_identical_labels_of_a_failing_set_say_so(broken_boxes):
    labels = next(o for o in broken_boxes.outputs if o.name == "labels")
    assert not labels.passed and labels.in_set and not labels.exact
    assert labels.decided_by.startswith("labels identical to the reference's; its detection set")
    row = _row(render(broken_boxes, "text"), "labels")
    assert "FAIL (set)" in row and "(exact)" not in row
    assert broken_boxes.to_dict()["outputs"][2]["in_set"] is True


def test_members_that_differ_are_not_called_identical(broken_boxes):
    """Negative: the boxes moved, and the scores differ by rounding: their words are the set's alone."""
    for name in ("boxes", "scores"):
        out = next(o for o in broken_boxes.outputs if o.name == name)
        assert out.decided_by.startswith("detections: ") and "identical" not in out.decided_by


def _times_in(words: str) -> list[str]:
    return re.findall(r"([0-9.]+|inf)(?:x| times) the unavoidable error", words)


def _column(m) -> str:
    from ampconv.validation.render import _floor_ratio

    return _floor_ratio(m)[:-1]


def test_the_x_floor_column_is_the_multiple_the_words_quote_over_samples():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 1000)).astype(np.float32)
    scale = float(np.sqrt(np.mean(ref**2)))

    def noisy(relative, seed):
        noise = np.random.default_rng(seed).standard_normal(ref.shape) * relative * scale
        return (ref + noise).astype(np.float32)

    criteria = default_criteria("fp16")
    # Sample 0: the larger error (it decides), at 1.5x its floor. Sample 1: a smaller error over a far smaller
    # floor, 10x it: the larger ratio, on the sample that does not decide.
    deciding = judge(ref, noisy(3e-3, 1), criteria, floor=noisy(2e-3, 2))
    other = judge(ref, noisy(1e-3, 3), criteria, floor=noisy(1e-4, 4))
    assert deciding.severity > other.severity and other.floor_ratio > deciding.floor_ratio
    worst = metrics.worst([deciding, other])
    assert worst.decided_by == deciding.decided_by
    assert _times_in(worst.decided_by) == [_column(worst)]


def test_a_failing_figure_shows_in_the_column_the_multiple_its_words_quote():
    """A failure whose p99 grew more than its RMS error: the words quote the figure's ratio; so does the column."""
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 1000)).astype(np.float32)
    conv = ref.copy()
    conv[:, :20] += np.float32(0.05)  # 2% of the elements moved: p99 fails, the RMS error (and cosine) stay small
    floor = (ref + rng.standard_normal(ref.shape).astype(np.float32) * np.float32(0.001)).astype(np.float32)
    m = judge(ref, conv, default_criteria("fp16"), floor=floor)
    assert not m.passed and m.criterion == "p99"
    assert _times_in(m.decided_by) == [_column(m)]
    rms_only = m.rmse / m.floor_rmse
    assert m.floor_ratio > rms_only  # the figure's ratio, not the RMS error's
