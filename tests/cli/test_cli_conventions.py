"""CLI conventions: what people type is accepted, and options that would do nothing are errors."""

from __future__ import annotations

import numpy as np
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
        (["--no-synthetic-run", "--input-range", "x:0,1"], "which --no-synthetic-run turns off"),
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


def test_shape_on_convert_always_sets_the_gpu_figures(model, tmp_path):
    """--shape is never idle on convert: the summary's GPU figures are counted at it (with --inputs too)."""

    import numpy as np

    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.ones((2, 4), np.float32))
    report = tmp_path / "r.json"
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--validate", "--inputs", npz, "--shape", "x:2x4",
                  "--report", report)
    assert result.exit_code == 0, result.output
    assert "GPU figures" in result.output
    plain = _run("convert", model, "-o", tmp_path / "p.onnx", "--shape", "batch:2")
    assert plain.exit_code == 0 and "GPU figures" in plain.output


def test_shape_with_inputs_and_random_calibration_shapes_the_calibration(model, tmp_path):
    import numpy as np

    npz = tmp_path / "x.npz"
    np.savez(npz, x=np.ones((2, 4), np.float32))
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--validate", "--inputs", npz, "--shape", "x:2x4",
                  "--calibration-data", "random", "-q")
    assert result.exit_code == 0, result.output


# --- file modes -------------------------------------------------------------------


@pytest.fixture
def umask_027():
    import os

    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path):
    import os
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_report_has_the_mode_of_the_new_model(model, tmp_path, umask_027):
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    result = _run("convert", model, "-o", out, "--report", report, "-q")
    assert result.exit_code == 0, result.output
    assert _mode(out) == _mode(report) == 0o640


def test_a_new_report_takes_the_mode_the_replaced_model_kept(model, tmp_path, umask_027):
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    out.write_bytes(b"old")
    out.chmod(0o600)
    result = _run("convert", model, "-o", out, "--report", report, "--overwrite", "-q")
    assert result.exit_code == 0, result.output
    assert _mode(out) == _mode(report) == 0o600


def test_a_replaced_report_keeps_its_own_mode(model, tmp_path, umask_027):
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    assert _run("convert", model, "-o", out, "--report", report, "-q").exit_code == 0
    report.chmod(0o604)
    result = _run("convert", model, "-o", out, "--report", report, "--overwrite", "-q")
    assert result.exit_code == 0, result.output
    assert _mode(report) == 0o604 and _mode(out) == 0o640


def test_validate_report_takes_the_converted_models_mode(model, tmp_path, umask_027):
    out, report = tmp_path / "o.onnx", tmp_path / "v.json"
    assert _run("convert", model, "-o", out, "-q").exit_code == 0
    out.chmod(0o600)
    result = _run("validate", model, out, "--report", report)
    assert result.exit_code == 0, result.output
    assert _mode(report) == 0o600


# --- --input-range ------------------------------------------------------------------

RANGED = """
<ir_version: 8, opset_import: ["" : 17]>
ranged (float[1,64] audio, int64[1,64] pixels) => (float[1,64] y, float[1,64] z) {
  y = Mul(audio, audio)
  z = Cast<to = 1>(pixels)
}
"""


@pytest.fixture
def ranged(tmp_path):
    from helpers import model_from_text, save

    return save(model_from_text(RANGED), tmp_path / "ranged.onnx")


def _specs(path):
    import onnx_ir as ir

    from ampconv.numerics import modelio

    return modelio.declared_inputs(ir.load(str(path)))


def test_random_inputs_fall_in_the_given_ranges(ranged):
    from ampconv.validation.inputs import random_samples

    drawn = random_samples(_specs(ranged), {}, 8, 0, ranges={"audio": (-32768, 32767), "pixels": (0, 255)})
    audio = np.concatenate([s["audio"] for s in drawn.samples])
    pixels = np.concatenate([s["pixels"] for s in drawn.samples])
    assert audio.dtype == np.float32 and audio.min() >= -32768 and audio.max() <= 32767
    assert np.abs(audio).max() > 1000  # int16 scale, not N(0, 1)
    assert pixels.dtype == np.int64 and pixels.min() >= 0 and pixels.max() <= 255 and pixels.max() > 200


