"""Library errors speak of parameters (what a Python caller sets); the CLI says the same with its flags."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import ampconv
from ampconv.errors import Parameter, named
from ampconv_cli.errors import flag_of
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


def test_a_message_without_parameters_reads_the_same_everywhere():
    error = ampconv.ModelLoadError("x.onnx: not an ONNX model")
    assert error.parameters == () and error.render(flag_of) == str(error) == "x.onnx: not an ONNX model"


def test_opset_error_carries_the_parameter_and_its_value():
    error = ampconv.UsageError(f"a: {named('opset', 13)} is below the model's opset 17")
    assert str(error) == "a: opset=13 is below the model's opset 17"
    assert error.parameters == (Parameter("opset", 13),)
    assert error.render(flag_of) == "a: --opset 13 is below the model's opset 17"


def test_shape_errors_name_the_parameter_in_python_and_the_flag_at_the_cli(tmp_path):
    src = save(model_from_text(TEXT), tmp_path / "m.onnx")
    options = ampconv.ValidateOptions(shapes={"bogus": (2,)})
    with pytest.raises(ampconv.UsageError) as caught:
        ampconv.validate(src, src, options)
    assert str(caught.value).startswith("shapes entry bogus: no input or dimension of that name")
    assert caught.value.parameters[0] == Parameter("shapes", entry="bogus", words="shapes entry")
    assert caught.value.render(flag_of).startswith("--shape bogus: no input or dimension of that name")


def test_a_path_replaced_in_a_message_keeps_its_parameters():
    error = ampconv.OutputError(f"/tmp/private/o.onnx: already exists; pass {named('overwrite', True)} to replace it")
    error.replace_text("/tmp/private/o.onnx", "<in-memory model>")
    assert str(error) == "<in-memory model>: already exists; pass overwrite=True to replace it"
    assert error.render(flag_of) == "<in-memory model>: already exists; pass --overwrite to replace it"


def _library_parameters():
    """Every parameter name a library message names with ``named(...)``."""
    found = set()
    for path in Path(ampconv.__file__).parent.rglob("*.py"):
        found |= set(re.findall(r"named\(\s*'(\w+)'", path.read_text(encoding="utf-8")))
        found |= set(re.findall(r'named\(\s*"(\w+)"', path.read_text(encoding="utf-8")))
    return found


def test_every_parameter_a_library_error_names_is_a_flag_of_the_cli():
    from ampconv_cli import convert, validate

    flags = {opt for command in (convert.command, validate.command) for param in command.params for opt in param.opts}
    names = _library_parameters()
    # The messages spell them as literals, except the rtol/atol loop of Config's checks.
    assert {"overwrite", "opset", "shapes", "input_ranges", "tune", "calibration_data", "keep_io_types"} <= names
    assert {flag_of(Parameter(name)) for name in names} - flags == set()
    assert flag_of(Parameter("nonsense_option")) not in flags


def test_a_value_json_cannot_hold_is_carried_as_text():
    import numpy as np

    error = ampconv.UsageError(f"x: {named('opset', np.int64(21))} is odd")
    assert error.parameters == (Parameter("opset", "21"),)
    assert error.render(flag_of) == "x: --opset 21 is odd"


def test_a_value_check_lives_in_the_library_and_the_cli_says_it_with_flags(tmp_path):
    # --clamp-small without --clamp: PlanOptions refuses it; the CLI adds no check of its own.
    src = save(model_from_text(TEXT), tmp_path / "m.onnx")
    with pytest.raises(ampconv.UsageError, match="^clamp_small sets what clamp does"):
        ampconv.Config(clamp_small="flush")
    result = CliRunner().invoke(cli, ["convert", str(src), "--clamp-small", "flush", "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 2 and "--clamp-small sets what --clamp does to tiny values" in result.output
    assert not (tmp_path / "o.onnx").exists()
