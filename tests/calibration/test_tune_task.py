"""``--tune`` is judged by what validate would judge (issue 39): the user's metric, ``--limit``, the user's
criteria objects, or the defaults; and a decoder with a cache keeps its greedy decode.

Before: the search built its criteria from ``rtol``/``atol`` alone, so a
``--limit`` reached it only by way of the defaults, and a user could not hand
it their own measure.
"""

from __future__ import annotations

import json
import textwrap
import types

import numpy as np
import onnx
import pytest

import ampconv
import data_models
from ampconv.calibration import tune as tuning
from ampconv.calibration.tune import Evaluator, Task, judging_task, node_floor_for, node_floor_of
from ampconv.core.lowtypes import low_type
from ampconv.errors import UsageError
from ampconv.numerics.modelio import load
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.criteria import AT_MOST, Criterion
from ampconv_cli.convert import command as convert_command
from ampconv_cli.validate import command as validate_command

# The user's bound: the max error of y within 6e-4 of y's largest value (fp16 gives about 7e-4).
BOUND = 6e-4


def max_error(reference, converted):
    """The user's measure: the max error of ``y`` over its largest value, within ``BOUND``."""
    ref, conv = reference["y"].astype(np.float64), converted["y"].astype(np.float64)
    error = float(np.abs(conv - ref).max() / np.abs(ref).max())
    return error <= BOUND, f"max error {error:.3g} of y's largest value (bound {BOUND:g})"


@pytest.fixture()
def mlp(tmp_path):
    """The tanh MLP and 8 calibration samples of 32 rows."""
    src = tmp_path / "mlp.onnx"
    onnx.save(data_models.tanh_mlp(), str(src))
    calibration = tmp_path / "cal"
    data_models.write_samples(calibration, data_models.tanh_mlp_samples(8))
    return str(src), str(calibration)


def _low(report) -> list:
    return [n["name"] for n in report.nodes if n["precision"] == "LOW"]


def test_tune_with_a_metric_writes_a_model_on_which_it_holds_with_part_still_low(mlp, tmp_path):
    src, calibration = mlp
    plain = ampconv.convert(src, tmp_path / "plain.onnx", ampconv.Config())
    on_samples = ValidateOptions(inputs=(calibration,), backend="emulate", metric=max_error)
    before = validate(src, plain.output, on_samples)
    assert all(o.passed for o in before.outputs) and not before.passed  # the criteria pass; the user's bound not
    report = ampconv.convert(src, tmp_path / "tuned.onnx", ampconv.Config(
        calibration_data=calibration, tune=True, metric=max_error))
    assert report.tune["passed"] and report.tune["kept"]
    assert any("metric test_tune_task:max_error" in k["evidence"] for k in report.tune["kept"]), report.tune["kept"]
    after = validate(src, report.output, on_samples)
    assert after.passed and after.metric.samples == 8, after.summary_line()
    low = _low(report)
    assert any(name.startswith("fc") for name in low), low  # a MatMul still runs fp16
    assert report.tune["trials"][0]["detail"].startswith("metric test_tune_task:max_error on sample 0: max error")


def test_tune_on_the_cli_with_metric_and_validate_agree(mlp, tmp_path, monkeypatch, cli_runner):
    src, calibration = mlp
    (tmp_path / "user_bound.py").write_text(textwrap.dedent(f'''
        import numpy as np
        def max_error(reference, converted):
            ref, conv = reference["y"].astype(np.float64), converted["y"].astype(np.float64)
            error = float(np.abs(conv - ref).max() / np.abs(ref).max())
            return error <= {BOUND}, f"max error {{error:.3g}}"
    '''))
    monkeypatch.chdir(tmp_path)
    out, report = tmp_path / "tuned.onnx", tmp_path / "r.json"
    run = cli_runner.invoke(convert_command, [src, "-o", str(out), "--calibration-data", calibration, "--tune",
                                              "--metric", "user_bound:max_error", "--report", str(report), "-q",
                                              "--validate", "--inputs", calibration, "--fail-on-drift"])
    assert run.exit_code == 0, run.output
    assert run.stdout.startswith("PASS: metric user_bound:max_error holds on 8/8 sample(s)")
    assert json.loads(report.read_text())["tune"]["passed"]
    plain = cli_runner.invoke(convert_command, [src, "-o", str(tmp_path / "plain.onnx"), "-q"])
    assert plain.exit_code == 0, plain.output
    check = cli_runner.invoke(validate_command, [src, str(tmp_path / "plain.onnx"), "--inputs", calibration,
                                                 "--metric", "user_bound:max_error"])
    assert check.exit_code == 3 and check.stdout.startswith("FAIL: metric user_bound:max_error fails on 8 of 8")


