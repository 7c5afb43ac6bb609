"""ampconv.writing.outputs for the converted model: output-path checks, staging, publishing, names."""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

from ampconv.errors import OutputError
from ampconv.reading.load import load_model
from ampconv.writing.outputs import check_output_path, data_file_name, default_output_path, publish, staging_dir
from helpers import build_tiny_gpt, tiny_gpt_spec

TINY = tiny_gpt_spec()
_build = build_tiny_gpt


def test_output_equal_to_input_or_its_data(tmp_path):
    src = _build(tmp_path)
    model = load_model(src)
    with pytest.raises(OutputError, match="is the input model"):
        check_output_path(src, src, model, overwrite=True)
    with pytest.raises(OutputError, match="external data file"):
        check_output_path(src, src.parent / "gpt.onnx.data", model, overwrite=True)
    # gpt.onnx.data is what an output named "gpt.onnx" would write: same file as the input's
    twin = tmp_path / "gpt.onnx"
    twin.symlink_to(src)
    with pytest.raises(OutputError, match="is the input model"):
        check_output_path(src, twin, model, overwrite=True)


def test_output_whose_data_file_is_the_input_model(tmp_path):
    src = _build(tmp_path, "inline")
    renamed = src.with_name("o.onnx.data")  # a model file that happens to have this name
    src.rename(renamed)
    model = load_model(renamed)
    with pytest.raises(OutputError, match="would overwrite the input model"):
        check_output_path(renamed, renamed.with_name("o.onnx"), model, overwrite=True)


def test_output_folder_problems(tmp_path, monkeypatch):
    src = _build(tmp_path)
    model = load_model(src)
    with pytest.raises(OutputError, match="does not exist"):
        check_output_path(src, tmp_path / "nope" / "o.onnx", model, overwrite=False)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        check_output_path(src, afile / "o.onnx", model, overwrite=False)
    (tmp_path / "exists.onnx").write_text("x")
    with pytest.raises(OutputError, match="already exists"):
        check_output_path(src, tmp_path / "exists.onnx", model, overwrite=False)
    check_output_path(src, tmp_path / "exists.onnx", model, overwrite=True)
    # Read-only folder: as root chmod does not stop writes, so this checks only
    # that the os.access answer is honoured (simulated).
    monkeypatch.setattr(os, "access", lambda *a, **k: False)
    with pytest.raises(OutputError, match="not writable"):
        check_output_path(src, tmp_path / "o.onnx", model, overwrite=False)


def test_unwritable_folder_real_failure():
    """A folder no one can create files in, root included (/proc): a real write failure."""
    with pytest.raises(OutputError, match="cannot write in /proc"):
        with staging_dir(pathlib.Path("/proc/o.onnx")):
            pass


def test_publish_moves_model_last(tmp_path, monkeypatch):
    staged = tmp_path / "stage"
    staged.mkdir()
    (staged / "o.onnx").write_text("m")
    (staged / "o.onnx.data").write_text("d")
    moves = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (moves.append(pathlib.Path(b).name), real(a, b)))
    publish(staged, tmp_path / "o.onnx")
    assert moves == ["o.onnx.data", "o.onnx"]


def test_default_and_data_names():
    assert default_output_path(pathlib.Path("/m/gpt.onnx"), "fp16") == pathlib.Path("/m/gpt.fp16.onnx")
    assert data_file_name(pathlib.Path("/m/gpt.fp16.onnx")) == "gpt.fp16.onnx.data"


def test_a_small_file_cannot_hold_weights_over_the_inline_limit(tmp_path):
    """The weight walk is skipped only when the file is too small to hold that many inline weight bytes."""
    from ampconv.writing.outputs import _file_may_hold

    path = tmp_path / "m.onnx"
    path.write_bytes(b"x" * 100)
    assert not _file_may_hold(path, 800)  # 100 bytes hold at most 800 counted weight bytes
    assert _file_may_hold(path, 799)
    assert _file_may_hold(tmp_path / "missing.onnx", 10**12)  # unknown: walk the model


def test_a_model_read_without_external_data_answers_no_external_tensors(tmp_path):
    from ampconv.reading.load import EXTERNAL_META_KEY, external_data_files

    inline = load_model(_build(tmp_path, layout="inline"))
    external = load_model(_build(tmp_path))
    assert external.meta[EXTERNAL_META_KEY] is True and external_data_files(external)
    assert inline.meta[EXTERNAL_META_KEY] is False and external_data_files(inline) == []
