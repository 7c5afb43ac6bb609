"""``ampconv validate`` end to end through click: exit codes, formats, --report."""

import json

import numpy as np
import pytest
import validate_models as vm
from ampconv_cli.validate import command
from click.testing import CliRunner


@pytest.fixture()
def runner():
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates stderr
        return CliRunner()


@pytest.fixture()
def overflow(tmp_path):
    ref, conv = vm.overflow_pair(tmp_path)
    _, fixed = vm.overflow_pair(tmp_path, scale_low=False)
    npz = tmp_path / "in.npz"
    np.savez(npz, **vm.overflow_inputs())
    return ref, conv, fixed, str(npz)


def test_exit_0_within_tolerance(runner, overflow):
    ref, _, fixed, npz = overflow
    result = runner.invoke(command, [ref, fixed, "--inputs", npz])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("PASS: 1/1 outputs")
    assert "emulate (fp16 rounding, CPUExecutionProvider)" in result.stdout


def test_exit_3_over_tolerance_with_localization(runner, overflow):
    ref, conv, _, npz = overflow
    result = runner.invoke(command, [ref, conv, "--inputs", npz, "--localize"])
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith("FAIL: 0/1 outputs")
    assert "drift starts at node 'scale_up' (Mul)" in result.stdout
    assert "No tolerance would pass" in result.stdout


def test_loose_tolerance_prints_what_would_pass(runner, tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    result = runner.invoke(command, [ref, conv, "--shape", "batch:4", "--rtol", "0", "--atol", "1e-7"])
    assert result.exit_code == 3
    assert "Would pass with atol >= " in result.stdout
    assert "random" in result.stdout  # random inputs are flagged


def test_exit_2_bad_usage(runner, overflow, tmp_path):
    ref, conv, _, _ = overflow
    # A named dimension left unset is 1 with a note, not a usage error (issue 22 item 6).
    unset_dim = runner.invoke(command, [ref, conv])
    assert unset_dim.exit_code == 0, unset_dim.output
    assert "dimension 'batch' (input x) is not set: random data uses size 1 there" in unset_dim.stdout
    bad_syntax = runner.invoke(command, [ref, conv, "--shape", "x=1x4"])
    assert bad_syntax.exit_code == 2 and "bad shape" in bad_syntax.stderr
    bad_npz = runner.invoke(command, [ref, conv, "--inputs", str(tmp_path / "none.npz")])
    assert bad_npz.exit_code == 2 and "none.npz: no such inputs file" in bad_npz.stderr
    bad_backend = runner.invoke(command, [ref, conv, "--backend", "tpu"])
    assert bad_backend.exit_code == 2


def test_exit_1_could_not_run(runner, overflow, tmp_path):
    ref, _, _, npz = overflow
    missing = runner.invoke(command, [ref, str(tmp_path / "missing.onnx"), "--inputs", npz])
    assert missing.exit_code == 1
    assert missing.stderr.strip() == f"ampconv: error: {tmp_path / 'missing.onnx'}: no such model file"
    # A model onnxruntime cannot load (unknown op) is "could not run", not usage.
    import onnx

    proto = onnx.load(ref)
    proto.graph.node[0].op_type = "NoSuchOp"
    broken = tmp_path / "broken.onnx"
    onnx.save(proto, str(broken))
    result = runner.invoke(command, [ref, str(broken), "--inputs", npz])
    assert result.exit_code == 1
    # Refused when loaded, as convert refuses it: both tools' words, the file named.
    assert result.stderr.startswith(f"ampconv: error: {broken}: the input model is invalid")
    assert "No Op registered for NoSuchOp" in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_format_json(runner, overflow):
    ref, conv, _, npz = overflow
    result = runner.invoke(command, [ref, conv, "--inputs", npz, "--format", "json", "--localize"])
    assert result.exit_code == 3
    data = json.loads(result.stdout)
    assert data["passed"] is False and data["backend"] == "emulate" and data["dtype"] == "fp16"
    assert data["outputs"][0]["worst"]["new_nonfinite"] == 8
    assert data["localization"]["node"] == "scale_up"
    assert data["random_inputs"] is False and data["rtol"] == 0.01


def test_format_markdown(runner, overflow):
    ref, _, fixed, npz = overflow
    result = runner.invoke(command, [ref, fixed, "--inputs", npz, "--format", "markdown"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "### :white_check_mark: ampconv validation: PASS"
    assert any(line.startswith("| output | status | max abs") for line in lines)
    assert any(line.startswith("| y | ok |") for line in lines)


def test_report_merge_into_existing_json(runner, overflow, tmp_path):
    ref, conv, _, npz = overflow
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"model": "x", "validation": {"old": True}}))
    result = runner.invoke(command, [ref, conv, "--inputs", npz, "--report", str(report)])
    assert result.exit_code == 3
    data = json.loads(report.read_text())
    assert data["model"] == "x"
    assert data["validation"]["passed"] is False and "old" not in data["validation"]
    assert list(tmp_path.glob(".ampconv-report-*")) == []  # no temp file left behind


