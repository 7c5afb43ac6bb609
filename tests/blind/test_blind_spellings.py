"""Blind test set: fp16 hazards spelled in unusual ways (tests/blind/spellings.py), judged by tests/blind/judge.py.

Written without reading the planner. For each case:

* ``test_case_is_sound``: the case itself is right, whatever ampconv does: the float32
  model agrees with float64, ``needed`` in float32 with everything else fp16 is accurate,
  and the all-fp16 model fails exactly when the case claims a hazard.
* ``test_with_calibration_data``: converted with the samples as calibration data, the model
  is accurate in true fp16 and keeps no more than ``max(2, 10% of nodes)`` float32 nodes
  beyond (or short of) ``needed``.
* ``test_without_data_accurate_or_told``: converted with defaults, the model is accurate on
  the samples, or the report told the user (a warning, or an envelope entry below the
  samples' range).

tests/blind/BEFORE.md holds the figures when this set was written; many cases failed then,
by design.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import harness
import judge
import spellings

NAMES = [c.name for c in spellings.CASES]
CLASSES = {
    "norm-across-layout", "groupnorm-via-instancenorm", "mean-as-gemm-matmul", "einsum-sums", "roots",
    "softmax-without-max", "attention-unscaled-logits", "log-of-softmax", "exp-box-decode", "epsilon-clip",
    "layer-scale", "tiny-bias", "mish-softplus", "long-sum-unguarded-exp",
}


def test_the_set_covers_every_class_with_small_well_formed_models():
    assert len(spellings.CASES) >= 22
    assert len(set(NAMES)) == len(NAMES)
    assert {c.klass for c in spellings.CASES} == CLASSES
    for case in spellings.CASES:
        model = case.build()
        assert model.ir_version == 8 and model.opset_import[0].version in (17, 18), case.name
        names = [n.name for n in model.graph.node]
        assert all(names) and len(set(names)) == len(names), case.name
        assert case.needed <= set(names), (case.name, case.needed - set(names))
        weights = sum(np.asarray(onnx.numpy_helper.to_array(t)).nbytes for t in model.graph.initializer)
        assert weights < 1 << 20, (case.name, weights)
        types = judge.tensor_types(model)
        assert not {t for t in types.values() if t in judge.LOW_TYPES}, case.name
        samples = case.samples(0)
        assert len(samples) == spellings.N_SAMPLES
        inputs = {i.name for i in model.graph.input}
        assert all(set(s) == inputs and all(v.dtype == np.float32 for v in s.values()) for s in samples), case.name
        assert case.why and len(case.why.splitlines()) == 1, case.name


@pytest.mark.parametrize("name", NAMES)
def test_case_is_sound(name):
    case = spellings.by_name(name)
    found = judge.soundness(case.build(), case.samples(0), case.needed, case.tolerance, minimality=False)
    assert found["reference_ok"], "the float32 model itself is not accurate against float64"
    assert found["needed_suffices"], f"needed in float32 is not enough: {found['needed_detail']}"
    if case.hazard:
        assert not found["all_fp16_ok"], f"the case claims a hazard, but all-fp16 is accurate: {found['all_fp16']}"
    else:
        assert found["all_fp16_ok"], f"a trap case must be accurate all-fp16: {found['all_fp16']}"


def _prepare(name):
    case = spellings.by_name(name)
    model, samples = case.build(), case.samples(0)
    return case, model, samples, judge.run(model, samples)


@pytest.mark.parametrize("name", NAMES)
def test_with_calibration_data(name, tmp_path):
    case, model, samples, reference = _prepare(name)
    result = harness.with_data(case, model, samples, reference, tmp_path)
    assert "error" not in result, result["error"]
    assert result["accurate"], f"inaccurate in true fp16 with the samples as calibration data: {result['accuracy']}"
    assert result["excess_ok"], (
        f"{result['fp32_count']} float32 nodes for {len(case.needed)} needed (excess {result['excess']} > "
        f"{result['excess_limit']:g}); extra {result['extra']}, missing {result['missing']}; {case.why}"
    )


@pytest.mark.parametrize("name", NAMES)
def test_without_data_accurate_or_told(name, tmp_path):
    case, model, samples, reference = _prepare(name)
    result = harness.without_data(case, model, samples, reference, tmp_path)
    assert "error" not in result, result["error"]
    assert result["accurate"] or result["told"], (
        f"default conversion inaccurate on the samples ({result['accuracy']}) and the report did not tell: "
        f"{result['told_how']}; max |input| {case.max_abs_input()}"
    )