def test_equal_range_ends_make_a_constant_input(ranged):
    """``sr:16000,16000``: a sample rate or flag input held at one value, float and integer alike."""
    from ampconv.validation.inputs import random_samples
    from ampconv.core.shapespec import parse_input_range

    assert parse_input_range("sr:16000,16000") == ("sr", (16000.0, 16000.0))
    drawn = random_samples(_specs(ranged), {}, 3, 0, ranges={"audio": (16000, 16000), "pixels": (7, 7)})
    for sample in drawn.samples:
        assert np.all(sample["audio"] == 16000) and np.all(sample["pixels"] == 7)


def test_without_a_range_random_inputs_keep_their_defaults(ranged):
    from ampconv.validation.inputs import MAX_RANDOM_INT, random_samples

    drawn = random_samples(_specs(ranged), {}, 4, 0)
    assert np.abs(drawn.samples[0]["audio"]).max() < 10
    assert drawn.samples[0]["pixels"].max() < MAX_RANDOM_INT


def test_an_integer_range_with_no_room_in_the_type_is_refused(ranged):
    from ampconv.errors import UsageError
    from ampconv.validation.inputs import random_samples

    with pytest.raises(UsageError, match="no integer in"):
        random_samples(_specs(ranged), {}, 1, 0, ranges={"pixels": (0.2, 0.8)})


def test_an_unknown_range_name_lists_the_inputs(ranged):
    from ampconv.errors import UsageError
    from ampconv.validation.inputs import random_samples

    with pytest.raises(UsageError, match=r"input_ranges 'audi0': no input of that name \(inputs: audio, pixels\)"):
        random_samples(_specs(ranged), {}, 1, 0, ranges={"audi0": (0, 1)})


def test_library_options_take_ranges_and_shapes_as_dicts():
    from ampconv.config import Config
    from ampconv.errors import UsageError
    from ampconv.validation import ValidateOptions

    options = ValidateOptions(shapes={"batch": 2}, input_ranges={"audio": (-32768, 32767)})
    assert options.shapes == (("batch", (2,)),) and options.input_ranges == (("audio", (-32768.0, 32767.0)),)
    assert ValidateOptions(input_ranges=[("a", (0, 1))]).input_ranges == (("a", (0.0, 1.0)),)
    config = Config(calibration_data="random", shapes={"batch": 2}, input_ranges={"audio": (0, 1)})
    assert config.shapes == (("batch", (2,)),) and config.input_ranges == (("audio", (0.0, 1.0)),)
    assert ValidateOptions(input_ranges={"sr": (16000, 16000)}).input_ranges == (("sr", (16000.0, 16000.0)),)
    for bad in ({"a": (1, 0)}, {"a": (0, float("inf"))}, [("a", 1)]):
        with pytest.raises(UsageError, match="input_ranges"):
            ValidateOptions(input_ranges=bad)
    with pytest.raises(UsageError, match="with inputs it does nothing"):
        ValidateOptions(inputs=("x.npz",), input_ranges={"a": (0, 1)})
    assert Config(input_ranges={"a": (0, 1)}).input_ranges == (("a", (0.0, 1.0)),)  # the synthetic run's range
    with pytest.raises(UsageError, match="synthetic_run=False turns off"):
        Config(input_ranges={"a": (0, 1)}, synthetic_run=False)
    with pytest.raises(UsageError, match="with sample files it does nothing"):
        Config(calibration_data=("x.npz",), input_ranges={"a": (0, 1)})


def test_calibration_samples_use_the_ranges(ranged):
    import onnx_ir as ir

    from ampconv.config import Config
    from ampconv.calibration.samples import calibration_samples

    config = Config(calibration_data="random", calibration_samples=3, input_ranges={"pixels": (100, 200)})
    stream = calibration_samples(ir.load(str(ranged)), config.data_options)
    pixels = np.concatenate([s["pixels"] for _, s in stream])
    assert pixels.min() >= 100 and pixels.max() <= 200


