"""Bad input, end to end through the CLI: exit code, one-line message, nothing written.

Every test snapshots the folder (names and SHA-256 of every file) before the
run and checks afterwards that the inputs are byte-identical and that no file
(output, data file, temporary folder) was left behind, unless the case is one
that must convert.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from ampconv_cli.main import cli
from conftest import make_model, sha256, tiny_mlp
from onnx import TensorProto, helper, numpy_helper


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones too) -> its SHA-256."""
    return {str(p.relative_to(folder)): sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def convert(runner, *args):
    return runner.invoke(cli, ["convert", *map(str, args)], catch_exceptions=False)


def assert_one_line_error(result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ampconv: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "Traceback" not in result.stderr


@pytest.fixture()
def work(tmp_path):
    folder = tmp_path / "work"
    folder.mkdir()
    return folder


def _run_bad_model(cli_runner, work, name: str, data: bytes, code: int, *fragments: str):
    src = work / name
    src.write_bytes(data)
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", work / "out.onnx")
    assert_one_line_error(result, code, *fragments)
    assert snapshot(work) == before  # input byte-identical, nothing new


# ----------------------------------------------------------------- input files
def test_missing_file(cli_runner, work):
    before = snapshot(work)
    result = convert(cli_runner, work / "nope.onnx", "-o", work / "out.onnx")
    assert_one_line_error(result, 1, "nope.onnx", "no such file")
    assert snapshot(work) == before


def test_directory(cli_runner, work):
    (work / "adir").mkdir()
    before = snapshot(work)
    result = convert(cli_runner, work / "adir", "-o", work / "out.onnx")
    assert_one_line_error(result, 1, "is a directory")
    assert snapshot(work) == before


def test_empty_file(cli_runner, work):
    _run_bad_model(cli_runner, work, "empty.onnx", b"", 1, "empty")


def test_truncated_model(cli_runner, work):
    data = tiny_mlp().SerializeToString()
    _run_bad_model(cli_runner, work, "truncated.onnx", data[: len(data) // 2], 1, "truncated.onnx")


def test_corrupted_model(cli_runner, work):
    data = bytearray(tiny_mlp().SerializeToString())
    # Overwrite the middle (graph structure and weights) with 0xFF: no longer valid protobuf.
    mid = len(data) // 3
    data[mid : mid + 40] = b"\xff" * 40
    _run_bad_model(cli_runner, work, "corrupt.onnx", bytes(data), 1, "corrupt.onnx")


@pytest.mark.parametrize(
    "payload",
    [b"hello, this is not a model\n" * 10, b"\x89PNG\r\n\x1a\n" + bytes(range(256)), b"{\"json\": true}"],
    ids=["text", "png", "json"],
)
def test_not_onnx(cli_runner, work, payload):
    _run_bad_model(cli_runner, work, "notonnx.onnx", payload, 1, "notonnx.onnx")


def test_model_failing_checker(cli_runner, work):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["undefined_tensor"], ["y"], name="relu")],
        "bad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    _run_bad_model(cli_runner, work, "bad.onnx", make_model(graph).SerializeToString(), 1, "onnx.checker")


def test_opset_newer_than_installed_onnx(cli_runner, work):
    newer = onnx.defs.onnx_opset_version() + 5
    model = tiny_mlp()
    model.opset_import[0].version = newer
    _run_bad_model(cli_runner, work, "newer.onnx", model.SerializeToString(), 1, f"opset {newer}", "upgrade onnx")


def test_unknown_op_domain_converts_keeping_op_float32(cli_runner, work):
    """Not an error: the unknown op stays float32, the rest converts, exit 0."""
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "W")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("MyOp", ["h"], ["c"], name="custom", domain="com.example"),
            helper.make_node("MatMul", ["c", "W"], ["y"], name="mm2"),
        ],
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [w],
    )
    graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [2, 4]))
    src = work / "custom.onnx"
    onnx.save(make_model(graph, extra_opsets=[("com.example", 1)]), str(src))
    before = sha256(src)
    report = work / "report.json"
    # onnxruntime cannot load a model with an op it has no kernel for, in the input or the output.
    result = convert(cli_runner, src, "-o", work / "out.onnx", "--report", report, "--no-runtime-check")
    assert result.exit_code == 0, result.stderr
    assert sha256(src) == before
    nodes = {n["name"]: n for n in json.loads(report.read_text())["nodes"]}
    assert nodes["custom"]["precision"] == "HIGH"
    assert nodes["custom"]["rule"] == "hard-no-schema"
    assert nodes["mm"]["precision"] == nodes["mm2"]["precision"] == "LOW"
    out = onnx.load(str(work / "out.onnx"))
    onnx.checker.check_model(out, full_check=False)
    custom = next(n for n in out.graph.node if n.op_type == "MyOp")
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(out.graph.value_info) + list(out.graph.output)}
    for name in list(custom.input) + list(custom.output):
        if name in types:
            assert types[name] == TensorProto.FLOAT, name


