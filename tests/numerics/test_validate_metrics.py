"""Metrics and the pass rule against hand-computed cases."""

import math

import numpy as np
import pytest

from ampconv.numerics import metrics
from ampconv.numerics.metrics import compare


def test_hand_computed_errors():
    ref = np.array([[1.0, 2.0], [4.0, -8.0]], dtype=np.float32)
    conv = np.array([[1.0, 2.5], [3.0, -8.0]], dtype=np.float32)
    m = compare(ref, conv, rtol=0.0, atol=1.0)
    assert m.max_abs == pytest.approx(1.0)
    assert m.max_rel == pytest.approx(0.25)  # 0.5/2 and 1/4
    assert m.mean_abs == pytest.approx(1.5 / 4)
    assert m.rmse == pytest.approx(math.sqrt((0.25 + 1.0) / 4))
    expected_cos = np.dot(ref.ravel(), conv.ravel()) / (np.linalg.norm(ref) * np.linalg.norm(conv))
    assert m.cosine == pytest.approx(expected_cos)
    assert m.new_nonfinite == 0
    assert m.size == 4 and m.mismatched == 0 and m.passed
    # rows: argmax ref [1, 0], conv [1, 0]
    assert m.top1 == 1.0


def test_pass_rule_uses_reference_magnitude():
    # |a-b| <= atol + rtol*|ref|, with the float32 reference as the scale:
    # ref 1 / conv 2 passes rtol 1 (1 <= 1), ref 2 / conv 1 passes rtol 0.5 (1 <= 1)
    # but ref 1 / conv 2 fails rtol 0.5 (1 > 0.5): the rule is not symmetric.
    assert compare(np.array([1.0]), np.array([2.0]), rtol=1.0, atol=0.0).passed
    assert compare(np.array([2.0]), np.array([1.0]), rtol=0.5, atol=0.0).passed
    assert not compare(np.array([1.0]), np.array([2.0]), rtol=0.5, atol=0.0).passed
    ref = np.array([10.0, 100.0], dtype=np.float64)
    conv = np.array([10.5, 104.0], dtype=np.float64)
    assert compare(ref, conv, rtol=0.05, atol=0.0).passed  # 0.5<=0.5, 4<=5
    assert not compare(ref, conv, rtol=0.04, atol=0.0).passed  # 0.5 > 0.4
    assert compare(ref, conv, rtol=0.04, atol=0.1).passed  # 0.5 <= 0.5, 4 <= 4.1
    # relative to the reference, not the converted value: ref 0 makes rtol useless.
    assert not compare(np.array([0.0]), np.array([0.01]), rtol=1.0, atol=0.0).passed


def test_nan_in_both_is_equal_but_new_nan_fails():
    ref = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    same = np.array([np.nan, 1.0, np.inf], dtype=np.float32)
    m = compare(ref, same, rtol=0.0, atol=0.0)
    assert m.passed and m.new_nonfinite == 0 and m.needed_atol == 0.0
    new = np.array([np.nan, np.nan, np.inf], dtype=np.float32)
    m = compare(ref, new, rtol=1.0, atol=1e9)
    assert not m.passed
    assert m.new_nonfinite == 1
    assert m.needed_atol is None and m.needed_rtol is None


def test_overflow_to_inf_is_a_new_nonfinite():
    ref = np.array([70000.0, 1.0], dtype=np.float32)
    conv = np.array([np.inf, 1.0], dtype=np.float32)
    m = compare(ref, conv, rtol=1e9, atol=1e9)
    assert not m.passed and m.new_nonfinite == 1 and m.mismatched == 1


def test_lost_inf_fails_but_is_not_new():
    ref = np.array([np.inf, 1.0], dtype=np.float32)
    conv = np.array([65504.0, 1.0], dtype=np.float32)
    m = compare(ref, conv, rtol=1.0, atol=1.0)
    assert not m.passed and m.new_nonfinite == 0


def test_needed_tolerances_are_the_tightest_that_pass():
    ref = np.array([1.0, 10.0, -4.0])
    conv = np.array([1.2, 10.5, -4.0])
    rtol, atol = 0.01, 0.1
    m = compare(ref, conv, rtol=rtol, atol=atol)
    assert not m.passed
    # atol at rtol=0.01: max(0.2-0.01, 0.5-0.1) = 0.4
    assert m.needed_atol == pytest.approx(0.4)
    # rtol at atol=0.1: max((0.2-0.1)/1, (0.5-0.1)/10) = 0.1
    assert m.needed_rtol == pytest.approx(0.1)
    assert compare(ref, conv, rtol=rtol, atol=m.needed_atol * (1 + 1e-9)).passed
    assert compare(ref, conv, rtol=m.needed_rtol * (1 + 1e-9), atol=atol).passed
    assert not compare(ref, conv, rtol=rtol, atol=m.needed_atol * 0.99).passed


