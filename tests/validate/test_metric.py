"""The user's own measure of success decides the verdict (issue 39): ``--metric MODULE:FUNCTION`` and
``ValidateOptions(metric=...)``.

``FUNCTION(reference, converted)`` is called once per sample with dicts
output name -> array and returns a bool or ``(bool, words)``. When given it
decides: exit 0 when it holds on every sample, 3 when not; the table still
shows each output's figures; the verdict line names the metric and quotes its
words. Whatever the user's code does wrong is one line naming it.
"""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest

from ampconv.errors import AmpconvError, UsageError
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.metric import MetricError, load_metric, metric_of
from ampconv_cli.validate import command

import validate_models as vm

METRICS = '''
import numpy as np

def top1_agrees(reference, converted):
    ref, conv = reference["logits"], converted["logits"]
    same = int((ref.argmax(-1) == conv.argmax(-1)).sum())
    return same == ref.shape[0], f"top-1 agrees on {same} of {ref.shape[0]} row(s)"

def bit_exact(reference, converted):
    err = max(float(np.abs(reference[k] - converted[k]).max()) for k in reference)
    return err == 0.0, f"max abs error {err:.3g}, must be 0"

def plain_true(reference, converted):
    return np.all(reference["logits"] == reference["logits"])

def divides_by_zero(reference, converted):
    return 1 / 0

def says_yes(reference, converted):
    return "yes"

def writes_into(reference, converted):
    converted["logits"][...] = 0
    return True

not_a_function = 3
'''


@pytest.fixture()
def pair(tmp_path, monkeypatch):
    """An MLP and its fp16 twin, and a metrics module (named for the test) in the working directory."""
    ref, conv = vm.mlp_pair(tmp_path)
    name = f"metrics_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(METRICS))
    monkeypatch.chdir(tmp_path)
    return ref, conv, name


def _options(**given):
    return ValidateOptions(backend="emulate", shapes={"batch": (16,)}, samples=3, **given)


def test_a_metric_that_holds_passes_and_its_words_are_on_the_verdict_line(pair):
    ref, conv, module = pair
    result = validate(ref, conv, _options(metric=f"{module}:top1_agrees"))
    assert result.passed and result.metric.passed and result.metric.samples == 3
    line = result.summary_line()
    assert line.startswith(f"PASS: metric {module}:top1_agrees holds on 3/3 sample(s)")
    assert '(sample 0: "top-1 agrees on 16 of 16 row(s)")' in line
    assert result.to_dict()["metric"]["passed"] is True


def test_a_metric_that_never_holds_fails_whatever_the_figures_say(pair):
    ref, conv, module = pair
    result = validate(ref, conv, _options(metric=f"{module}:bit_exact"))
    assert all(o.passed for o in result.outputs)  # the default criteria pass it ...
    assert not result.passed and result.metric.failed == 3  # ... the user's measure does not, and decides
    assert result.summary_line().startswith(f"FAIL: metric {module}:bit_exact fails on 3 of 3 sample(s)")
    assert "must be 0" in result.summary_line()
    assert result.outputs[0].worst.cosine > 0.999  # the figures are still measured


def test_without_a_metric_the_verdict_is_the_criteria(pair):
    """Negative: the same pair without --metric passes on the default criteria; nothing names a metric."""
    ref, conv, _ = pair
    result = validate(ref, conv, _options())
    assert result.passed and result.metric is None and "metric" not in result.summary_line()


def test_a_library_callable_and_a_plain_bool(pair):
    ref, conv, _ = pair
    seen = []

    def mine(reference, converted):
        seen.append((sorted(reference), sorted(converted), reference["logits"].flags.writeable))
        return bool(np.allclose(reference["logits"], converted["logits"], atol=0.05))

    result = validate(ref, conv, _options(metric=mine))
    assert result.passed and result.metric.name.endswith(":test_a_library_callable_and_a_plain_bool.<locals>.mine")
    assert seen == [(["logits"], ["logits"], False)] * 3  # once per sample, read-only arrays
    assert validate(ref, conv, _options(metric=lambda r, c: np.bool_(False))).passed is False


@pytest.mark.parametrize("function, words", [
    ("divides_by_zero", "raised ZeroDivisionError on sample 0: division by zero"),
    ("says_yes", "returned 'yes' (str) on sample 0: expected a bool, or (bool, words)"),
    ("writes_into", "raised ValueError on sample 0: assignment destination is read-only"),
])
def test_an_error_inside_the_metric_is_one_line_naming_it(pair, function, words):
    ref, conv, module = pair
    with pytest.raises(MetricError, match=None) as caught:
        validate(ref, conv, _options(metric=f"{module}:{function}"))
    assert str(caught.value) == f"metric {module}:{function} {words}"


