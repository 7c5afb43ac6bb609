"""Library errors speak of parameters (what a Python caller sets); the CLI says the same with its flags."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import ampconv
from ampconv_cli.errors import in_flags
from ampconv_cli.main import cli
from helpers import model_from_text, save

TEXT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[4,4] w) => (float[2,4] y) {
  y = MatMul(x, w)
}
"""


def test_library_names_the_parameter_and_the_cli_names_the_flag(tmp_path):
    src = save(model_from_text(TEXT), tmp_path / "m.onnx")
    (tmp_path / "o.onnx").write_bytes(b"mine")
    with pytest.raises(ampconv.OutputError) as caught:
        ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config())
    assert "overwrite=True" in str(caught.value) and "--overwrite" not in str(caught.value)
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 1 and "pass --overwrite to replace it" in result.output
    assert (tmp_path / "o.onnx").read_bytes() == b"mine"


def test_keep_io_types_error_in_both_words(tmp_path):
    src = save(model_from_text(TEXT), tmp_path / "m.onnx")
    with pytest.raises(ampconv.UsageError, match="^keep_io_types names nope"):
        ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(keep_io_types=("nope",)))
    result = CliRunner().invoke(cli, ["convert", str(src), "--keep-io-types", "nope", "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 2 and "--keep-io-types names nope" in result.output


def test_tune_without_data_names_the_parameter():
    with pytest.raises(ampconv.UsageError, match="^tune needs calibration_data$"):
        ampconv.Config(tune=True)


def test_in_flags_leaves_other_words_alone():
    assert in_flags("x.onnx: not an ONNX model") == "x.onnx: not an ONNX model"
    assert in_flags("a: opset=13 is below the model's opset 17") == "a: --opset 13 is below the model's opset 17"


def test_shape_errors_name_the_parameter_in_python_and_the_flag_at_the_cli():
    assert in_flags("shapes entry bogus: no input or dimension of that name") == (
        "--shape bogus: no input or dimension of that name"
    )
