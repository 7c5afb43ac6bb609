"""Calibration data: the statistics, each data rule (positive and negative), thresholds, streaming."""

import tracemalloc

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import ampconv
from ampconv.numerics.collect import collect
from ampconv.numerics.activations import TensorStats, Thresholds
from ampconv.core.lowtypes import low_type
from ampconv.validation.inputs import RandomDraw, SampleStream
from ampconv.numerics.modelio import declared_inputs, load
from ampconv_cli.main import cli
from helpers import decisions, model_from_text, save
from data_models import MARGIN_SCALE, MARGIN_SUB

FP16 = low_type("fp16")

# x -> MatMul (white) -> Mul (square) -> Log: the shape of an audio front end and a pitch model.
SPECTRUM = '<ir_version: 8, opset_import: ["" : 17]>' + """
g (float[1, 8] x) => (float[1, 8] y) <float[8, 8] w = {%s}> {
    spec = MatMul (x, w)
    power = Mul (spec, spec)
    y = Log (power)
}
""" % ", ".join("1.0" if i % 9 == 0 else "0.0" for i in range(64))

# A ReduceMean over many terms whose mean fits fp16 but whose running sum does not.
REDUCE = '<ir_version: 8, opset_import: ["" : 17]>' + """
g (float[1, 20000] x) => (float[1, 1] y) {
    t = Relu (x)
    y = ReduceMean <keepdims: int = 1> (t)
}
"""

# The square feeds a MatMul only: no error amplifier after it.
SQUARE_NO_AMPLIFIER = '<ir_version: 8, opset_import: ["" : 17]>' + """
g (float[1, 8] x) => (float[1, 8] y) <float[8, 8] w = {%s}> {
    power = Mul (x, x)
    y = MatMul (power, w)
}
""" % ", ".join("1.0" if i % 9 == 0 else "0.0" for i in range(64))


def _samples(folder, name, arrays):
    folder.mkdir()
    for i, array in enumerate(arrays):
        np.savez(folder / f"s{i}.npz", **{name: np.asarray(array, dtype=np.float32)})
    return folder


def _convert(tmp_path, text, arrays, **config):
    src = save(model_from_text(text), tmp_path / "m.onnx")
    data = _samples(tmp_path / "cal", "x", arrays)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(calibration_data=(str(data),), overwrite=True,
                                                                        **config))
    return report, decisions(report)


def test_tensor_stats_count_overflow_and_values_below_normal():
    stats = TensorStats("t")
    stats.update(np.array([0.0, 1e-6, 2e-6, 1.0, 7e4, np.inf], dtype=np.float32), FP16, 0)
    stats.update(np.array([3.0, -1e5], dtype=np.float32), FP16, 1)
    assert stats.samples == 2 and stats.elements == 8
    assert stats.nonfinite == 1
    assert stats.overflow == 2 and stats.max_abs == pytest.approx(1e5) and stats.max_sample == 1
    assert stats.below_normal == 2 and stats.nonzero == 6
    assert stats.min_nonzero_abs == pytest.approx(1e-6)


def test_thresholds_have_per_dtype_defaults_and_overrides():
    assert Thresholds.default(FP16).max_abs == 32752
    assert Thresholds.default(low_type("bf16")).max_abs > 1e38
    assert Thresholds.default(FP16, max_abs=100.0, below_normal=0.9) == Thresholds(100.0, 0.9)


def test_overflowing_activations_keep_the_node_float32_and_quote_the_evidence(tmp_path):
    report, nodes = _convert(tmp_path, SPECTRUM, [np.full((1, 8), 3e4)] * 3)
    assert nodes["MatMul_1"]["precision"] == "LOW"  # its output, 3e4, is within the guard (32752)
    assert nodes["Mul_2"]["rule"] == "data-overflow"
    reason = nodes["Mul_2"]["reason"]
    assert "max |x| = 9e+08" in reason and "3 samples" in reason and "float16 max 65504" in reason
    assert report.calibration["samples"] == 3 and "power" in report.calibration["overflowing"]


def test_activations_in_range_change_nothing(tmp_path):
    _report, nodes = _convert(tmp_path, SPECTRUM, [np.full((1, 8), 3.0)] * 3)
    assert not any(n["rule"].startswith("data-") for n in nodes.values())
    assert nodes["MatMul_1"]["precision"] == "LOW"


def test_bf16_range_takes_what_overflows_fp16(tmp_path):
    _report, nodes = _convert(tmp_path, SPECTRUM, [np.full((1, 8), 3e4)] * 3, dtype="bf16")
    assert not any(n["rule"] == "data-overflow" for n in nodes.values())


