"""The default criteria (ampconv.validation.criteria): each criterion passes and fails, and says so.

Synthetic arrays stand for converted outputs; the last tests run ``validate``
end to end and read the verdict from the JSON result.
"""

import json
import math

import numpy as np
import pytest
import validate_models as vm

from ampconv.validation import ValidateOptions, validate
from ampconv.numerics import metrics
from ampconv.validation.criteria import Criteria, default_criteria, judge, strict_criteria
from ampconv.validation.render import render

FP16 = default_criteria("fp16")
BF16 = default_criteria("bf16")
STRICT = strict_criteria(1e-2, 1e-2)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _relative_noise(ref, size, seed=1):
    """ref with Gaussian errors of ``size`` times each element's magnitude (how rounding drifts)."""
    return ref * (1 + size * _rng(seed).standard_normal(ref.shape))


# 1. new NaN/Inf


def test_new_nonfinite_fails_and_is_named():
    ref = _rng().standard_normal((4, 64))
    conv = ref.copy()
    conv[1, 3] = np.inf
    conv[2, 5] = np.nan
    m = judge(ref, conv, FP16)
    assert not m.passed and m.criterion == "nonfinite"
    assert m.decided_by.startswith("new non-finite: 2 of 256")
    assert m.scaled_p99_error == math.inf and m.scaled_max_error == math.inf
    # A lost infinity is unmatched too (not new).
    ref_inf = ref.copy()
    ref_inf[0, 0] = np.inf
    lost = judge(ref_inf, ref, FP16)
    assert not lost.passed and lost.decided_by.startswith("unmatched non-finite: 1 of 256")


def test_matched_nonfinite_passes():
    ref = _rng().standard_normal((4, 64))
    ref[0, :3] = [np.nan, np.inf, -np.inf]
    m = judge(ref, ref.copy(), FP16)
    assert m.passed and m.criterion != "nonfinite"
    assert m.scaled_p99_error == 0.0 and m.scaled_max_error == 0.0


# 2. errors relative to the output's own scale: near-zero maps


def test_near_zero_map_with_tiny_errors_passes_without_max_rel_inf():
    # A ReLU map of order 1e-3: exact zeros where ReLU cuts, rounding noise of
    # 1e-6 everywhere (also where the reference is 0).
    ref = np.maximum(_rng().standard_normal((8, 32, 32)), 0) * 1e-3
    conv = ref + 1e-6 * np.abs(_rng(1).standard_normal(ref.shape))
    m = judge(ref, conv, FP16)
    assert m.max_rel == math.inf  # what made such maps look alarming
    assert m.passed, m.decided_by
    assert m.scale == pytest.approx(np.sqrt(np.mean(ref**2)))
    assert m.scaled_max_error < 0.01


def test_near_zero_map_that_is_wrong_fails_though_strict_passes():
    # The same map mirrored: every value under atol, so the elementwise rule passes it.
    ref = np.maximum(_rng().standard_normal((8, 32, 32)), 0) * 1e-3
    conv = ref[..., ::-1]
    assert judge(ref, conv, STRICT).passed
    m = judge(ref, conv, FP16)
    assert not m.passed and m.scaled_p99_error > 1


def test_all_zero_reference_is_judged_against_an_absolute_floor():
    ref = np.zeros((4, 16))
    assert judge(ref, np.full_like(ref, 1e-8), FP16).passed
    m = judge(ref, np.full_like(ref, 1e-3), FP16)
    assert not m.passed and m.scale == FP16.scale_floor
    assert m.scaled_p99_error == pytest.approx(100.0)


# 3. scaled p99 and max error


def test_scaled_p99_error_passes_rounding_noise_and_fails_a_wrong_scale():
    ref = _rng().standard_normal((16, 128)) * 20
    good = judge(ref, _relative_noise(ref, 2e-3), FP16)
    assert good.passed and good.criterion == "p99" and "<= 0.03" in good.decided_by
    bad = judge(ref, ref * 1.3, FP16)
    assert not bad.passed and bad.criterion == "p99"
    assert bad.decided_by.startswith("scaled p99 error 0.3 > 0.03")
    assert bad.cosine == pytest.approx(1.0)  # cosine cannot see a scale error


