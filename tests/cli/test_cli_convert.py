"""End-to-end CLI tests for `ampconv convert` and `ampconv policy show`: options and exit codes."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

from ampconv_cli.main import cli
from helpers import elem_types, model_from_text, save

# The middle op is one the default preset keeps black on every model (Cos; Softmax is guarded, not black).
TEXT = '<ir_version: 8, opset_import: ["" : 17]>' + """
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
    mm = MatMul (x, w)
    s = Cos (mm)
    y = Relu (s)
}
""" % ", ".join(str(0.125 * k - 0.75) for k in range(16))


@pytest.fixture
def model(tmp_path):
    return save(model_from_text(TEXT), tmp_path / "m.onnx")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_default_output_name_and_summary(model):
    result = invoke("convert", model)
    assert result.exit_code == 0, result.output
    out = model.with_name("m.fp16.onnx")
    assert out.exists()
    assert "nodes:" in result.stderr and "MatMul" in result.stderr and "casts:" in result.stderr
    assert elem_types(onnx.load(str(out)))["w"] == onnx.TensorProto.FLOAT16


def test_existing_output_needs_overwrite(model):
    assert invoke("convert", model).exit_code == 0
    again = invoke("convert", model)
    assert again.exit_code == 1 and "--overwrite" in again.stderr
    assert invoke("convert", model, "--overwrite").exit_code == 0


def test_output_equal_to_input_refused_and_input_untouched(model):
    before = digest(model)
    result = invoke("convert", model, "-o", model, "--overwrite")
    assert result.exit_code == 1 and "input" in result.stderr
    assert digest(model) == before


@pytest.mark.parametrize("level", ["O0", "O1", "O2", "O3"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_levels_and_dtypes(model, tmp_path, level, dtype):
    out = tmp_path / f"o.{level}.{dtype}.onnx"
    result = invoke("convert", model, "--level", level, "--dtype", dtype, "-o", out)
    assert result.exit_code == 0, result.stderr
    onnx.checker.check_model(str(out), full_check=True)


def test_auto_level_on_cpu_target_is_o0_with_reason(model, tmp_path):
    result = invoke("convert", model, "--level", "auto", "--target", "cpu", "-o", tmp_path / "a.onnx")
    assert result.exit_code == 0 and "O0" in result.stderr and "CPU" in result.stderr
    result = invoke("convert", model, "--level", "auto", "--target", "cuda", "-o", tmp_path / "b.onnx")
    assert result.exit_code == 0 and "auto->O2" in result.stderr


def test_unknown_level_is_usage_error(model):
    result = invoke("convert", model, "--level", "O9")
    assert result.exit_code == 2


def test_report_json_lists_every_node_and_initializer(model, tmp_path):
    report = tmp_path / "r.json"
    result = invoke("convert", model, "--report", report, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 0
    data = json.loads(report.read_text())
    assert {n["op_type"] for n in data["nodes"]} == {"MatMul", "Cos", "Relu"}
    assert all(n["rule"] and n["reason"] for n in data["nodes"])
    relu = [n for n in data["nodes"] if n["op_type"] == "Relu"][0]
    assert relu["follows"]  # gray nodes name the node they followed
    assert data["initializers"][0]["name"] == "w" and data["initializers"][0]["fate"] == "LOW"
    assert data["summary"]["by_op_type"]["MatMul"] == {"LOW": 1, "HIGH": 0}


def test_dry_run_prints_plan_and_writes_nothing(model, tmp_path):
    result = invoke("convert", model, "--dry-run", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 0
    assert "plan:" in result.stdout and "Cos" in result.stdout and "black list" in result.stdout
    assert not (tmp_path / "o.onnx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_mixlist_option_changes_decisions(model, tmp_path):
    mix = tmp_path / "mix.json"
    mix.write_text(json.dumps({"black-list": {"to-remove": ["Cos"]}, "white-list": {"to-add": ["Cos"]}}))
    report = tmp_path / "r.json"
    assert invoke("convert", model, "--mixlist", mix, "--report", report, "-o", tmp_path / "o.onnx").exit_code == 0
    soft = [n for n in json.loads(report.read_text())["nodes"] if n["op_type"] == "Cos"][0]
    assert soft["precision"] == "LOW"


def test_bad_mixlist_is_exit_2_one_line_nothing_written(model, tmp_path):
    mix = tmp_path / "mix.json"
    mix.write_text('{"black-list": {"to-add": ["Add"]}, "white-list": {"to-add": ["Add"]}}')
    result = invoke("convert", model, "--mixlist", mix, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and str(mix) in result.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_keep_io_options(model, tmp_path):
    out = tmp_path / "o.onnx"
    assert invoke("convert", model, "--level", "O3", "--no-keep-io-types", "-o", out).exit_code == 0
    types = elem_types(onnx.load(str(out)))
    assert types["x"] == onnx.TensorProto.FLOAT16 and types["y"] == onnx.TensorProto.FLOAT16
    assert invoke("convert", model, "--level", "O3", "--keep-io-types=y", "-o", out, "--overwrite").exit_code == 0
    types = elem_types(onnx.load(str(out)))
    assert types["x"] == onnx.TensorProto.FLOAT16 and types["y"] == onnx.TensorProto.FLOAT
    bad = invoke("convert", model, "--keep-io-types=nope", "-o", out, "--overwrite")
    assert bad.exit_code == 2 and "nope" in bad.stderr


def test_keep_fp32_force_low_block_op_and_clamp_flags(model, tmp_path):
    report = tmp_path / "r.json"
    args = ["convert", model, "-o", tmp_path / "o.onnx", "--report", report, "--overwrite"]
    assert invoke(*args, "--keep-fp32", "MatMul").exit_code == 0
    rules = {n["op_type"]: n["rule"] for n in json.loads(report.read_text())["nodes"]}
    assert rules["MatMul"] == "user-keep-fp32"
    assert invoke(*args, "--level", "O3", "--block-op", "Relu").exit_code == 0
    rules = {n["op_type"]: n["rule"] for n in json.loads(report.read_text())["nodes"]}
    assert rules["Relu"] == "user-block-op"
    assert invoke(*args, "--force-low", "Cos").exit_code == 0
    rules = {n["op_type"]: n["rule"] for n in json.loads(report.read_text())["nodes"]}
    assert rules["Cos"] == "user-force-low"
    assert invoke(*args, "--keep-fp32", "(").exit_code == 2  # bad regex: usage error
    assert invoke(*args, "--clamp").exit_code == 0


def test_reconverting_output_is_a_noop_with_same_bytes(model, tmp_path):
    first = tmp_path / "a.onnx"
    second = tmp_path / "b.onnx"
    assert invoke("convert", model, "-o", first).exit_code == 0
    result = invoke("convert", first, "-o", second)
    assert result.exit_code == 0 and "nothing to convert" in result.stderr
    assert digest(first) == digest(second)


def test_deterministic_bytes(model, tmp_path):
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    invoke("convert", model, "-o", a, "--level", "O3")
    invoke("convert", model, "-o", b, "--level", "O3")
    assert digest(a) == digest(b)


def test_quiet_prints_nothing(model, tmp_path):
    result = invoke("convert", model, "-q", "-o", tmp_path / "o.onnx")
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == ""


def test_convert_validate_and_fail_on_drift(model, tmp_path):
    out = tmp_path / "o.onnx"
    result = invoke("convert", model, "-o", out, "--validate")
    assert result.exit_code == 0, result.output
    # An impossible tolerance makes the same model "drift": exit 3, model still written.
    result = invoke("convert", model, "-o", out, "--overwrite", "--validate", "--fail-on-drift",
                    "--rtol", "0", "--atol", "0")
    assert result.exit_code == 3 and out.exists()
    assert invoke("convert", model, "--fail-on-drift").exit_code == 2


def test_policy_show_text_and_json(tmp_path):
    result = invoke("policy", "show", "--level", "O1")
    assert result.exit_code == 0 and "WHITE" in result.stdout and "MatMul" in result.stdout
    result = invoke("policy", "show", "--preset", "mindspore", "--format", "json")
    data = json.loads(result.stdout)
    assert "Relu" in data["white-list"]["to-add"] and data["black-list"]["to-add"] == [
        "BatchNormalization", "LayerNormalization"]
    # The JSON is itself a valid mixlist for the default preset? It adds to lists; apply it.
    path = tmp_path / "lists.json"
    path.write_text(result.stdout)
    assert invoke("policy", "show", "--mixlist", path).exit_code == 0


def test_installed_console_script_smoke(model, tmp_path):
    exe = Path(sys.executable).with_name("ampconv")
    assert exe.exists(), "ampconv console script is installed in the venv"
    out = tmp_path / "o.onnx"
    proc = subprocess.run([str(exe), "convert", str(model), "-o", str(out)], capture_output=True, text=True,
                          env={**os.environ}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.exists()
    proc = subprocess.run([str(exe), "convert", str(tmp_path / "missing.onnx")], capture_output=True, text=True)
    assert proc.returncode == 1 and proc.stderr.startswith("ampconv: error:") and proc.stderr.count("\n") == 1
