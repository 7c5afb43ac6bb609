"""The verdict's criteria are one list of ``Criterion`` objects (issue 28): each says what it measures, its
default and how it reads, and carries the reader the verdict runs; a criterion added to the list decides."""

import dataclasses

import numpy as np

from ampconv.validation import criteria as criteria_mod
from ampconv.validation.criteria import (
    AT_MOST,
    BUILTIN,
    DEFAULT,
    ELEMENTWISE,
    STRICT,
    VERDICT_CHAIN,
    Criterion,
    default_criteria,
    judge,
    strict_criteria,
)


def _output(seed=0, shape=(4, 64)):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_every_builtin_criterion_is_one_object_the_verdict_runs():
    assert VERDICT_CHAIN == BUILTIN + (ELEMENTWISE,)
    assert all(c.reader is not None and c.measures and c.reads for c in VERDICT_CHAIN)
    assert [c.key for c in VERDICT_CHAIN if DEFAULT in c.modes] == ["nonfinite", "label", "cosine", "p99", "max"]
    assert [c.key for c in VERDICT_CHAIN if STRICT in c.modes] == ["nonfinite", "elementwise"]


def test_strict_mode_reads_the_elementwise_criterion():
    ref = _output()
    m = judge(ref, ref * np.float32(1.5), strict_criteria(1e-3, 1e-3))
    assert not m.passed and m.criterion == "elementwise" and "outside" in m.decided_by
    assert judge(ref, ref, strict_criteria(1e-3, 1e-3)).criterion == "elementwise"


def _rms_reader(limit):
    """A criterion read from the statistics every output gets: the RMS error against ``limit``."""
    def reader(judged):
        m = judged.m
        failed = not m.rmse <= limit
        return criteria_mod.Check("rms", failed, m.rmse / limit, f"rms {m.rmse:.3g} {'>' if failed else '<='} {limit:g}")
    return reader


def test_a_criterion_added_to_the_list_decides(monkeypatch):
    ref = _output()
    conv = (ref + np.float32(1e-3)).astype(np.float32)  # every built-in criterion passes this
    assert judge(ref, conv, default_criteria("fp16")).passed
    strict_rms = Criterion("rms", "RMS of conv - ref", AT_MOST, {"fp16": 1e-4}, reader=_rms_reader(1e-4))
    monkeypatch.setattr(criteria_mod, "VERDICT_CHAIN", VERDICT_CHAIN + (strict_rms,))
    m = judge(ref, conv, default_criteria("fp16"))
    assert not m.passed and m.criterion == "rms" and m.decided_by.startswith("rms 0.001 > 0.0001")


def test_a_criterion_added_to_the_list_that_passes_leaves_the_verdict_alone(monkeypatch):
    """Negative: a generous added criterion passes, and the built-in criteria still decide a failure first."""
    ref = _output()
    loose = Criterion("rms", "RMS of conv - ref", AT_MOST, {"fp16": 1e3}, reader=_rms_reader(1e3))
    monkeypatch.setattr(criteria_mod, "VERDICT_CHAIN", VERDICT_CHAIN + (loose,))
    assert judge(ref, (ref + np.float32(1e-3)).astype(np.float32), default_criteria("fp16")).passed
    scaled = judge(ref, ref * np.float32(1.5), default_criteria("fp16"))
    assert not scaled.passed and scaled.criterion in ("cosine", "p99", "max")


def test_a_criterion_a_user_brings_judges_through_criteria_extra():
    """From outside the package: a ``figure`` criterion in ``Criteria.extra`` decides beside the built-in ones."""
    ref = _output()
    conv = (ref + np.float32(1e-3)).astype(np.float32)
    mean_shift = Criterion("mean_shift", "mean of conv - ref", AT_MOST, {"fp16": 1e-4},
                           figure=lambda r, c: float(abs(np.mean(c - r))))
    with_it = dataclasses.replace(default_criteria("fp16"), extra=(mean_shift,))
    m = judge(ref, conv, with_it)
    assert not m.passed and m.criterion == "mean_shift"
    assert judge(ref, ref, with_it).passed