def test_scaled_max_error_catches_what_p99_misses():
    """Below 1000 elements one element off by a fifth of the scale fails on the max; p99 cannot see it."""
    ref = _rng().standard_normal((4, 200)) * 20
    conv = ref.copy()
    conv[0, 0] += 0.2 * max(20.0, abs(ref[0, 0]))  # one element of 800 off by a fifth of its scale
    m = judge(ref, conv, FP16)
    assert m.scaled_p99_error == 0.0 and m.cosine > FP16.min_cosine
    assert not m.passed and m.criterion == "max"
    assert m.decided_by == "scaled max error 0.2 > 0.1"
    fine = ref.copy()
    fine[0, 0] += 0.05 * max(20.0, abs(ref[0, 0]))
    assert judge(ref, fine, FP16).passed


def test_on_a_large_output_the_max_criterion_reads_the_999th_percentile():
    """From 1000 elements on, a few elements (< 0.1%) far off are left to the cosine; 0.25% of them fail.

    Correct bf16 conversions of 640x640 probability maps move 0.02% to 0.06% of their pixels by 0.3 to 0.5
    (steep edges, docs/validation.md): a single far element is no evidence against a large output.
    """
    ref = _rng().standard_normal((4, 1000)) * 20
    one = ref.copy()
    one[0, 0] += 0.2 * max(20.0, abs(ref[0, 0]))  # one element of 4000
    m = judge(ref, one, FP16)
    assert m.passed and m.scaled_max_error == pytest.approx(0.2, rel=0.01)
    assert m.scaled_p999_error == 0.0
    ten = ref.copy()
    ten[0, :10] += 0.2 * np.maximum(20.0, np.abs(ref[0, :10]))  # ten elements: 0.25%
    bad = judge(ref, ten, FP16)
    assert not bad.passed and bad.criterion == "max"
    assert bad.decided_by == "scaled p99.9 error 0.2 > 0.1 (max 0.2)"


# 4. cosine


def test_cosine_099997_passes_default_but_fails_strict():
    # An embedding of order 20 with relative rounding noise: cosine ~0.99997.
    ref = _rng().standard_normal((8, 512)) * 20
    conv = _relative_noise(ref, 7.7e-3)
    m = judge(ref, conv, FP16)
    assert 0.99996 < m.cosine < 0.99998
    assert m.passed, m.decided_by
    strict = judge(ref, conv, strict_criteria(1e-2, 1e-2))
    assert not strict.passed and strict.criterion == "elementwise"
    assert strict.decided_by.startswith("elementwise rtol=0.01 atol=0.01:") and "outside" in strict.decided_by


def test_cosine_fails_when_the_direction_drifts():
    ref = _rng().standard_normal((8, 512))
    conv = ref + 0.03 * _rng(2).standard_normal(ref.shape)  # cosine ~0.99955
    m = judge(ref, conv, FP16)
    assert not m.passed
    assert m.criterion == "cosine" and m.decided_by.startswith("cosine 0.999") and "< 0.9999" in m.decided_by
    # Under bf16's thresholds the same drift is rounding noise.
    assert judge(ref, conv, BF16).passed


def test_cosine_is_not_judged_on_a_handful_of_elements():
    ref = np.array([1.0, -1.0, 0.5])
    conv = ref + np.array([0.0, 0.0, 0.004])
    m = judge(ref, conv, FP16)
    assert m.passed and m.criterion != "cosine"


# 5. label agreement on clear rows


def _probs(rows, classes, seed=0, temperature=1.0):
    logits = _rng(seed).standard_normal((rows, classes)) / temperature
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_swapped_top_two_with_small_errors_fails_on_label_agreement():
    # The alarming pass: max rel 0.345 with top-1 0%, every probability
    # under atol, so the elementwise rule passes it.
    ref = np.full((120, 100), 0.0094)
    ref[:, 0] = 0.0269
    ref[:, 1] = 0.02
    conv = ref.copy()
    conv[:, [0, 1]] = ref[:, [1, 0]]
    strict = judge(ref, conv, STRICT)
    assert strict.passed and strict.max_rel == pytest.approx(0.345) and strict.top1 == 0.0
    m = judge(ref, conv, FP16)
    assert not m.passed and m.criterion == "label"
    assert m.decided_by == "label agreement 0.00 < 0.99 on 120 clear row(s)"
    assert m.label_agreement == 0.0 and m.clear_rows == 120


def test_near_ties_do_not_fail():
    # Rows whose top two are within rounding of each other may swap.
    ref = _probs(64, 10, temperature=0.5)
    top = np.argsort(ref, axis=-1)
    rows = np.arange(64)
    ref[rows, top[:, -2]] = ref[rows, top[:, -1]] * (1 - 1e-4)  # a near-tie in every row
    conv = ref.copy()
    conv[rows, top[:, -2]] = ref[rows, top[:, -1]] * (1 + 1e-4)  # ... that flips
    m = judge(ref, conv, FP16)
    assert m.top1 == 0.0
    assert m.label_agreement is None and m.clear_rows == 0
    assert m.passed, m.decided_by