def test_a_metric_that_cannot_be_loaded_is_a_usage_error(pair):
    _, _, module = pair
    with pytest.raises(UsageError, match=f"module '{module}' .* has no function 'nope'"):
        load_metric(f"{module}:nope")
    with pytest.raises(UsageError, match="is a int, not a function"):
        load_metric(f"{module}:not_a_function")
    with pytest.raises(UsageError, match="no module 'no_such_module_here' in the working directory"):
        load_metric("no_such_module_here:f")
    with pytest.raises(UsageError, match="expected MODULE:FUNCTION"):
        ValidateOptions(metric="justamodule")
    with pytest.raises(UsageError, match="must be a function"):
        metric_of(3)


def test_a_module_that_raises_on_import_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "broken_metric_mod.py").write_text("import numpy\nraise RuntimeError('no GPU here')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="module 'broken_metric_mod' does not import: RuntimeError: no GPU here"):
        load_metric("broken_metric_mod:f")


# ---------------------------------------------------------------- the command line (a forked child runs it)


def test_cli_exit_0_when_it_holds_and_3_naming_it_when_not(pair, cli_runner):
    ref, conv, module = pair
    holds = cli_runner.invoke(command, [ref, conv, "--shape", "batch:16", "--samples", "2",
                                        "--metric", f"{module}:top1_agrees"])
    assert holds.exit_code == 0, holds.output
    assert holds.stdout.startswith(f"PASS: metric {module}:top1_agrees holds on 2/2 sample(s)")
    assert "logits  ok" in holds.stdout  # the per-output table is still there
    assert "The verdict is the metric's" in holds.stdout
    fails = cli_runner.invoke(command, [ref, conv, "--shape", "batch:16", "--metric", f"{module}:bit_exact",
                                        "--format", "json"])
    assert fails.exit_code == 3, fails.output
    data = json.loads(fails.stdout)
    assert data["passed"] is False and data["metric"]["name"] == f"{module}:bit_exact"
    assert data["outputs"][0]["passed"] is True


@pytest.mark.parametrize("spec, code, words", [
    ("{m}:divides_by_zero", 1, "metric {m}:divides_by_zero raised ZeroDivisionError on sample 0: division by zero"),
    ("{m}:says_yes", 1, "metric {m}:says_yes returned 'yes' (str) on sample 0"),
    ("{m}:nope", 2, "--metric {m}:nope: module '{m}'"),
    ("nowhere_module:f", 2, "--metric nowhere_module:f: no module 'nowhere_module'"),
])
def test_cli_errors_are_one_line_without_a_traceback(pair, cli_runner, spec, code, words):
    ref, conv, module = pair
    result = cli_runner.invoke(command, [ref, conv, "--metric", spec.format(m=module)])
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ampconv: error: " + words.format(m=module)), result.stderr
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)


def test_localization_checks_its_fix_by_the_metric(tmp_path, monkeypatch, cli_runner):
    """The fix localization suggests is checked by the metric that decides, not by the criteria."""
    (tmp_path / "finite_metric.py").write_text(
        "import numpy as np\n"
        "def finite(reference, converted):\n"
        "    bad = int((~np.isfinite(converted['y'])).sum())\n"
        "    return bad == 0, f'{bad} non-finite value(s)'\n")
    monkeypatch.chdir(tmp_path)
    ref, conv = vm.overflow_pair(tmp_path)
    np.savez(tmp_path / "in.npz", **vm.overflow_inputs())
    result = cli_runner.invoke(command, [ref, conv, "--inputs", str(tmp_path / "in.npz"), "--localize",
                                         "--metric", "finite_metric:finite"])
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith("FAIL: metric finite_metric:finite fails on 1 of 1 sample(s)")
    # Checked by the metric on the run's sample (the advice sentence: ampconv/validation/advice.py).
    assert "by metric finite_metric:finite: this fix passes (then: metric finite_metric:finite holds on 1/1 " \
           "sample(s)" in result.stdout, result.stdout


def test_metric_errors_pickle_back_from_the_forked_child():
    import pickle

    err = pickle.loads(pickle.dumps(MetricError("metric m:f raised X on sample 0")))
    assert isinstance(err, MetricError) and isinstance(err, AmpconvError) and str(err) == "metric m:f raised X on sample 0"
