"""Validation results that can be trusted on awkward models.

- Paddle-style ``[-1, 3, ?, ?]`` inputs: -1 and unnamed dims take any size,
  random data fills them with 1 (and says so), ``--shape`` sets them whole or
  per axis, and a malformed ``--shape`` is a one-line usage error.
- A reference model with a bfloat16 graph output.
- An emulated model whose graph output is also a graph input.
- An output with new NaN/Inf never shows cosine 1 and max abs 0.
"""

import json
import math

import numpy as np
import pytest
import validate_models as vm
from ampconv_cli.errors import flag_of
from ampconv_cli.main import cli

from ampconv.errors import UsageError
from ampconv.validation import ValidateOptions, parse_shape, validate
from ampconv.numerics import metrics
from ampconv.validation.render import render


def _one_line_usage_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ampconv: error: "), result.stderr
    return lines[0]


@pytest.fixture()
def paddle(tmp_path):
    return vm.paddle_pair(tmp_path)


# 1. -1 and unnamed dimensions


def test_unnamed_and_minus_one_dims_default_to_one_with_a_note(paddle):
    result = validate(*paddle, ValidateOptions(backend="emulate"))
    assert result.passed
    assert result.outputs[0].shape == (1, 3, 1, 1)
    note = next(n for n in result.notes if n.startswith("input 'x'"))
    assert "[-1, 3, ?, ?]: axes 0, 2, 3 are -1 or unnamed" in note
    # In a Python caller's words (issue 40): the parameter, not the command line's flag.
    assert "size 1" in note and "shapes={'x[3]': N}" in note and "shapes={'x': [1, 3, 1, 1]}" in note
    assert "note: input 'x' [-1, 3, ?, ?]" in render(result, "text")
    # The CLI spells the same note with its flags.
    cli_text = render(result, "text", flag_of)
    assert "--shape 'x[3]:N'" in cli_text and "--shape x:1x3x1x1" in cli_text


def test_shape_sets_unnamed_dims_whole_or_per_axis(cli_runner, paddle):
    whole = cli_runner.invoke(cli, ["validate", *paddle, "-q", "--format", "json", "--shape", "x:1x3x48x192"])
    assert whole.exit_code == 0, whole.output
    data = json.loads(whole.stdout)
    assert data["outputs"][0]["shape"] == [1, 3, 48, 192]
    assert not any("unnamed" in n for n in data["notes"])  # nothing was filled in
    axes = cli_runner.invoke(
        cli, ["validate", *paddle, "-q", "--format", "json", "--shape", "x[2]:48", "--shape", "x[-1]:192",
              "--shape", "x[0]:2"],
    )
    assert axes.exit_code == 0, axes.output
    assert json.loads(axes.stdout)["outputs"][0]["shape"] == [2, 3, 48, 192]
    # A fixed dimension still has to match, whichever form sets it.
    fixed = _one_line_usage_error(cli_runner.invoke(cli, ["validate", *paddle, "--shape", "x[1]:4"]))
    assert "the model fixes axis 1 to 3" in fixed
    fixed = _one_line_usage_error(cli_runner.invoke(cli, ["validate", *paddle, "--shape", "x:1x4x48x192"]))
    assert "axis 1 is 4, the model fixes it to 3" in fixed


def test_npz_of_any_size_on_unnamed_dims(tmp_path, paddle):
    good = tmp_path / "good.npz"
    np.savez(good, x=np.random.default_rng(0).standard_normal((2, 3, 48, 192)).astype(np.float32))
    result = validate(*paddle, ValidateOptions(inputs=(str(good),), backend="emulate"))
    assert result.passed and result.outputs[0].shape == (2, 3, 48, 192)
    assert not any("unnamed" in n for n in result.notes)
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.zeros((1, 4, 48, 192), np.float32))
    with pytest.raises(UsageError, match=r"input 'x' has shape \[1, 4, 48, 192\], the model declares \[-1, 3, \?, \?\] \(axis 1\)"):
        validate(*paddle, ValidateOptions(inputs=(str(bad),)))