def test_label_agreement_passes_when_clear_labels_are_kept():
    ref = _probs(200, 10, temperature=0.3)
    conv = _relative_noise(ref, 1e-3)
    m = judge(ref, conv, FP16)
    assert m.passed and m.label_agreement == 1.0 and 0 < m.clear_rows <= 200


# 6. integer and bool outputs


def test_integer_outputs_must_match_exactly():
    ref = np.arange(12, dtype=np.int64).reshape(3, 4)
    same = judge(ref, ref.copy(), FP16)
    assert same.passed and same.criterion == "exact" and same.decided_by == "exact match"
    off = ref.copy()
    off[0, 0] += 1
    m = judge(ref, off, FP16)
    assert not m.passed and m.decided_by == "exact match: 1 of 12 element(s) differ"
    assert not judge(ref, off, strict_criteria(10.0, 10.0)).passed  # no tolerance for integers
    flags = np.array([True, False, True])
    assert judge(flags, flags.copy(), BF16).passed
    assert not judge(flags, ~flags, BF16).passed


# 7. per-dtype thresholds and the modes


def test_bf16_thresholds_are_looser_than_fp16():
    assert BF16.p99_error > FP16.p99_error
    assert BF16.max_error > FP16.max_error
    assert BF16.min_cosine < FP16.min_cosine
    assert BF16.clear_margin > FP16.clear_margin
    assert FP16.mode == BF16.mode == "default" and (FP16.dtype, BF16.dtype) == ("fp16", "bf16")
    # Drift typical of bf16 (8 bits): fails fp16's criteria, passes bf16's.
    ref = _rng().standard_normal((16, 256)) * 5
    conv = _relative_noise(ref, 1.5e-2)
    assert not judge(ref, conv, FP16).passed
    assert judge(ref, conv, BF16).passed
    with pytest.raises(ValueError, match="unknown LOW type"):
        default_criteria("fp8")


def test_options_pick_the_mode():
    options = ValidateOptions()
    assert options.criteria("fp16") == (default_criteria("fp16"), "default for fp16")
    assert options.criteria("bf16")[0].describe() == "default criteria for bf16"
    both = ValidateOptions(rtol=1e-3, atol=1e-4).criteria("fp16")
    assert both == (strict_criteria(1e-3, 1e-4), "given")
    assert both[0].describe() == "strict rtol=0.001 atol=0.0001"
    one = ValidateOptions(rtol=0.2).criteria("bf16")
    assert one == (strict_criteria(0.2, 5e-2), "given, rest default for bf16")
    # tolerances() is unchanged: the elementwise numbers.
    assert ValidateOptions().tolerances("fp16") == (1e-2, 1e-2, "default for fp16")
    assert Criteria(mode="strict", rtol=0.0, atol=0.0).to_dict()["mode"] == "strict"
    with pytest.raises(ValueError, match="unknown criteria mode"):
        Criteria(mode="loose", rtol=0.0, atol=0.0)


# 8. the worst sample decides


def test_worst_takes_the_verdict_of_the_worst_sample():
    ref = _rng().standard_normal((4, 64)) * 10
    good = judge(ref, _relative_noise(ref, 1e-3), FP16)
    scaled = judge(ref, ref * 1.3, FP16)
    nan = judge(ref, np.where(ref > 2, np.nan, ref), FP16)
    for order in ([good, scaled], [scaled, good]):
        w = metrics.worst(order)
        assert not w.passed and w.criterion == "p99" and w.decided_by == scaled.decided_by
        assert w.scaled_p99_error == scaled.scaled_p99_error
    w = metrics.worst([good, scaled, nan])
    assert w.criterion == "nonfinite" and w.decided_by == nan.decided_by
    # All passing: the sample with the least headroom speaks.
    closer = judge(ref, _relative_noise(ref, 5e-3, seed=3), FP16)
    w = metrics.worst([good, closer])
    assert w.passed and w.decided_by == closer.decided_by
    assert w.scaled_p99_error == max(good.scaled_p99_error, closer.scaled_p99_error)


# 9. end to end