def test_data_max_lowers_the_overflow_guard(tmp_path):
    _report, nodes = _convert(tmp_path, SPECTRUM, [np.full((1, 8), 20.0)] * 2, data_max=100.0)
    assert nodes["Mul_2"]["rule"] == "data-overflow" and "guard 100" in nodes["Mul_2"]["reason"]


def test_running_sum_of_a_long_reduction_keeps_it_float32(tmp_path):
    report, nodes = _convert(tmp_path, REDUCE, [np.full((1, 20000), 5.0)] * 2)
    mean = nodes["ReduceMean_2"]
    assert mean["rule"] == "data-accumulation" and "over 20000 terms" in mean["reason"]
    assert report.calibration["accumulations"]["ReduceMean_2"]["max_sum"] == pytest.approx(1e5)


def test_short_sums_are_not_an_accumulation_hazard(tmp_path):
    _report, nodes = _convert(tmp_path, REDUCE, [np.full((1, 20000), 1.0)] * 2)
    assert nodes["ReduceMean_2"]["rule"] != "data-accumulation"


def test_underflow_before_log_keeps_the_square_float32(tmp_path):
    values = [np.full((1, 8), 1e-3)] * 2  # squares: 1e-6, below fp16's smallest normal 6.1e-5
    # The guard's own decision: the release step (on by default) tries it in LOW afterwards.
    _report, nodes = _convert(tmp_path, SPECTRUM, values, level="O3", release=False)
    square = nodes["Mul_2"]
    assert square["rule"] == "data-underflow"
    assert "100% of the non-zero values of power" in square["reason"] and "Log" in square["reason"]


def test_underflow_without_an_amplifier_is_left_low(tmp_path):
    _report, nodes = _convert(tmp_path, SQUARE_NO_AMPLIFIER, [np.full((1, 8), 1e-3)] * 2, level="O3")
    assert nodes["Mul_1"]["precision"] == "LOW"


def test_underflow_fraction_below_the_threshold_is_left_low(tmp_path):
    mostly_normal = np.array([[1e-3] + [1.0] * 7])  # 1 of 8 squares below normal
    (tmp_path / "default").mkdir()
    _report, nodes = _convert(tmp_path / "default", SPECTRUM, [mostly_normal] * 2, level="O3")
    assert nodes["Mul_2"]["rule"] != "data-underflow"
    (tmp_path / "lowered").mkdir()
    _report, nodes = _convert(tmp_path / "lowered", SPECTRUM, [mostly_normal] * 2, level="O3",
                              underflow_fraction=0.1, release=False)
    assert nodes["Mul_2"]["rule"] == "data-underflow"


def test_random_calibration_data_says_so(tmp_path):
    src = save(model_from_text(SPECTRUM), tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(
        calibration_data="random", calibration_samples=3, data_max=1.0, overwrite=True))
    reasons = [n["reason"] for n in report.nodes if n["rule"] == "data-overflow"]
    assert reasons and all("3 samples, random data" in r for r in reasons)
    assert report.calibration["random"] is True


def test_without_calibration_data_no_data_rule_applies(tmp_path):
    src = save(model_from_text(SPECTRUM), tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, synthetic_run=False))
    assert report.calibration is None and report.tune is None
    assert not any(n["rule"].startswith("data-") for n in report.nodes)


def test_the_default_synthetic_run_reads_overflow_only(tmp_path):
    """Without data, one seeded random sample is observed; underflow and accumulation are not read from it."""
    src = save(model_from_text(SPECTRUM), tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, underflow_fraction=0.01))
    assert report.calibration["synthetic"] is True and report.calibration["samples"] == 1
    assert not any(n["rule"].startswith("data-") for n in report.nodes)
    assert any("synthetic float32 run: 1 seeded random sample" in note and "--no-synthetic-run" in note
               for note in report.calibration["notes"])


def test_calibration_memory_does_not_grow_with_the_number_of_samples(tmp_path):
    src = str(save(model_from_text(REDUCE), tmp_path / "m.onnx"))
    specs = declared_inputs(load(src))

    def peak(count):
        stream = SampleStream((), specs, RandomDraw(count=count, seed=0))
        tracemalloc.start()
        collect(src, stream, FP16)
        _current, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    few, many = peak(5), peak(200)
    assert many < 1.2 * few, (few, many)


def test_sample_stream_reads_again_on_every_pass(tmp_path):
    folder = _samples(tmp_path / "cal", "x", [np.full((1, 8), float(i)) for i in range(3)])
    stream = SampleStream((str(folder),), declared_inputs(load(str(save(model_from_text(SPECTRUM),
                                                                           tmp_path / "m.onnx")))))
    assert stream.count == 3
    assert [s["x"][0, 0] for _, s in stream] == [0.0, 1.0, 2.0] == [s["x"][0, 0] for _, s in stream]


