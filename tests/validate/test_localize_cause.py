"""--localize names the LOW node that loses the precision, and its suggestion changes the result."""

import pytest

import ampconv
import data_models
from ampconv.validation import ValidateOptions


def _converted_and_located(tmp_path, name):
    src, calibration = data_models.MODELS[name].save_with_calibration(tmp_path, 4)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(overwrite=True))
    options = ValidateOptions(inputs=(str(calibration),), backend="emulate", localize=True,
                              decisions=report.decisions_by_node())
    return src, calibration, ampconv.validate(src, report.output, options)


def _passes_with(tmp_path, src, calibration, suggestion):
    pattern = suggestion.split("'")[1]
    out = tmp_path / "fixed.onnx"
    ampconv.convert(src, out, ampconv.Config(keep_fp32=pattern, overwrite=True))
    return ampconv.validate(src, out, ValidateOptions(inputs=(str(calibration),), backend="emulate")).passed


def test_cause_is_the_low_square_not_the_float32_log_where_drift_shows(tmp_path):
    src, calibration, result = _converted_and_located(tmp_path, "pitch_model")
    located = result.localization
    assert not result.passed and located.precision == "HIGH"  # drift becomes visible at the float32 Log
    assert located.cause["node"] == "square" and located.cause["suggestion"] == "--keep-fp32 '^square$'"
    assert _passes_with(tmp_path, src, calibration, located.cause["suggestion"])
    assert result.to_dict()["localization"]["cause"]["node"] == "square"


def test_cause_from_rounded_inputs_brings_its_low_producer_into_the_fix(tmp_path):
    src, calibration, result = _converted_and_located(tmp_path, "cancellation_mlp")
    cause = result.localization.cause
    assert cause["node"] == "offset_sub" and "offset_add" in cause["suggestion"]
    assert _passes_with(tmp_path, src, calibration, cause["suggestion"])


def test_no_cause_when_no_single_node_stands_out():
    from ampconv.numerics.ownerror import OwnError
    from ampconv.validation.localize import name_cause
    import onnx_ir as ir

    graph = ir.Graph([], [], nodes=[], name="g")
    model = ir.Model(graph, ir_version=8)
    small = {"a": OwnError("a", "MatMul", 3e-4, "a_out", 0, 1e-3, 3e-4)}
    assert name_cause(model, small, None, "fp16") is None
    assert name_cause(model, {}, None, "fp16") is None


@pytest.mark.parametrize("dtype, roundoffs", [("fp16", 2.0**-11), ("bf16", 2.0**-8)])
def test_cause_threshold_follows_the_low_type(dtype, roundoffs):
    from ampconv.numerics.ownerror import OwnError
    from ampconv.validation.localize import CAUSE_ROUNDOFFS, name_cause
    import onnx_ir as ir

    node = ir.node("Relu", [ir.Value(name="x")], name="r")
    model = ir.Model(ir.Graph([], [], nodes=[node], name="g"), ir_version=8)
    just_over = OwnError("r", "Relu", 1.1 * CAUSE_ROUNDOFFS * roundoffs, "y", 0, 1.0, 1.0)
    just_under = OwnError("r", "Relu", 0.9 * CAUSE_ROUNDOFFS * roundoffs, "y", 0, 1.0, 1.0)
    assert name_cause(model, {"r": just_over}, None, dtype)["node"] == "r"
    assert name_cause(model, {"r": just_under}, None, dtype) is None


# ---------------------------------------------------------------- an overflow's source, not ordinary rounding
def _overflow_run(tmp_path, *extra):
    """convert --validate --localize on the overflowing MLP (inputs in [0, 50]); returns (exit code, report dict)."""
    import json

    import onnx
    from click.testing import CliRunner

    import validate_models as vm
    from ampconv_cli.main import cli

    src = tmp_path / "mlp.onnx"
    onnx.save(vm.overflowing_mlp(), str(src))
    report = tmp_path / "r.json"
    args = ["convert", str(src), "-o", str(tmp_path / "mlp.fp16.onnx"), "--overwrite", "--validate", "--localize",
            "--shape", "batch:4", "--input-range", "x:0,50", "--report", str(report),
            "--no-synthetic-run", *extra]  # the range is validation's alone: the conversion must overflow
    result = CliRunner().invoke(cli, args)
    return result, json.loads(report.read_text())["validation"]


def test_an_overflow_is_localized_at_its_source_not_at_ordinary_rounding(tmp_path):
    """Layer 0's own fp16 rounding trips an elementwise tolerance (values near 0); layer 1 leaves the range."""
    result, validation = _overflow_run(tmp_path)
    loc = validation["localization"]
    assert loc["node"] == "/layer1/MatMul" and loc["overflow"] is True, loc
    assert "beyond the LOW maximum 65504" in loc["reason"]
    layer0 = dict(loc["node_errors"])["/layer0/MatMul"]
    assert layer0 < 5e-3  # its error is ordinary rounding: never blamed


def test_the_overflow_fix_keeps_the_out_of_range_path_float32_and_is_checked(tmp_path):
    result, validation = _overflow_run(tmp_path)
    cause, fix = validation["localization"]["cause"], validation["localization"]["fix"]
    # Everything that makes or reads the ~1e5 tensor, up to the MatMul that brings it back in range.
    assert cause["nodes"] == ["/layer1/MatMul", "/layer1/Add", "/layer1/Relu", "/layer2/MatMul"]
    assert fix["passes"] is True and "this fix passes" in result.output


def test_following_the_suggestion_converges(tmp_path):
    """Applying the suggested --keep-fp32 passes: no second suggestion names a node the first one did not."""
    first, validation = _overflow_run(tmp_path)
    pattern = validation["localization"]["cause"]["suggestion"].split("'")[1]
    second, after = _overflow_run(tmp_path, "--keep-fp32", pattern)
    assert after["passed"] is True and after.get("localization") is None, second.output
    # Keeping only the overflowing layer (what a person tries first) is not enough: the tensor is cast
    # down in front of /layer2/MatMul; the localization then names that reader, a superset.
    third, partial = _overflow_run(tmp_path, "--keep-fp32", "^/layer1/")
    loc = partial["localization"]
    assert partial["passed"] is False and loc["node"] != "/layer0/MatMul"
    assert "/layer2/MatMul" in loc["cause"]["nodes"]
