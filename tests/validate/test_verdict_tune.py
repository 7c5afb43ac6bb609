"""``--tune`` and the floor (issue 30): it never runs on a verdict the floor explains, and never pins a node
whose own error is within the floor.

Before the floor, the search ran on a conversion whose only failure was the
model's own sensitivity to the LOW type (issue 30, 1: 201 s, 24 evaluations,
84 nodes kept float32 on a text detector); it now judges its candidates as
``validate`` does, against the floor model's error too.
"""

from __future__ import annotations

import onnx
import pytest

import ampconv
from ampconv.calibration import tune as tuning
from ampconv.numerics.ownerror import OwnError
from ampconv.calibration.tune import Evaluation, search
from ampconv.core.lowtypes import low_type
from ampconv.validation.criteria import FLOOR_FACTOR

import validate_models as vm


def _tune(tmp_path, model, dtype, **config):
    model.ir_version = vm.IR_VERSION
    src = tmp_path / "model.onnx"
    onnx.save(model, str(src))
    report = ampconv.convert(src, tmp_path / f"model.{dtype}.onnx", ampconv.Config(
        dtype=dtype, calibration_data=("random",), tune=True, overwrite=True, **config))
    return report


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_tune_pins_nothing_for_a_classifier_at_its_floor(tmp_path, dtype):
    report = _tune(tmp_path, vm.sensitive_classifier(offset=200.0 if dtype == "fp16" else 25.0), dtype,
                   shapes={"batch": (64,)})
    assert report.tune["passed"] and report.tune["evaluations"] == 1
    assert report.tune["kept"] == [] and report.count("HIGH") == 0


def test_without_the_floor_the_same_search_pins_nodes(tmp_path, monkeypatch):
    # What the floor changes: judged on the criteria alone, the fp16 classifier "fails" and the search runs.
    monkeypatch.setattr(tuning.Evaluator, "_floor_session", lambda self, low: None)
    report = _tune(tmp_path, vm.sensitive_classifier(offset=200.0), "fp16", shapes={"batch": (64,)})
    assert report.tune["evaluations"] > 1 and report.tune["kept"]


def _fake(culprit):
    calls = []

    def evaluate(pins):
        calls.append(tuple(pins))
        ok = culprit in pins
        return Evaluation(tuple(pins), ok, "ok" if ok else "fails")

    return evaluate, calls


def _errors(values):
    return {name: OwnError(name, "Add", error, f"{name}_out", 0, error) for name, error in values.items()}


def test_a_node_whose_own_error_is_within_the_floor_is_never_pinned():
    floor = tuning.node_floor_of(low_type("fp16"))
    assert floor == pytest.approx(FLOOR_FACTOR * 2.0**-11)
    names = ["a", "b", "c"]
    evaluate, calls = _fake("b")
    errors = _errors({"a": 1e-2, "b": floor / 2, "c": floor / 3})
    pins, result = search(evaluate, names, lambda: (names, errors), floor)
    assert "b" not in pins and all("b" not in call for call in calls)
    assert any("never pinned" in note for note in result.notes)


def test_every_node_within_the_floor_means_nothing_is_pinned_after_one_evaluation():
    names = ["a", "b"]
    evaluate, calls = _fake("a")
    pins, result = search(evaluate, names, lambda: (names, _errors({"a": 1e-5, "b": 1e-5})), 1e-3)
    assert pins == {} and len(calls) == 1 and not result.passed
    assert any("no pin removes" in note for note in result.notes)


def test_a_decisive_node_stays_a_candidate_whatever_its_own_error():
    # A producer whose rounding a cancellation or an ArgMax downstream turns into a different answer.
    names = ["producer", "other"]
    evaluate, _ = _fake("producer")
    errors = _errors({"producer": 1e-5, "other": 1e-2})
    pins, result = search(evaluate, names, lambda: (names, errors), 1e-3, decisive={"producer"})
    assert result.passed and set(pins) == {"producer"}