def test_bad_calibration_data_is_a_usage_error_and_writes_nothing(tmp_path):
    src = save(model_from_text(SPECTRUM), tmp_path / "m.onnx")
    folder = _samples(tmp_path / "cal", "wrong_name", [np.ones((1, 8))])
    out = tmp_path / "o.onnx"
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(out), "--calibration-data", str(folder)])
    assert result.exit_code == 2
    assert "unknown input 'wrong_name'" in result.output and str(folder) in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tune"], "--tune needs --calibration-data"),
        (["--data-max", "10"], "--data-max needs --calibration-data"),
        (["--calibration-data", "random", "--rtol", "0.1"], "--rtol needs --validate"),
        (["--calibration-data", "x.npz", "--calibration-samples", "3"], "needs --calibration-data random"),
        (["--calibration-data", "x.npz", "--input-range", "x:0,1"],
         "--input-range sets random inputs: the synthetic run's (no --calibration-data), --calibration-data random's "
         "or --validate's; with sample files it does nothing"),
        (["--no-synthetic-run", "--input-range", "x:0,1"], "which --no-synthetic-run turns off"),
    ],
)
def test_data_options_without_what_they_need_are_usage_errors(tmp_path, args, message):
    src = save(model_from_text(SPECTRUM), tmp_path / "m.onnx")
    result = CliRunner().invoke(cli, ["convert", str(src), *args])
    assert result.exit_code == 2 and message in result.output


def test_cli_summary_lists_the_data_guards(tmp_path):
    src = save(model_from_text(SPECTRUM), tmp_path / "m.onnx")
    folder = _samples(tmp_path / "cal", "x", [np.full((1, 8), 3e4)])
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(tmp_path / "o.onnx"), "--calibration-data",
                                      str(folder)])
    assert result.exit_code == 0, result.output
    assert "calibration: 1 sample(s) from files" in result.output
    assert "data guard: Mul_2 (Mul) kept float32: data: max |x| = 9e+08" in result.output
    onnx.checker.check_model(onnx.load(str(tmp_path / "o.onnx")))


# ---------------------------------------------------------------- the overflow guard's margin under --tune
# The two margin models are data_models.MARGIN_SUB and MARGIN_SCALE: values between the guard (32752) and fp16's max.


def _margin_samples(seed=0, count=4, spread=1e4):
    rng = np.random.default_rng(seed)
    return [40000.0 + rng.uniform(-1.0, 1.0, (1, 64)) * spread for _ in range(count)]


def _tune(tmp_path, text, arrays, **config):
    return _convert(tmp_path, text, arrays, tune=True, rtol=1e-2, atol=1e-2, level="O3", **config)


def test_calibration_summary_lists_tensors_over_the_guard_but_in_range():
    from ampconv.numerics.activations import Calibration

    stats = {name: TensorStats(name) for name in ("in_range", "margin", "over")}
    for name, peak in (("in_range", 3e4), ("margin", 4e4), ("over", 1e5)):
        stats[name].update(np.array([peak], dtype=np.float32), FP16, 0)
    summary = Calibration(FP16, 1, False, ("s",), stats, {}).summary()
    assert summary["near_max"] == {"margin": pytest.approx(4e4)}
    assert summary["overflowing"] == ["over"]


def test_tune_lowers_a_margin_node_again_when_validation_passes(tmp_path):
    report, nodes = _tune(tmp_path, MARGIN_SCALE, _margin_samples())
    assert nodes["Mul_1"]["precision"] == "LOW" and nodes["Mul_1"]["rule"] != "data-overflow"
    tune = report.tune
    assert tune["passed"] and tune["margin_nodes"] == 1 and tune["evaluations"] == 1
    (entry,) = tune["lowered"]
    assert entry["node"] == "Mul_1" and entry["max_abs"] > 32752
    assert "within float16 max 65504" in entry["evidence"] and "validation passes" in entry["evidence"]
    assert any(note.startswith("Mul_1 (Mul) lowered again: max |x|") for note in tune["notes"])


def test_without_tune_the_margin_node_stays_float32_and_says_why(tmp_path):
    _report, nodes = _convert(tmp_path, MARGIN_SCALE, _margin_samples(), level="O3", release=False)
    assert nodes["Mul_1"]["rule"] == "data-overflow"
    assert "only the guard's margin keeps it" in nodes["Mul_1"]["reason"]


def test_tune_keeps_a_margin_node_whose_lowering_fails_validation(tmp_path):
    # x = 40000 + a signal of +-10: fp16's spacing there is 32, so the Sub's LOW input loses the signal.
    report, nodes = _tune(tmp_path, MARGIN_SUB, _margin_samples(spread=10.0))
    assert nodes["Sub_1"]["precision"] == "HIGH" and nodes["Sub_1"]["rule"] == "data-overflow"
    tune = report.tune
    assert tune["passed"] and tune["lowered"] == [] and tune["evaluations"] <= tune["budget"]
    assert not tune["trials"][0]["passed"]  # the candidate with the margin node LOW was tried, and failed
    kept = {k["node"]: k for k in tune["kept"]}
    assert "within float16 max 65504" in kept["Sub_1"]["evidence"]