def test_validate_json_names_the_deciding_criterion(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(shapes={"batch": (4,)}, samples=2))
    assert result.passed
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["mode"] == "default" and data["criteria"]["mode"] == "default"
    assert data["criteria"]["dtype"] == "fp16" and data["criteria"]["p99_error"] == FP16.p99_error
    out = data["outputs"][0]
    assert out["decided_by"] == out["worst"]["decided_by"]
    assert out["worst"]["criterion"] in {"label", "cosine", "p99", "max"}
    assert "<=" in out["decided_by"] or ">=" in out["decided_by"]
    assert all(s["decided_by"] for s in out["per_sample"])
    text = render(result, "text")
    assert text.startswith("PASS: 1/1 outputs pass the default criteria for fp16 on 2 sample(s)")
    assert "decided by" in text and out["decided_by"] in text
    assert "Default criteria for fp16" in text


def test_validate_strict_mode_through_options(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(shapes={"batch": (4,)}, rtol=0.0, atol=1e-7))
    assert not result.passed
    data = result.to_dict()
    assert data["mode"] == "strict" and data["criteria"]["p99_error"] is None
    assert (data["rtol"], data["atol"], data["tolerance_source"]) == (0.0, 1e-7, "given")
    assert data["outputs"][0]["decided_by"].startswith("elementwise rtol=0 atol=1e-07:")
    text = render(result, "text")
    assert text.startswith("FAIL: 0/1 outputs within strict rtol=0 atol=1e-07 (given)")
    assert "Would pass with atol >= " in text
    header = next(line for line in render(result, "markdown").splitlines() if line.startswith("| output |"))
    assert header.endswith("| atol needed | rtol needed | decided by |")


def test_validate_new_nonfinite_is_named_in_every_format(tmp_path):
    ref, conv = vm.overflow_pair(tmp_path)
    npz = tmp_path / "in.npz"
    np.savez(npz, **vm.overflow_inputs())
    result = validate(ref, conv, ValidateOptions(inputs=(str(npz),)))
    assert not result.passed
    assert result.outputs[0].decided_by.startswith("new non-finite: 8 of 8 value(s)")
    for fmt in ("text", "markdown", "json"):
        assert "new non-finite: 8 of 8" in render(result, fmt), fmt


# ---------------------------------------------------------------- outputs judged on the scale they live on
def test_a_near_zero_probability_map_is_judged_on_its_range_with_a_weak_check_hint(tmp_path):
    """A sigmoid map near 0 on random inputs in [-1, 1]: its errors are tiny on [0, 1]; the RMS floor failed it."""
    import onnx

    import ampconv
    import validate_models as vm

    src, dst = tmp_path / "det.onnx", tmp_path / "det.fp16.onnx"
    onnx.save(vm.text_detector(), str(src))
    ampconv.convert(src, dst, ampconv.Config())
    result = ampconv.validate(src, dst, ampconv.ValidateOptions(input_ranges={"x": (-1.0, 1.0)}, samples=2))
    (out,) = result.outputs
    assert out.passed, out.decided_by
    assert "a sigmoid output in [0, 1]: judged on its range" in out.decided_by
    assert out.worst.scale == 1.0
    assert any("stays within" in n and "weak check" in n for n in result.notes), result.notes


def test_a_bounded_output_still_fails_a_real_error():
    """Negative: judged on its range, a probability map off by 0.2 fails."""
    import numpy as np

    from ampconv.validation.criteria import default_criteria, judge
    from ampconv.validation.natures import Nature

    rng = np.random.default_rng(0)
    ref = rng.uniform(0, 1, (256, 1)).astype(np.float32)  # last axis 1: not class-like, the scaled error decides
    conv = np.clip(ref + 0.2, 0, 1)
    nature = Nature("bounded", "a sigmoid output in [0, 1]", 0.0, 1.0)
    m = judge(ref, conv, default_criteria("fp16"), nature)
    # Both the cosine (at 0.999 for a bounded output) and the p99 on the range fail; cosine is named first.
    assert not m.passed and m.criterion == "cosine" and m.scaled_p99_error > 0.03
    assert m.decided_by.endswith("(a sigmoid output in [0, 1]: judged on its range)")