def test_report_created_or_replacing_non_json_only_with_overwrite(runner, overflow, tmp_path):
    ref, _, fixed, npz = overflow
    fresh = tmp_path / "fresh.json"
    assert runner.invoke(command, [ref, fixed, "--inputs", npz, "--report", str(fresh)]).exit_code == 0
    assert set(json.loads(fresh.read_text())) == {"validation"}
    junk = tmp_path / "junk.json"
    junk.write_text("not json [")
    refused = runner.invoke(command, [ref, fixed, "--inputs", npz, "--report", str(junk)])
    assert refused.exit_code == 1 and "--overwrite" in refused.stderr  # not a report: kept
    assert junk.read_text() == "not json ["
    assert runner.invoke(command, [ref, fixed, "--inputs", npz, "--report", str(junk), "--overwrite"]).exit_code == 0
    assert json.loads(junk.read_text())["validation"]["passed"] is True


def test_report_in_missing_folder_is_exit_1(runner, overflow, tmp_path):
    ref, _, fixed, npz = overflow
    result = runner.invoke(command, [ref, fixed, "--inputs", npz, "--report", str(tmp_path / "no" / "r.json")])
    assert result.exit_code == 1 and "cannot write the report" in result.stderr


def test_random_samples_and_seed_options(runner, tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    result = runner.invoke(command, [ref, conv, "--shape", "x:3x8", "--samples", "3", "--seed", "5", "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["samples"] == 3 and data["random_inputs"] is True
    assert data["input_sources"][0] == "random sample 0 (seed 5)"


def test_convert_validate_fail_on_drift_and_report(runner, overflow, tmp_path):
    # The same option group and run_and_render behind `convert --validate`.
    from ampconv_cli.main import cli

    ref, _, _, npz = overflow
    out = tmp_path / "o3.onnx"
    report = tmp_path / "conv.json"
    args = ["convert", ref, "-o", str(out), "--level", "O3", "--validate", "--inputs", npz,
            "--localize", "--report", str(report), "-q"]
    result = runner.invoke(cli, [*args, "--fail-on-drift"])
    assert result.exit_code == 3, result.output
    assert "drift starts at node 'scale_up' (Mul)" in result.stdout
    assert "level-O3" in result.stdout  # the converter's own decision explains the node
    data = json.loads(report.read_text())
    assert data["validation"]["passed"] is False
    assert len(data) > 1  # the conversion report's own keys survive the merge
    warned = runner.invoke(cli, [*args, "--overwrite"])
    assert warned.exit_code == 0 and "drifts beyond tolerance" in warned.stderr


def test_installed_console_script_smoke(overflow):
    import pathlib
    import subprocess
    import sys

    script = pathlib.Path(sys.executable).with_name("ampconv")
    if not script.exists():
        pytest.skip("the ampconv console script is not installed in this environment")
    ref, _, fixed, npz = overflow
    done = subprocess.run([str(script), "validate", ref, fixed, "--inputs", npz, "--format", "json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["passed"] is True