def test_tune_never_lowers_real_overflow(tmp_path):
    # x up to 7e4: over fp16's max itself, so no margin: the Sub stays float32 whatever validation says.
    report, nodes = _tune(tmp_path, MARGIN_SCALE, [np.full((1, 64), 7e4)] * 2)
    assert nodes["Mul_1"]["rule"] == "data-overflow" and "only the guard's margin" not in nodes["Mul_1"]["reason"]
    assert report.tune["margin_nodes"] == 0 and report.tune["lowered"] == []
    assert any("never lowers real overflow" in note for note in report.tune["notes"])


def test_tune_respects_an_explicit_data_max(tmp_path):
    report, nodes = _tune(tmp_path, MARGIN_SCALE, _margin_samples(), data_max=32752.0)
    assert nodes["Mul_1"]["rule"] == "data-overflow"
    assert report.tune["margin_nodes"] == 0 and report.tune["lowered"] == []
    assert any("--data-max 32752 is the user's threshold" in note for note in report.tune["notes"])


def _planner_context(text, peak, pins, **config):
    from ampconv.plan.search_pins import SearchPins
    from ampconv.numerics.activations import Calibration
    from ampconv.plan.context import PlanContext
    from ampconv.policy import load_policy

    import onnx_ir as ir

    model = ir.serde.deserialize_model(model_from_text(text))
    for node in model.graph:
        node.name = node.outputs[0].name  # the text format has no node names
    stats = TensorStats("x")
    stats.update(np.array([peak], dtype=np.float32), FP16, 0)
    calibration = Calibration(FP16, 1, False, ("s",), {"x": stats}, {})
    ctx = PlanContext.create(model, load_policy(level="O3"), ampconv.Config(level="O3", **config).plan_options, {},
                             calibration=calibration, tune_pins=SearchPins(released={n: "test" for n in pins}))
    return ctx, next(iter(model.graph))


@pytest.mark.parametrize("peak, config, released", [
    (4e4, {}, True),  # within fp16's max, default guard: the pin releases it
    (7e4, {}, False),  # real overflow: a release pin is not obeyed
    (4e4, {"data_max": 32752.0}, False),  # the user's threshold: not obeyed either
])
def test_the_planner_checks_a_release_pin_again(peak, config, released):
    from ampconv.plan import data_guards as data
    from ampconv.plan.facts import node_facts

    ctx, node = _planner_context(MARGIN_SCALE, peak, ["s"], **config)
    facts = node_facts(node, ctx.opsets)
    assert data.accuracy_pin(ctx, node, facts) is None  # a release is never a data-tune pin
    decision = data.activation_range(ctx, node, facts)
    assert (decision is None) == released
    unpinned, _ = _planner_context(MARGIN_SCALE, peak, [], **config)
    assert data.activation_range(unpinned, node, facts).rule == "data-overflow"  # negative: no pin, kept


def _attention(tmp_path, name):

    import hazard_models as hm

    path = tmp_path / f"{name}.onnx"
    onnx.save(hm.attention(float(np.finfo(np.float32).min)), str(path))
    return path


def test_a_mask_fill_the_guard_stores_low_is_not_data_overflow(tmp_path):
    """-3.4e38 fill: stored as -32768, so the masked scores are no overflow; the summary no longer contradicts itself."""
    src = _attention(tmp_path, "att")
    report = ampconv.convert(src, tmp_path / "att.fp16.onnx", ampconv.Config(calibration_data=("random",)))
    by_name = report.decisions_by_node()
    assert by_name["add_mask"]["precision"] == "LOW"
    assert by_name["softmax"]["rule"] != "data-overflow"  # kept float32 only by the fully masked row (range-mask)
    assert not any(d["rule"] == "data-overflow" for d in by_name.values())


def test_scores_that_overflow_beside_a_mask_fill_still_keep_the_masked_add_float32(tmp_path):
    """Negative: the fill explains the masked tensor's peak only when the scores themselves stay in range."""
    src = _attention(tmp_path, "att_big")
    config = ampconv.Config(calibration_data=("random",), input_ranges={"q": (-3000, 3000), "k": (-3000, 3000)})
    report = ampconv.convert(src, tmp_path / "att_big.fp16.onnx", config)
    by_name = report.decisions_by_node()
    assert by_name["add_mask"]["rule"] == "data-overflow" and by_name["qk"]["rule"] == "data-overflow"
    assert by_name["softmax"]["precision"] == "HIGH"
