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