def test_tune_honours_a_limit(mlp, tmp_path):
    src, calibration = mlp
    limit = {"y": {"p99": 1e-3}}  # the default is 3e-2; fp16 reads about 1.7e-3
    report = ampconv.convert(src, tmp_path / "tuned.onnx", ampconv.Config(
        calibration_data=calibration, tune=True, limits=limit))
    assert report.tune["passed"] and report.tune["kept"] and _low(report)
    assert "> 0.001" in report.tune["trials"][0]["detail"]
    assert validate(src, report.output, ValidateOptions(inputs=(calibration,), backend="emulate", limits=limit)).passed


def test_without_a_limit_tune_pins_nothing(mlp, tmp_path):
    """Negative: the same model on the defaults passes at once; the limit above is what made the search run."""
    src, calibration = mlp
    report = ampconv.convert(src, tmp_path / "tuned.onnx", ampconv.Config(calibration_data=calibration, tune=True))
    assert report.tune["passed"] and report.tune["evaluations"] == 1 and report.tune["kept"] == []


def test_tune_honours_a_criterion_a_user_adds(mlp, tmp_path):
    src, calibration = mlp
    worst = Criterion("worst", "max |conv - ref| over max |ref|", AT_MOST, {"fp16": BOUND},
                      figure=lambda r, c: float(np.abs(c - r).max() / np.abs(r).max()), outputs=("y",))
    report = ampconv.convert(src, tmp_path / "tuned.onnx", ampconv.Config(
        calibration_data=calibration, tune=True, extra_criteria=(worst,)))
    assert report.tune["passed"] and report.tune["kept"] and _low(report)
    assert validate(src, report.output, ValidateOptions(inputs=(calibration,), backend="emulate",
                                                        extra_criteria=(worst,))).passed


def test_the_judging_fields_need_tune_and_are_checked_as_validate_checks_them(mlp):
    _, calibration = mlp
    for given in ({"metric": max_error}, {"limits": {"y": {"p99": 0.01}}}, {"natures": {"y": "values"}}):
        with pytest.raises(UsageError, match="sets how tune judges its candidates"):
            ampconv.Config(**given)
    with pytest.raises(UsageError, match="unknown criterion 'psnr'"):
        ampconv.Config(calibration_data=calibration, tune=True, limits={"y": {"psnr": 30}})
    with pytest.raises(UsageError, match="no module 'not_a_module_anywhere'"):
        ampconv.Config(calibration_data=calibration, tune=True, metric="not_a_module_anywhere:f")


def test_cli_judging_flags_need_validate_or_tune(mlp, cli_runner):
    src, _ = mlp
    for flags in (["--metric", "m:f"], ["--limit", "y:p99=0.01"], ["--nature", "y=values"]):
        run = cli_runner.invoke(convert_command, [src, "--dry-run", *flags])
        assert run.exit_code == 2 and "needs --validate or --tune" in run.output, run.output


def _request(**config):
    built = ampconv.Config(**config)
    return types.SimpleNamespace(data_options=built.data_options, plan_options=built.plan_options)


