"""Validation streams its samples: memory does not grow with ``--samples`` (issue 22, item 6)."""

import dataclasses
import gc
import math
import weakref

import numpy as np
import validate_models as vm

from ampconv.validation import ValidateOptions, comparison, validate
from ampconv.numerics import metrics
from ampconv.validation.criteria import default_criteria


def _stream(count, alive, size=1000, seed=0):
    """``count`` samples; ``alive`` collects a weak reference to each one's array."""
    rng = np.random.default_rng(seed)
    for index in range(count):
        array = rng.standard_normal(size).astype(np.float32)
        alive.append(weakref.ref(array))
        yield f"sample {index}", {"x": array}


def test_the_sample_loop_holds_no_sample_it_has_judged():
    refs = []
    compared = comparison.compare(
        _stream(300, refs), lambda s: {"y": s["x"]}, lambda s: {"y": s["x"].astype(np.float16).astype(np.float32)},
        ["y"], comparison.Judging(default_criteria("fp16"), "fp16", {}),
    )
    gc.collect()
    assert compared.count == 300 and compared.first_failed is None
    assert sum(r() is not None for r in refs) == 0
    assert len(compared.sources) == comparison.KEPT_SAMPLES == len(compared.outputs[0].per_sample)


def test_the_folded_verdict_equals_the_verdict_over_every_sample():
    """Folding ``worst`` pair by pair gives what ``worst`` of the whole list gives (so keeping 100 loses nothing)."""
    rng = np.random.default_rng(1)
    judge = default_criteria("fp16")
    from ampconv.validation.criteria import judge as judge_one

    measured = []
    for index in range(150):
        ref = rng.standard_normal(64).astype(np.float32)
        noise = 0.05 if index == 120 else 1e-4  # one sample beyond the p99 threshold, late
        measured.append(judge_one(ref, ref + noise * rng.standard_normal(64).astype(np.float32), judge))
    folded = measured[0]
    for m in measured[1:]:
        folded = metrics.worst([folded, m])
    whole = metrics.worst(measured)
    for field in dataclasses.fields(whole):
        a, b = getattr(folded, field.name), getattr(whole, field.name)
        # Size-weighted means in another order: equal to the last bits.
        assert (math.isclose(a, b, rel_tol=1e-12) if isinstance(a, float) else a == b), field.name
    assert not folded.passed and folded.decided_by == measured[120].decided_by


def test_a_failure_after_the_kept_samples_still_fails_and_is_kept_for_localization():
    refs = []

    def converted(sample):
        y = sample["x"].copy()
        if sample["x"][0] == np.float32(7):  # the marked sample: far off
            y += 10.0
        return {"y": y}

    def samples():
        for index, (source, sample) in enumerate(_stream(200, refs)):
            if index == 150:
                sample["x"][0] = 7
            yield source, sample

    compared = comparison.compare(samples(), lambda s: {"y": s["x"]}, converted, ["y"],
                                  comparison.Judging(default_criteria("fp16"), "fp16", {}))
    assert not compared.outputs[0].passed and compared.first_failed[0] == 150
    assert len(compared.outputs[0].per_sample) == comparison.KEPT_SAMPLES


def test_validate_counts_every_sample_and_lists_the_first_hundred(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(samples=130, shapes={"batch": 2}))
    assert result.samples == 130 and len(result.input_sources) == 100
    assert result.to_dict()["samples"] == 130
    assert result.input_sources[-1] == "random sample 99 (seed 0)"