def test_output_natures_read_the_graph():
    """Sigmoid/softmax/tanh/clip through data movement, DequantizeLinear's grid; none for a plain MatMul."""
    import numpy as np
    import onnx_ir as ir
    from onnx import TensorProto, helper, numpy_helper

    from ampconv.validation.natures import output_natures

    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Reshape", ["s", "shape"], ["prob"]),
             helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Clip", ["x", "lo", "hi"], ["clip"]),
             helper.make_node("MatMul", ["x", "w"], ["free"]),
             helper.make_node("QuantizeLinear", ["x", "qs"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "qs"], ["grid"])]
    inits = [numpy_helper.from_array(np.array([4, 2], np.int64), "shape"),
             numpy_helper.from_array(np.array(-2.0, np.float32), "lo"), numpy_helper.from_array(np.array(6.0, np.float32), "hi"),
             numpy_helper.from_array(np.eye(2, dtype=np.float32), "w"), numpy_helper.from_array(np.array(0.05, np.float32), "qs")]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("prob", "t", "clip", "free", "grid")]
    model = ir.from_proto(helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])], outputs, inits)))
    natures = output_natures(model)
    assert (natures["prob"].kind, natures["prob"].width) == ("bounded", 1.0)
    assert (natures["t"].low, natures["t"].high) == (-1.0, 1.0)
    assert (natures["clip"].low, natures["clip"].high) == (-2.0, 6.0)
    assert natures["grid"].kind == "grid" and abs(natures["grid"].step - 0.05) < 1e-9
    assert "free" not in natures


def test_decoder_tokens_are_read_as_sequences(tmp_path):
    """A greedy decoder's tokens (a Loop's scan output): where the first row diverges, said in the verdict."""
    import data_models as dm

    import ampconv

    src, calibration = dm.MODELS["greedy_decoder"].save_with_calibration(tmp_path, 2)
    dst = tmp_path / "o.onnx"
    ampconv.convert(src, dst, ampconv.Config())
    result = ampconv.validate(src, dst, ampconv.ValidateOptions(inputs=(str(calibration),)))
    tokens = next(o for o in result.outputs if o.name == "tokens")
    assert not tokens.passed and tokens.decided_by.startswith("token sequences: ")
    assert "agrees for" in tokens.decided_by and "of 8 step(s), then diverges" in tokens.decided_by


def test_sequence_words_say_whether_the_divergence_was_a_near_tie():
    import numpy as np

    from ampconv.validation.criteria import judge_sequence

    ref, conv = np.array([[1, 2, 3, 4]]), np.array([[1, 2, 5, 4]])
    scores = np.zeros((1, 4, 8))
    scores[0, 2, 3], scores[0, 2, 5] = 1000.25, 1000.0  # fp16 spacing near 1000 is 0.5
    tie = judge_sequence(ref, conv, scores, "fp16")
    assert not tie.passed and "a near-tie rounding alone can flip" in tie.decided_by
    scores[0, 2, 5] = 990.0
    clear = judge_sequence(ref, conv, scores, "fp16")
    assert "leads by 10.2, beyond fp16's resolution" in clear.decided_by
    same = judge_sequence(ref, ref, None, "fp16")
    assert same.passed and same.decided_by == "token sequences: all 1 row(s) equal"


def test_a_near_zero_bounded_output_is_still_judged_by_its_cosine():
    """A sigmoid map near 0 whose shape is lost (30% relative noise) fails on the cosine, though tiny on [0, 1]."""
    from ampconv.validation.natures import Nature

    rng = np.random.default_rng(3)
    ref = (1 / (1 + np.exp(12 + rng.standard_normal(4096)))).astype(np.float32)  # about 6e-6
    lost = (ref * (1 + 0.3 * rng.standard_normal(4096))).astype(np.float32)
    kept = (ref * (1 + 0.01 * rng.standard_normal(4096))).astype(np.float32)
    nature = Nature("bounded", "a sigmoid output in [0, 1]", 0.0, 1.0)
    bad = judge(ref, lost, default_criteria("bf16"), nature)
    assert not bad.passed and bad.criterion == "cosine" and bad.scaled_max_error < 1e-4
    assert bad.decided_by.startswith("cosine 0.9") and "< 0.999 (a sigmoid output in [0, 1]" in bad.decided_by
    assert judge(ref, kept, default_criteria("fp16"), nature).passed  # fp16's 0.9999 does not apply: 0.999


def test_the_cosine_is_skipped_only_where_the_low_type_cannot_resolve_the_output():
    """fp16 below 16 subnormal spacings (~9.5e-7): absolute terms only; bf16 keeps float32's range: judged."""
    rng = np.random.default_rng(4)
    ref = (2e-7 * rng.standard_normal(256)).astype(np.float32)
    conv = (ref + 6e-8 * rng.standard_normal(256)).astype(np.float32)  # fp16 subnormal-sized noise
    fp16 = judge(ref, conv, default_criteria("fp16"))
    assert fp16.passed and fp16.cosine < 0.99 and fp16.criterion != "cosine"
    bf16 = judge(ref, conv, default_criteria("bf16"))
    assert not bf16.passed and bf16.criterion == "cosine"