def test_validate_cli_takes_input_ranges(ranged, tmp_path):
    out = tmp_path / "o.onnx"
    assert _run("convert", ranged, "-o", out, "-q").exit_code == 0
    result = _run("validate", ranged, out, "--input-range", "audio:-32768,32767", "--input-range", "pixels:0,255",
                  "--format", "json")
    assert result.exit_code in (0, 3), result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--input-range", "audi0:0,1"], "--input-range audi0: no input of that name (inputs: audio, pixels)"),
        (["--input-range", "audio:1,0"], "LOW must not exceed HIGH"),
        (["--input-range", "audio:0"], "expected NAME:LOW,HIGH"),
        (["--input-range", "audio:0,1", "--input-range", "audio:0,2"], "given twice"),
        (["--input-range", "audio:0,1", "--inputs", "SAMPLE"], "with --inputs it does nothing"),
    ],
)
def test_validate_cli_refuses_bad_input_ranges(ranged, tmp_path, args, message):
    out = tmp_path / "o.onnx"
    assert _run("convert", ranged, "-o", out, "-q").exit_code == 0
    npz = tmp_path / "s.npz"
    np.savez(npz, audio=np.ones((1, 64), np.float32), pixels=np.ones((1, 64), np.int64))
    result = _run("validate", ranged, out, *[npz if a == "SAMPLE" else a for a in args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len([line for line in result.output.splitlines() if "error" in line.lower()]) == 1


def test_convert_takes_input_ranges_for_validation_and_calibration(ranged, tmp_path):
    result = _run("convert", ranged, "-o", tmp_path / "o.onnx", "--validate", "--calibration-data", "random",
                  "--input-range", "pixels:0,255", "-q", "--format", "json")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args,message",
    [
        (["--no-synthetic-run", "--input-range", "pixels:0,255"], "which --no-synthetic-run turns off"),
        (["--validate", "--input-range", "pixel:0,255"], "no input of that name (inputs: audio, pixels)"),
        (["--input-range", "pixel:0,255"], "no input of that name (inputs: audio, pixels)"),
        (["--calibration-data", "SAMPLE", "--validate", "--inputs", "SAMPLE", "--input-range", "pixels:0,255"],
         "with --inputs"),
        (["--calibration-data", "SAMPLE", "--input-range", "pixels:0,255"], "with sample files it does nothing"),
    ],
)
def test_convert_refuses_input_ranges_that_do_nothing_before_any_work(ranged, tmp_path, args, message):
    npz = tmp_path / "s.npz"
    np.savez(npz, audio=np.ones((1, 64), np.float32), pixels=np.ones((1, 64), np.int64))
    result = _run("convert", ranged, "-o", tmp_path / "o.onnx", *[npz if a == "SAMPLE" else a for a in args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "o.onnx").exists()


def test_an_integer_range_beyond_the_gathered_table_is_refused(tmp_path):
    from helpers import build_tiny_gpt

    gpt = build_tiny_gpt(tmp_path)  # vocab 500
    out = tmp_path / "o.onnx"
    assert _run("convert", gpt, "-o", out, "-q").exit_code == 0
    shape = ["--shape", "batch:1", "--shape", "seq:8"]
    inside = _run("validate", gpt, out, *shape, "--input-range", "input_ids:0,499")
    assert inside.exit_code == 0, inside.output
    beyond = _run("validate", gpt, out, *shape, "--input-range", "input_ids:0,600")
    assert beyond.exit_code == 2 and "outside the 500 rows" in beyond.output


@pytest.mark.parametrize("bad", ["names", "second_file", "missing"])
def test_convert_validate_refuses_bad_inputs_before_writing_anything(ranged, tmp_path, bad):
    """An .npz whose names do not match (even the second of a folder) stops convert --validate first."""
    folder = tmp_path / "samples"
    folder.mkdir()
    good = {"audio": np.ones((1, 64), np.float32), "pixels": np.ones((1, 64), np.int64)}
    np.savez(folder / "a.npz", **good)
    np.savez(folder / "b.npz", **({"audio": good["audio"], "pixel": good["pixels"]} if bad == "second_file" else good))
    if bad == "names":
        np.savez(folder / "a.npz", audi0=good["audio"], pixels=good["pixels"])
    inputs = tmp_path / "none" if bad == "missing" else folder
    out, report = tmp_path / "o.onnx", tmp_path / "r.json"
    result = _run("convert", ranged, "-o", out, "--report", report, "--validate", "--inputs", inputs)
    assert result.exit_code == 2, result.output
    expected = {"names": "a.npz: unknown input 'audi0'", "second_file": "b.npz: unknown input 'pixel'",
                "missing": "none: no such inputs file or folder"}[bad]
    assert expected in result.output
    assert not out.exists() and not report.exists()


def test_convert_validate_with_good_inputs_still_runs(ranged, tmp_path):
    """Negative: matching samples pass the early check and validation runs on them."""
    np.savez(tmp_path / "s.npz", audio=np.ones((1, 64), np.float32), pixels=np.ones((1, 64), np.int64))
    out = tmp_path / "o.onnx"
    result = _run("convert", ranged, "-o", out, "--validate", "--inputs", tmp_path / "s.npz")
    assert result.exit_code == 0, result.output
    assert out.exists() and "outputs pass" in result.output