def test_needed_rtol_is_none_when_reference_is_zero():
    m = compare(np.array([0.0, 1.0]), np.array([0.5, 1.0]), rtol=0.1, atol=0.1)
    assert m.needed_rtol is None
    assert m.needed_atol == pytest.approx(0.5)


def test_cosine_edge_cases():
    assert metrics.cosine_similarity(np.zeros(3), np.zeros(3)) == 1.0
    assert metrics.cosine_similarity(np.zeros(3), np.ones(3)) == 0.0
    assert metrics.cosine_similarity(np.array([1.0, 0]), np.array([0, 1.0])) == 0.0
    assert metrics.cosine_similarity(np.array([1.0, 2]), np.array([-1.0, -2])) == pytest.approx(-1.0)


def test_top1_only_for_class_like_outputs():
    ref = np.array([[0.1, 0.9, 0.0], [0.8, 0.1, 0.1]], dtype=np.float32)
    conv = np.array([[0.1, 0.8, 0.95], [0.7, 0.2, 0.1]], dtype=np.float32)
    assert metrics.top1_agreement(ref, conv) == 0.5
    assert metrics.top1_agreement(ref[0], conv[0]) is None  # rank 1
    assert metrics.top1_agreement(ref[:, :1], conv[:, :1]) is None  # one class
    assert metrics.top1_agreement(ref.astype(np.int64), conv.astype(np.int64)) is None


def test_shape_mismatch_raises():
    with pytest.raises(ValueError, match="differs from the reference shape"):
        compare(np.zeros((2, 3)), np.zeros((3, 2)), 0.1, 0.1)


def test_worst_combines_samples():
    a = compare(np.array([1.0, 2.0]), np.array([1.0, 2.1]), 0.0, 0.2)
    b = compare(np.array([1.0, 2.0]), np.array([1.5, 2.0]), 0.0, 0.2)
    w = metrics.worst([a, b])
    assert w.max_abs == pytest.approx(0.5)
    assert not w.passed and a.passed and not b.passed
    assert w.size == 4 and w.mismatched == 1
    assert w.needed_atol == pytest.approx(0.5)
    assert w.mean_abs == pytest.approx((0.1 + 0.5) / 4)


def test_to_dict_is_json_safe():
    import json

    m = compare(np.array([0.0, 1.0]), np.array([0.5, 1.0]), 0.1, 0.1)
    text = json.dumps(m.to_dict(), allow_nan=False)
    assert '"max_rel": "inf"' in text


def test_relative_rms_error_is_one_formula_for_localization_and_own_error():
    from ampconv.numerics import ownerror

    ref = np.array([3.0, 4.0, np.nan])
    conv = np.array([3.0, 4.5, 7.0])  # the NaN reference element is left out
    expected = np.sqrt(0.25 / 2) / np.sqrt(25.0 / 2)
    assert metrics.relative_rms_error(ref, conv) == pytest.approx(expected)
    assert ownerror.scaled_error(ref, conv) == (pytest.approx(expected), 0.5)
    # No difference is no error, even against an all-zero reference.
    assert metrics.relative_rms_error(np.zeros(4), np.zeros(4)) == 0.0


def test_relative_rms_error_is_inf_where_nothing_can_call_it_small():
    # A difference against an all-zero reference, a new non-finite, a shape mismatch.
    assert metrics.relative_rms_error(np.zeros(3), np.array([0.0, 1e-6, 0.0])) == math.inf
    assert metrics.relative_rms_error(np.ones(3), np.array([1.0, np.inf, 1.0])) == math.inf
    assert metrics.relative_rms_error(np.ones(3), np.ones(4)) == math.inf


def test_type_facts_come_from_the_low_type_records():
    from ampconv.core.lowtypes import LOW_TYPES
    from ampconv.validation import criteria, localize

    assert LOW_TYPES["fp16"].unit_roundoff == 2.0**-11 and LOW_TYPES["bf16"].unit_roundoff == 2.0**-8
    assert localize._unit_roundoff("bf16") == 2.0**-8 and localize._unit_roundoff("nonsense") == 2.0**-11
    assert criteria._low_record("fp16") is LOW_TYPES["fp16"] and criteria._low_record(None) is None
