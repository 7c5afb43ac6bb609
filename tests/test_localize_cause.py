"""--localize names the LOW node that loses the precision, and its suggestion changes the result."""

import pytest

import ampconv
import data_models
from ampconv.validate import ValidateOptions


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
    from ampconv.data.ownerror import OwnError
    from ampconv.validate.localize import name_cause
    import onnx_ir as ir

    graph = ir.Graph([], [], nodes=[], name="g")
    model = ir.Model(graph, ir_version=8)
    small = {"a": OwnError("a", "MatMul", 3e-4, "a_out", 0, 1e-3, 3e-4)}
    assert name_cause(model, small, None, "fp16") is None
    assert name_cause(model, {}, None, "fp16") is None


@pytest.mark.parametrize("dtype, roundoffs", [("fp16", 2.0**-11), ("bf16", 2.0**-8)])
def test_cause_threshold_follows_the_low_type(dtype, roundoffs):
    from ampconv.data.ownerror import OwnError
    from ampconv.validate.localize import CAUSE_ROUNDOFFS, name_cause
    import onnx_ir as ir

    node = ir.node("Relu", [ir.Value(name="x")], name="r")
    model = ir.Model(ir.Graph([], [], nodes=[node], name="g"), ir_version=8)
    just_over = OwnError("r", "Relu", 1.1 * CAUSE_ROUNDOFFS * roundoffs, "y", 0, 1.0, 1.0)
    just_under = OwnError("r", "Relu", 0.9 * CAUSE_ROUNDOFFS * roundoffs, "y", 0, 1.0, 1.0)
    assert name_cause(model, {"r": just_over}, None, dtype)["node"] == "r"
    assert name_cause(model, {"r": just_under}, None, dtype) is None