# ------------------------------------------------------------------- mixlists
@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{not json", "not valid JSON"),
        ('{"grey-list": {"to-add": ["Add"]}}', "unknown key 'grey-list'"),
        ('{"black-list": {"to-append": ["Add"]}}', "unknown key 'to-append'"),
        ('{"black-list": {"to-add": "Add"}}', "must be a list of op type names"),
        ('{"black-list": {"to-add": [1, 2]}}', "must be a list of op type names"),
        ('{"black-list": ["Add"]}', "must be an object"),
        ('["Add"]', "top level must be an object"),
        ('{"black-list": {"to-add": ["Add"]}, "white-list": {"to-add": ["Add"]}}', "in both"),
        ('{"white-list": {"to-remove": ["Softmax"]}}', "is not in the white-list"),
        ('{"black-list": {"to-add": ["Mul"], "to-remove": ["Mul"]}}', "in both"),
    ],
    ids=[
        "not-json", "unknown-list-key", "unknown-action-key", "string-not-list", "ints-not-names",
        "list-not-object", "top-level-array", "two-to-add-lists", "remove-not-in-list", "add-and-remove",
    ],
)
def test_bad_mixlist(cli_runner, work, mlp_path, text, fragment):
    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    mix = work / "mix.json"
    mix.write_text(text)
    before = snapshot(work)
    result = convert(cli_runner, src, "--mixlist", mix, "-o", work / "out.onnx")
    assert_one_line_error(result, 2, "mix.json", fragment)
    assert snapshot(work) == before


def test_unknown_level(cli_runner, work, mlp_path):
    """click validates --level: exit 2 and one ``ampconv: error:`` line naming the option and the value."""
    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    before = snapshot(work)
    result = convert(cli_runner, src, "--level", "O7", "-o", work / "out.onnx")
    assert_one_line_error(result, 2, "--level", "'O7' is not one of")
    assert "Traceback" not in result.stderr
    assert snapshot(work) == before


def test_unknown_level_library():
    import ampconv

    with pytest.raises(ampconv.UsageError, match="unknown level 'O7'"):
        ampconv.Config(level="O7")


# -------------------------------------------------------------------- outputs
def test_output_equal_to_input(cli_runner, work, mlp_path):
    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    before = snapshot(work)
    for target in (src, work / "." / "mlp.onnx"):
        result = convert(cli_runner, src, "-o", target, "--overwrite")
        assert_one_line_error(result, 1, "is the input model")
    assert snapshot(work) == before


def test_output_folder_missing(cli_runner, work, mlp_path):
    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", work / "no" / "such" / "out.onnx")
    assert_one_line_error(result, 1, "does not exist")
    assert snapshot(work) == before


def test_output_parent_is_a_file(cli_runner, work, mlp_path):
    """Covers "cannot create a file there" without needing a non-root user."""
    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    (work / "afile").write_text("x")
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", work / "afile" / "out.onnx")
    assert_one_line_error(result, 1, "not a folder")
    assert snapshot(work) == before


def test_output_folder_not_writable(cli_runner, work, mlp_path, monkeypatch):
    """Root ignores permission bits, so os.access is monkeypatched to report the folder read-only.

    This covers the pre-write check (outputs.check_output_path); the staging-folder
    creation failure behind it is covered by tests/write/test_output_paths.py (``/proc``).
    """
    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    out_dir = work / "ro"
    out_dir.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if Path(p) == out_dir else real_access(p, mode, *a, **k))
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", out_dir / "out.onnx")
    assert_one_line_error(result, 1, "not writable")
    assert snapshot(work) == before


def test_output_mkdtemp_refused(cli_runner, work, mlp_path, monkeypatch):
    """The folder passes the checks but creating the staging folder fails (EACCES)."""
    import tempfile

    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", work / "out.onnx")
    assert_one_line_error(result, 1, "cannot write in")
    assert snapshot(work) == before


def test_disk_full_during_write(cli_runner, work, mlp_path, monkeypatch):
    """ENOSPC raised by the writer after it started writing: message, nothing left behind."""
    from ampconv.writing import writer

    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    real_save = writer._save_model

    def full_disk(model, path, *args, **kwargs):
        Path(path).write_bytes(b"partial")  # something was written before the disk filled
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "_save_model", full_disk)
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", work / "out.onnx")
    assert_one_line_error(result, 1, "disk full")
    assert snapshot(work) == before
    monkeypatch.setattr(writer, "_save_model", real_save)


def test_interrupted_mid_write(cli_runner, work, mlp_path, monkeypatch):
    """Ctrl-C while writing: exit 130, one line, no stray temporary files."""
    from ampconv.writing import writer

    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())

    def interrupted(model, path, *args, **kwargs):
        Path(path).write_bytes(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(writer, "_save_model", interrupted)
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", work / "out.onnx")
    assert result.exit_code == 130
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "interrupted" in lines[0], result.stderr
    assert snapshot(work) == before


def test_existing_output_kept_on_failure(cli_runner, work, mlp_path, monkeypatch):
    """With --overwrite, a failed write leaves the old output byte-identical."""
    from ampconv.writing import writer

    src = work / "mlp.onnx"
    src.write_bytes(mlp_path.read_bytes())
    old = work / "out.onnx"
    old.write_bytes(b"previous output")

    def full_disk(model, path, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "_save_model", full_disk)
    before = snapshot(work)
    result = convert(cli_runner, src, "-o", old, "--overwrite")
    assert_one_line_error(result, 1, "disk full")
    assert snapshot(work) == before


def test_console_script_missing_file(tmp_path):
    """One real subprocess through the installed console script."""
    exe = Path(sys.executable).parent / "ampconv"
    if not exe.exists():
        pytest.skip("console script not installed in this environment")
    proc = subprocess.run(
        [str(exe), "convert", str(tmp_path / "missing.onnx")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "no such file" in proc.stderr
    assert list(tmp_path.iterdir()) == []