def test_the_node_floor_is_lifted_where_the_user_demands(mlp):
    _, calibration = mlp
    fp16 = node_floor_of(low_type("fp16"))
    assert node_floor_for(_request()) == fp16  # the defaults: a node at rounding's error is never pinned
    tuned = {"calibration_data": calibration, "tune": True}
    assert node_floor_for(_request(**tuned, metric=max_error)) == 0.0
    assert node_floor_for(_request(**tuned, limits={"y": {"p99": 1e-3}})) == 0.0
    assert node_floor_for(_request(**tuned, rtol=1e-3)) == fp16  # the strict rule: as before


# ---------------------------------------------------------------- a decoder with a cache


@pytest.fixture()
def decoder(tmp_path):
    from tests.llm_models import decode_feeds, decode_step

    src = decode_step(tmp_path / "d.onnx")
    calibration = tmp_path / "cal"
    data_models.write_samples(calibration, (decode_feeds(seed=s) for s in range(3)))
    return str(src), str(calibration)


def test_a_decoder_with_a_cache_is_tuned_to_its_greedy_decode(decoder):
    src, calibration = decoder
    task = judging_task(_request(calibration_data=calibration, tune=True), load(src))
    assert task.decoder is not None and task.decoder.logits == "logits"
    assert task.floor is not None  # and its outputs are still judged as validate judges them


def test_an_mlp_has_no_decode_task(mlp):
    """Negative: no cache, no decode; and a metric replaces every other judge."""
    src, calibration = mlp
    assert judging_task(_request(calibration_data=calibration, tune=True), load(src)).decoder is None
    with_metric = judging_task(_request(calibration_data=calibration, tune=True, metric=max_error), load(src))
    assert with_metric.decoder is None and with_metric.floor is None


def _samples(src, folder):
    from ampconv.numerics.modelio import declared_inputs
    from ampconv.validation.inputs import SampleStream

    return list(SampleStream((folder,), declared_inputs(load(src))))


def test_a_candidate_whose_decode_diverges_fails(decoder, tmp_path):
    """Every output judged passing (to isolate the decode): a candidate with its logits negated picks other
    tokens and fails on its decode; the true fp16 conversion keeps it."""
    src, calibration = decoder
    fp16 = str(tmp_path / "d.fp16.onnx")
    ampconv.convert(src, fp16, ampconv.Config())
    roles = judging_task(_request(calibration_data=calibration, tune=True), load(src)).decoder

    def negated(_pins):
        model = onnx.load(fp16)
        for node in model.graph.node:
            node.output[:] = ["logits_kept" if o == "logits" else o for o in node.output]
        model.graph.node.append(onnx.helper.make_node("Neg", ["logits_kept"], ["logits"]))
        path = tmp_path / "negated.onnx"
        onnx.save(model, str(path))
        return load(str(path))

    samples = _samples(src, calibration)
    always = Task(lambda ref, conv, floor, index: None, decoder=roles)
    broken = Evaluator(src, samples, negated, always, False)
    try:
        outcome = broken({})
    finally:
        broken.close()
    assert not outcome.passed and outcome.detail.startswith("the greedy decode from sample 0: greedy decode: tokens")
    honest = Evaluator(src, samples, lambda _pins: load(fp16), always, False)
    try:
        assert honest({}).passed
    finally:
        honest.close()


def test_tune_on_a_decoder_decodes_each_candidate(decoder, tmp_path, monkeypatch):
    src, calibration = decoder
    calls = []
    original = tuning.decode.decode_against

    def spy(*args, **kwargs):
        result = original(*args, **kwargs)
        calls.append(result)
        return result

    monkeypatch.setattr(tuning.decode, "decode_against", spy)
    report = ampconv.convert(src, tmp_path / "d.fp16.onnx", ampconv.Config(calibration_data=calibration, tune=True))
    assert report.tune["passed"] and calls and all(c.passed for c in calls)
    assert len(calls) == report.tune["evaluations"]
    assert not any("greedy decode not judged" in note for note in report.tune["notes"])
