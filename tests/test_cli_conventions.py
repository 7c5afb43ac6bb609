"""CLI conventions: what people type is accepted, and options that would do nothing are errors."""

from __future__ import annotations

import onnx
import pytest
from click.testing import CliRunner

from ampconv_cli.main import cli


@pytest.fixture
def model(tmp_path):
    """The tiny MLP of conftest, saved."""
    from conftest import tiny_mlp

    path = tmp_path / "m.onnx"
    onnx.save(tiny_mlp(), str(path))
    return path


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _elem(path):
    return onnx.load(str(path)).graph.initializer[0].data_type


@pytest.mark.parametrize("level", ["o2", "O2", "o3"])
def test_level_is_case_insensitive(model, tmp_path, level):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--level", level, "-q")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("dtype,elem", [("float16", 10), ("bfloat16", 16), ("FP16", 10), ("bf16", 16)])
def test_dtype_accepts_the_onnx_names(model, tmp_path, dtype, elem):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--dtype", dtype, "-q", "--level", "O3")
    assert result.exit_code == 0, result.output
    assert _elem(tmp_path / "o.onnx") == elem


def test_unknown_dtype_is_a_usage_error(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--dtype", "half")
    assert result.exit_code == 2 and "ampconv: error:" in result.output


def test_keep_io_types_before_the_model_does_not_swallow_it(model, tmp_path):
    result = _run("convert", "--keep-io-types", model, "-o", tmp_path / "o.onnx", "-q")
    assert result.exit_code == 0, result.output
    graph = onnx.load(str(tmp_path / "o.onnx")).graph
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # kept float32


def test_keep_io_types_with_names_still_takes_names(model, tmp_path):
    result = _run("convert", model, "--keep-io-types", "y", "-o", tmp_path / "o.onnx", "-q")
    assert result.exit_code == 0, result.output
    graph = onnx.load(str(tmp_path / "o.onnx")).graph
    assert graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_missing_model_is_a_usage_error(tmp_path):
    result = _run("convert", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2 and "Missing argument 'MODEL'" in result.output


@pytest.mark.parametrize(
    "extra,message",
    [
        (["-q", "-v"], "contradict"),
        (["--format", "json"], "--format needs --validate"),
        (["--shape", "batch:2"], "--shape needs --validate"),
        (["--rtol", "0.1"], "--rtol needs --validate"),
        (["--localize"], "--localize needs --validate"),
    ],
)
def test_options_that_would_do_nothing_are_errors(model, tmp_path, extra, message):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", *extra)
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "o.onnx").exists()


def test_shape_with_inputs_is_an_error(model, tmp_path):
    import numpy as np

    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.ones((2, 4), np.float32))
    _run("convert", model, "-o", tmp_path / "o.onnx", "-q")
    result = _run("validate", model, tmp_path / "o.onnx", "--inputs", npz, "--shape", "x:2x4")
    assert result.exit_code == 2 and "does nothing" in result.output


def test_defaults_given_explicitly_with_validate_are_fine(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "-q", "--validate", "--format", "json")
    assert result.exit_code in (0, 3), result.output