def test_suggested_shape_never_contains_minus_one(tmp_path, cli_runner):
    ref, conv = vm.paddle_pair(tmp_path, dims=(-1, "length", None))
    result = cli_runner.invoke(cli, ["validate", ref, conv])
    assert result.exit_code == 0, result.output
    # Quoted for the shell (brackets are glob characters): the words copy as printed.
    assert "--shape 'x[2]:N' or the whole shape with --shape x:1x1x1" in result.stdout
    assert "dimension 'length' (input x) is not set" in result.stdout and "-1x" not in result.stdout
    # The suggestion works as printed.
    assert cli_runner.invoke(cli, ["validate", ref, conv, "-q", "--shape", "x:1x1x1"]).exit_code == 0
    assert cli_runner.invoke(cli, ["validate", ref, conv, "-q", "--shape", "length:5"]).exit_code == 0


@pytest.mark.parametrize(
    "text, says",
    [
        ("?:48", "'?' is not a name"),
        ("-1:48", "'-1' is not a name"),
        ("x:-1x3x1x1", "dimensions must be >= 0"),
        ("x[2:48", "NAME[AXIS]:N with an integer AXIS"),
        ("x[a]:48", "NAME[AXIS]:N with an integer AXIS"),
        ("x[2]:4x5", "NAME[AXIS] takes one size"),
        ("x[2]:", "bad shape"),
        ("x:1x", "integers separated by 'x'"),
        ("x", "bad shape"),
        (":3", "bad shape"),
        ("x[9]:4", "input 'x' has rank 4 ([-1, 3, ?, ?]), no axis 9"),
        ("y[0]:4", "--shape y[0]: no input or dimension of that name"),
        ("x:1x3x4", "rank 3 given, the model declares rank 4"),
    ],
)
def test_malformed_shape_is_a_one_line_usage_error(cli_runner, paddle, text, says):
    message = _one_line_usage_error(cli_runner.invoke(cli, ["validate", *paddle, "--shape", text]))
    assert says in message


def test_question_mark_points_at_the_axis_form():
    with pytest.raises(UsageError, match=r"x\[2\]:48"):
        parse_shape("?:48")
    assert parse_shape("x[2]:48") == ("x[2]", (48,))
    assert parse_shape("input:0[-1]:7") == ("input:0[-1]", (7,))


