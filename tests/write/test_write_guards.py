"""Every write path of every command: never lose or clobber a file.

Each case snapshots the folder ({relative path: (SHA-256, mode)}, hidden files
included) before the run and compares afterwards: a refused run leaves it
byte-identical, a run that wrote something changed exactly the files it names.
We run as root, so permission bits do not stop writes: an unwritable report
folder is a missing folder or a path under a regular file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import onnx
import pytest
from ampconv_cli.main import cli
from conftest import sha256, tiny_mlp

from ampconv.writing import outputs

from ampconv.pipeline import stages
from ampconv.errors import ModelLoadError


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` (hidden ones too) -> (SHA-256, permission bits)."""
    return {
        str(p.relative_to(folder)): (sha256(p), stat.S_IMODE(p.lstat().st_mode))
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def run(runner, *args):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def refused(result, *fragments: str) -> None:
    """Exit 1 with one ``ampconv: error:`` line containing every fragment."""
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ampconv: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture()
def work(tmp_path) -> Path:
    """A folder with the tiny MLP as ``m.onnx`` and nothing else."""
    folder = tmp_path / "work"
    folder.mkdir()
    onnx.save(tiny_mlp(), str(folder / "m.onnx"))
    return folder


@pytest.fixture()
def external(tmp_path) -> Path:
    """A folder with the tiny MLP whose weights live in ``weights.bin``; returns the model path."""
    folder = tmp_path / "ext"
    folder.mkdir()
    model = tiny_mlp()
    onnx.save(model, str(folder / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    assert (folder / "weights.bin").exists()
    return folder / "m.onnx"


@pytest.fixture()
def umask022():
    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture()
def no_validation(monkeypatch):
    """Fail the test if validation starts (the checks must come first)."""
    import ampconv_cli.validation_options as vo

    def called(*args, **kwargs):
        raise AssertionError("validation ran before the output checks")

    monkeypatch.setattr(vo, "validate", called)


# --- convert --report ------------------------------------------------------------


def test_convert_report_is_the_input(cli_runner, work):
    src = work / "m.onnx"
    before = snapshot(work)
    for extra in ((), ("--overwrite",), ("--dry-run",)):
        result = run(cli_runner, "convert", src, "-o", work / "o.onnx", "--report", src, *extra)
        refused(result, "would overwrite the input model")
        assert snapshot(work) == before


def test_convert_report_is_a_link_to_the_input(cli_runner, work):
    src = work / "m.onnx"
    (work / "sym.json").symlink_to(src)
    os.link(src, work / "hard.json")
    before = snapshot(work)
    for link in ("sym.json", "hard.json"):
        result = run(cli_runner, "convert", src, "-o", work / "o.onnx", "--report", work / link, "--overwrite")
        refused(result, "would overwrite the input model")
        assert snapshot(work) == before


def test_convert_report_is_the_input_data_file(cli_runner, external):
    folder = external.parent
    before = snapshot(folder)
    result = run(cli_runner, "convert", external, "-o", folder / "o.onnx", "--report", folder / "weights.bin",
                 "--overwrite")
    refused(result, "external data file", "weights.bin")
    assert snapshot(folder) == before


def test_convert_report_is_the_output_model(cli_runner, work):
    before = snapshot(work)
    out = work / "o.onnx"
    result = run(cli_runner, "convert", work / "m.onnx", "-o", out, "--report", out)
    refused(result, "also the path of the converted model")
    # the default output name is reserved too
    result = run(cli_runner, "convert", work / "m.onnx", "--report", work / "m.fp16.onnx")
    refused(result, "also the path of the converted model")
    assert snapshot(work) == before


def test_convert_report_is_the_output_data_file(cli_runner, work):
    before = snapshot(work)
    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--report", work / "o.onnx.data")
    refused(result, "data file")
    assert snapshot(work) == before


def test_convert_report_existing_file_needs_overwrite(cli_runner, work, umask022):
    notes = work / "notes.txt"
    notes.write_text("my notes\n")
    notes.chmod(0o640)
    before = snapshot(work)
    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--report", notes)
    refused(result, "already exists", "--overwrite")
    assert snapshot(work) == before  # refused before converting: no model either

    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--report", notes, "--overwrite")
    assert result.exit_code == 0, result.stderr
    after = snapshot(work)
    assert set(after) == set(before) | {"o.onnx"}
    assert after["notes.txt"][1] == 0o640  # a replaced file keeps its mode
    assert after["o.onnx"][1] == 0o644  # a new file gets open()'s mode under the umask
    data = json.loads(notes.read_text())
    assert data[outputs.REPORT_MARKER] == outputs.REPORT_FORMAT and data["nodes"]
    assert outputs.is_report(notes)


def test_convert_existing_report_needs_overwrite_too(cli_runner, work):
    report = work / "r.json"
    args = ["convert", work / "m.onnx", "-o", work / "o.onnx", "--report", report]
    assert run(cli_runner, *args).exit_code == 0
    before = snapshot(work)
    refused(run(cli_runner, *args, "--dry-run"), "already exists")
    assert snapshot(work) == before


def test_convert_report_folder_missing_or_a_file(cli_runner, work):
    (work / "afile").write_text("x")
    before = snapshot(work)
    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--report", work / "no" / "r.json")
    refused(result, "cannot write the report", "does not exist")
    assert snapshot(work) == before  # checked before the model was written
    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--report", work / "afile" / "r.json")
    refused(result, "cannot write the report", "not a folder")
    assert snapshot(work) == before


def test_convert_new_files_mode_and_replaced_model_keeps_mode(cli_runner, external, umask022):
    folder = external.parent
    out = folder / "o.onnx"
    report = folder / "r.json"
    assert run(cli_runner, "convert", external, "-o", out, "--report", report).exit_code == 0
    modes = {name: mode for name, (_, mode) in snapshot(folder).items()}
    assert modes["o.onnx"] == modes["o.onnx.data"] == modes["r.json"] == 0o644
    out.chmod(0o600)
    (folder / "o.onnx.data").chmod(0o640)
    report.chmod(0o600)
    assert run(cli_runner, "convert", external, "-o", out, "--report", report, "--overwrite").exit_code == 0
    modes = {name: mode for name, (_, mode) in snapshot(folder).items()}
    assert (modes["o.onnx"], modes["o.onnx.data"], modes["r.json"]) == (0o600, 0o640, 0o600)
    assert not [name for name in modes if "ampconv-tmp" in name]


def test_report_write_failure_after_the_model_names_the_model(cli_runner, work, monkeypatch):
    def full(path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs, "_create_beside", full)
    before = snapshot(work)
    out = work / "o.onnx"
    result = run(cli_runner, "convert", work / "m.onnx", "-o", out, "--report", work / "r.json", "-q")
    refused(result, "cannot write the report", "No space left", f"the converted model was written to {out}")
    assert set(snapshot(work)) == set(before) | {"o.onnx"}


def test_interrupt_before_publishing_writes_nothing(cli_runner, work, monkeypatch):
    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(stages, "write_model", interrupt)
    before = snapshot(work)
    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--report", work / "r.json")
    assert result.exit_code == 130
    assert result.stderr.strip() == "ampconv: interrupted; nothing was written"
    assert snapshot(work) == before


# --- convert --validate -----------------------------------------------------------


def test_interrupt_during_validation_names_what_was_written(cli_runner, work, monkeypatch):
    import ampconv_cli.validation_options as vo

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(vo, "validate", interrupt)
    before = snapshot(work)
    out, report = work / "o.onnx", work / "r.json"
    result = run(cli_runner, "convert", work / "m.onnx", "-o", out, "--report", report, "--validate", "-q")
    assert result.exit_code == 130
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("ampconv: interrupted during validation; ")
    assert f"the converted model was written to {out}" in line
    assert f"the report was written to {report}" in line
    assert "nothing was written" not in result.stderr
    after = snapshot(work)
    assert set(after) == set(before) | {"o.onnx", "r.json"}  # exactly what the message names
    assert not json.loads(report.read_text()).get("validation")  # the conversion report, no result


def test_validation_error_after_the_model_names_the_model(cli_runner, work, monkeypatch):
    import ampconv_cli.validation_options as vo

    def broken(*args, **kwargs):
        raise ModelLoadError("o.onnx: runner exploded")

    monkeypatch.setattr(vo, "validate", broken)
    out = work / "o.onnx"
    result = run(cli_runner, "convert", work / "m.onnx", "-o", out, "--validate", "-q")
    refused(result, "runner exploded", "during validation", f"the converted model was written to {out}")


def test_convert_validate_report_is_a_sample(cli_runner, work, tmp_path):
    import numpy as np

    npz = work / "in.npz"
    np.savez(npz, x=np.ones((2, 4), np.float32))
    before = snapshot(work)
    result = run(cli_runner, "convert", work / "m.onnx", "-o", work / "o.onnx", "--validate", "--inputs", npz,
                 "--report", npz, "--overwrite")
    refused(result, "would overwrite the input sample")
    assert snapshot(work) == before


# --- validate --report -------------------------------------------------------------


@pytest.fixture()
def pair(cli_runner, work):
    """``m.onnx`` and its conversion ``c.onnx`` in ``work``."""
    assert run(cli_runner, "convert", work / "m.onnx", "-o", work / "c.onnx", "-q").exit_code == 0
    return work / "m.onnx", work / "c.onnx"


def test_validate_report_is_the_reference_or_converted(cli_runner, work, pair, no_validation):
    ref, conv = pair
    before = snapshot(work)
    refused(run(cli_runner, "validate", ref, conv, "--report", ref), "would overwrite the reference model")
    refused(run(cli_runner, "validate", ref, conv, "--report", conv, "--overwrite"),
            "would overwrite the converted model")
    assert snapshot(work) == before


def test_validate_report_is_a_data_file(cli_runner, external, no_validation):
    folder = external.parent
    before = snapshot(folder)
    result = run(cli_runner, "validate", external, external, "--report", folder / "weights.bin", "--overwrite")
    refused(result, "external data file of the reference model")
    assert snapshot(folder) == before


def test_validate_report_non_report_file_needs_overwrite(cli_runner, work, pair, no_validation):
    ref, conv = pair
    for name, text in (("notes.txt", "my notes\n"), ("other.json", '{"name": "not ours"}\n'), ("list.json", "[1]")):
        target = work / name
        target.write_text(text)
        before = snapshot(work)
        refused(run(cli_runner, "validate", ref, conv, "--report", target), "not an ampconv JSON report",
                "--overwrite")
        assert snapshot(work) == before


def test_validate_report_overwrite_replaces_keeping_mode(cli_runner, work, pair):
    ref, conv = pair
    notes = work / "notes.txt"
    notes.write_text("my notes\n")
    notes.chmod(0o604)
    before = snapshot(work)
    result = run(cli_runner, "validate", ref, conv, "--report", notes, "--overwrite", "-q")
    assert result.exit_code == 0, result.stderr
    after = snapshot(work)
    assert set(after) == set(before) and after["notes.txt"][1] == 0o604
    assert set(json.loads(notes.read_text())) == {"validation"}


def test_validate_merges_into_a_convert_report_keeping_mode(cli_runner, work, umask022):
    report = work / "r.json"
    conv = work / "c.onnx"
    assert run(cli_runner, "convert", work / "m.onnx", "-o", conv, "--report", report, "-q").exit_code == 0
    report.chmod(0o640)
    before = snapshot(work)
    result = run(cli_runner, "validate", work / "m.onnx", conv, "--report", report, "-q")
    assert result.exit_code == 0, result.stderr
    after = snapshot(work)
    assert set(after) == set(before) and after["r.json"][1] == 0o640
    data = json.loads(report.read_text())
    assert data["nodes"] and data["validation"]["passed"] is True
    # a new report file: open()'s mode under the umask
    fresh = work / "fresh.json"
    assert run(cli_runner, "validate", work / "m.onnx", conv, "--report", fresh, "-q").exit_code == 0
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_validate_report_folder_missing_or_a_file(cli_runner, work, pair, no_validation):
    ref, conv = pair
    (work / "afile").write_text("x")
    before = snapshot(work)
    refused(run(cli_runner, "validate", ref, conv, "--report", work / "no" / "r.json"),
            "cannot write the report", "does not exist")
    refused(run(cli_runner, "validate", ref, conv, "--report", work / "afile" / "r.json"),
            "cannot write the report", "not a folder")
    assert snapshot(work) == before


def test_validate_interrupt_writes_nothing(cli_runner, work, pair, monkeypatch):
    import ampconv_cli.validation_options as vo

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(vo, "validate", interrupt)
    ref, conv = pair
    before = snapshot(work)
    result = run(cli_runner, "validate", ref, conv, "--report", work / "r.json")
    assert result.exit_code == 130 and "nothing was written" in result.stderr
    assert snapshot(work) == before


# --- the library pieces ---------------------------------------------------------------


def test_is_report(tmp_path):
    cases = {
        "marker.json": {outputs.REPORT_MARKER: 1},
        "validation.json": {"validation": {}},
        "legacy.json": {"source": "m", "output": "o", "dtype": "fp16", "level": "O2", "nodes": []},
    }
    for name, data in cases.items():
        (tmp_path / name).write_text(json.dumps(data))
        assert outputs.is_report(tmp_path / name), name
    for name, text in {"other.json": '{"a": 1}', "list.json": "[]", "bad.json": "{", "bin": "\x00"}.items():
        (tmp_path / name).write_text(text)
        assert not outputs.is_report(tmp_path / name), name
    assert not outputs.is_report(tmp_path / "missing.json")


def test_write_json_atomic_failure_leaves_the_old_file(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text("old")

    class Boom(Exception):
        pass

    def explode(*args, **kwargs):
        raise Boom

    monkeypatch.setattr(outputs.json, "dump", explode)
    with pytest.raises(Boom):
        outputs.write_json_atomic(target, {"a": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"] and target.read_text() == "old"


def test_run_record_describes_a_model_with_its_data_file(tmp_path):
    with outputs.recording() as record:
        outputs.record_written("its data file", tmp_path / "o.onnx.data", part_of=tmp_path / "o.onnx")
        assert record.describe() == f"its data file was written to {tmp_path / 'o.onnx.data'}"
        outputs.record_written("the converted model", tmp_path / "o.onnx")
        outputs.record_written("the report", tmp_path / "r.json")
    assert record.describe() == (
        f"the converted model was written to {tmp_path / 'o.onnx'} (with its data file {tmp_path / 'o.onnx.data'}); "
        f"the report was written to {tmp_path / 'r.json'}"
    )
    outputs.record_written("ignored outside recording", tmp_path / "x")  # no record: nothing happens


def test_convert_existing_output_data_file_needs_overwrite(cli_runner, external, umask022):
    folder = external.parent
    stray = folder / "o.onnx.data"
    stray.write_text("someone else's data")
    stray.chmod(0o600)
    before = snapshot(folder)
    refused(run(cli_runner, "convert", external, "-o", folder / "o.onnx"), "o.onnx.data already exists", "--overwrite")
    assert snapshot(folder) == before
    assert run(cli_runner, "convert", external, "-o", folder / "o.onnx", "--overwrite", "-q").exit_code == 0
    assert stat.S_IMODE(stray.stat().st_mode) == 0o600 and stray.read_text() != "someone else's data"


def test_convert_validate_output_is_a_sample(cli_runner, work):
    import numpy as np

    npz = work / "in.npz"
    np.savez(npz, x=np.ones((2, 4), np.float32))
    before = snapshot(work)
    result = run(cli_runner, "convert", work / "m.onnx", "-o", npz, "--validate", "--inputs", npz, "--overwrite")
    refused(result, "would overwrite the input sample")
    assert snapshot(work) == before


def test_an_interrupt_after_the_command_returned_names_what_it_wrote(cli_runner, work, monkeypatch):
    """click turns a Ctrl-C after the command body into Abort; the line still names the written model."""
    import ampconv_cli.convert as convert_cli

    real = convert_cli.command.callback

    def then_interrupt(*args, **kwargs):
        real(*args, **kwargs)
        raise KeyboardInterrupt  # after handle_errors returned: click reports Abort

    monkeypatch.setattr(convert_cli.command, "callback", then_interrupt)
    out = work / "o.onnx"
    result = run(cli_runner, "convert", work / "m.onnx", "-o", out, "-q")
    assert result.exit_code == 130 and out.exists()
    assert result.stderr.strip().splitlines()[-1] == f"ampconv: interrupted; the converted model was written to {out}"


def test_ctrl_c_is_ignored_once_the_command_is_over(tmp_path):
    """A late Ctrl-C (while the interpreter frees a large model at exit) killed a finished run with 130 and no word.

    The console script ignores SIGINT once the command returned; a process that signals itself then exits 0.
    """
    import subprocess
    import sys

    script = (
        "import os, signal, sys\n"
        "from ampconv_cli.main import main\n"
        "sys.argv = ['ampconv', '--version']\n"
        "try:\n    main()\n"
        "except SystemExit as done:\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    raise\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ampconv, version") and "KeyboardInterrupt" not in done.stderr
