"""ampconv_cli.collection: the collector is restored in-process and left off only when the process ends."""

from __future__ import annotations

import gc

from ampconv_cli import collection


def test_in_process_the_collector_is_restored(monkeypatch):
    monkeypatch.setattr(collection, "_process_ends", False)
    assert gc.isenabled()
    with collection.deferred():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_console_run_leaves_it_off_until_more_work_follows(monkeypatch):
    monkeypatch.setattr(collection, "_process_ends", True)
    try:
        with collection.deferred():
            pass
        assert not gc.isenabled()  # the process exits next: nothing to collect for
        collection.resume()  # --validate follows
        assert gc.isenabled()
    finally:
        gc.enable()


def test_a_collector_that_was_off_stays_off(monkeypatch):
    monkeypatch.setattr(collection, "_process_ends", False)
    gc.disable()
    try:
        with collection.deferred():
            pass
        collection.resume()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_convert_command_restores_the_collector(tmp_path):
    from click.testing import CliRunner
    from helpers import model_from_text, save

    from ampconv_cli.main import cli

    src = save(model_from_text("""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 4] x) => (float[2, 4] y) { h = Relu(x) y = Sigmoid(h) }
    """), tmp_path / "m.onnx")
    result = CliRunner().invoke(cli, ["convert", str(src), "-q"])
    assert result.exit_code == 0, result.output
    assert gc.isenabled()


def test_the_console_script_leaves_at_once_with_its_exit_code_and_every_byte_written(tmp_path):
    """``main`` ends the process without the interpreter's tear-down: codes, output and files stay whole."""
    import json
    import subprocess
    import sys

    from helpers import model_from_text, save

    src = save(model_from_text("""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 4] x) => (float[2, 4] y) { h = Relu(x) y = Sigmoid(h) }
    """), tmp_path / "m.onnx")
    script = "import sys; from ampconv_cli.main import main; sys.argv[0] = 'ampconv'; main()"

    def run(*args):
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True)

    done = run("convert", str(src), "-o", str(tmp_path / "o.onnx"), "--report", str(tmp_path / "r.json"))
    assert done.returncode == 0, done.stderr
    assert "converted" in done.stdout + done.stderr and (tmp_path / "o.onnx").stat().st_size > 0
    assert json.loads((tmp_path / "r.json").read_text())["output"] == str(tmp_path / "o.onnx")
    missing = run("convert", str(tmp_path / "missing.onnx"))
    assert missing.returncode == 1 and "no such file" in missing.stderr
    usage = run("convert", str(src), "--level", "O9")
    assert usage.returncode == 2 and "O9" in usage.stderr
    assert run("--version").stdout.startswith("ampconv, version")


def test_leave_turns_a_message_into_status_1(capsys, monkeypatch):
    from ampconv_cli import main as cli_main

    codes = []
    monkeypatch.setattr(cli_main.os, "_exit", codes.append)
    cli_main._leave("something went wrong")
    cli_main._leave(None)
    cli_main._leave(3)
    assert codes == [1, 0, 3] and "something went wrong" in capsys.readouterr().err