def test_help_documents_the_axis_form(cli_runner):
    result = cli_runner.invoke(cli, ["validate", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "x[2]:48" in text and "unset (-1, unnamed" in text


# 2. bfloat16 outputs of the reference


@pytest.mark.parametrize("backend", ["emulate", "native"])
def test_reference_with_bfloat16_output(tmp_path, backend):
    ref, conv = vm.bf16_output_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(backend=backend))
    assert result.passed, render(result, "text")
    assert result.outputs[0].name == "y" and result.outputs[0].shape == (2, 4)
    assert not result.outputs[0].exact  # compared as floats, with tolerances


def test_bfloat16_reference_output_drift_is_measured_and_localized(tmp_path):
    ref, conv = vm.bf16_output_pair(tmp_path, factor=1.5)
    result = validate(ref, conv, ValidateOptions(backend="emulate", localize=True))
    assert not result.passed
    worst = result.outputs[0].worst
    assert math.isfinite(worst.max_abs) and worst.max_abs > 0.1 and worst.new_nonfinite == 0
    # Localization reads the bfloat16 tensors of the reference too.
    assert result.localization.node == "mul" and result.localization.output == "scaled"


# 3. graph outputs that are graph inputs


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("backend", ["emulate", "native"])
def test_output_that_is_an_input(tmp_path, dtype, backend):
    ref, conv = vm.passthrough_pair(tmp_path, dtype)
    result = validate(ref, conv, ValidateOptions(backend=backend, localize=True))
    assert [o.name for o in result.outputs] == ["y", "x"]
    assert result.passed, render(result, "text")
    x = result.outputs[1].worst
    # x really went through the LOW type: the float32 random data was rounded.
    assert 0 < x.max_abs < (1e-2 if dtype == "bf16" else 1e-3)


def test_reference_output_that_is_a_bfloat16_input(tmp_path):
    # Both models declare x bfloat16 and return it: the reference is wrapped too.
    _, conv = vm.passthrough_pair(tmp_path, "bf16")
    result = validate(conv, conv, ValidateOptions(backend="emulate"))
    assert result.passed and [o.name for o in result.outputs] == ["y", "x"]


# 4. non-finite values never look perfect


def test_metrics_of_an_output_with_new_nan():
    ref = np.ones(8, dtype=np.float32)
    conv = ref.copy()
    conv[:3] = np.nan
    m = metrics.compare(ref, conv, 1e-2, 1e-2)
    assert not m.passed and m.new_nonfinite == 3 and m.unmatched_nonfinite == 3
    assert m.max_abs == math.inf and m.max_rel == math.inf and m.mean_abs == math.inf and m.rmse == math.inf
    assert math.isnan(m.cosine)
    # The finite part is still reported, apart.
    assert m.finite_size == 5 and m.finite_max_abs == 0.0 and m.finite_cosine == pytest.approx(1.0)
    all_nan = metrics.compare(ref, np.full(8, np.nan, np.float32), 1e-2, 1e-2)
    assert all_nan.max_abs == math.inf and math.isnan(all_nan.cosine)
    assert all_nan.finite_size == 0 and all_nan.finite_max_abs is None and all_nan.finite_cosine is None
    # A lost infinity is as unbounded as a new one.
    lost = metrics.compare(np.array([np.inf, 1.0]), np.array([65504.0, 1.0]), 1.0, 1.0)
    assert lost.max_abs == math.inf and math.isnan(lost.cosine) and lost.new_nonfinite == 0
    # Matched non-finite values are not errors.
    same = metrics.compare(np.array([np.nan, np.inf, 1.0]), np.array([np.nan, np.inf, 1.0]), 0.0, 0.0)
    assert same.passed and same.max_abs == 0.0 and same.cosine == pytest.approx(1.0)


def test_worst_keeps_a_nan_cosine_whatever_the_order():
    ref = np.ones(4)
    good = metrics.compare(ref, ref, 0.1, 0.1)
    bad = metrics.compare(ref, np.array([np.nan, 1, 1, 1]), 0.1, 0.1)
    for order in ([good, bad], [bad, good]):
        w = metrics.worst(order)
        assert math.isnan(w.cosine) and w.max_abs == math.inf
        assert w.unmatched_nonfinite == 1 and w.finite_size == 7 and w.finite_cosine == pytest.approx(1.0)


def test_rendered_nonfinite_row_is_honest(tmp_path, cli_runner):
    ref, conv = vm.overflow_pair(tmp_path)
    npz = tmp_path / "in.npz"
    np.savez(npz, **vm.overflow_inputs())
    args = ["validate", ref, conv, "--inputs", str(npz), "--backend", "emulate"]
    text = cli_runner.invoke(cli, args)
    assert text.exit_code == 3
    row = next(line for line in text.stdout.splitlines() if line.startswith("y "))
    cells = row.split()
    assert cells[1] == "FAIL" and cells[2] == "inf" and cells[6] == "nan" and cells[7] == "8", row
    assert "y: 8 of 8 value(s) are NaN/Inf in one model only, 8 of them new in the converted model" in text.stdout
    markdown = cli_runner.invoke(cli, [*args, "--format", "markdown"]).stdout
    row = next(line for line in markdown.splitlines() if line.startswith("| y |"))
    assert "| inf | inf | inf | inf | nan | 8 |" in row
    assert "- y: 8 of 8 value(s) are NaN/Inf in one model only" in markdown
    data = json.loads(cli_runner.invoke(cli, [*args, "--format", "json"]).stdout)
    worst = data["outputs"][0]["worst"]
    assert worst["max_abs"] == "inf" and worst["cosine"] == "nan" and worst["unmatched_nonfinite"] == 8
    assert worst["finite_size"] == 0 and worst["finite_max_abs"] is None
