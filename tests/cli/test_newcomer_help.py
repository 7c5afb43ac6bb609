"""Issue 31, item 6: ``--help`` by topic with examples that run as written; ``python -m ampconv``."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import numpy as np
import onnx
import pytest

from ampconv_cli import convert, validate
from ampconv_cli.main import cli
from conftest import tiny_mlp


def _help(cli_runner, command: str) -> str:
    result = cli_runner.invoke(cli, [command, "--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def _sections(text: str) -> dict:
    """Section title -> the flags listed under it (``--level``, ``-o`` ...)."""
    sections, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":") and not line.startswith("Usage"):
            current = sections.setdefault(line[:-1], [])
        elif current is not None and re.match(r"  -", line):
            current.extend(re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line.split("  ")[1]))
    return sections


def _flags(groups) -> set:
    """Every flag the option groups declare (their click options' spellings)."""
    flags = set()
    for group in groups:
        probe = group(lambda: None)
        for param in probe.__click_params__:
            flags.update(param.opts + param.secondary_opts)
    return flags


@pytest.mark.parametrize("module", [convert, validate])
def test_help_lists_each_option_group_under_its_topic(cli_runner, module):
    command = module.command.name
    sections = _sections(_help(cli_runner, command))
    topics = module.command.topics
    assert [title for title, _ in topics] == [s for s in sections if s != "Examples"]
    groups_of = dict(module.HELP_TOPICS) if hasattr(module, "HELP_TOPICS") else None
    for title, _ in topics:
        listed = set(sections[title]) - {"-h", "--help"}
        if groups_of is not None:
            assert listed == _flags(groups_of[title]), title
    # Every option is listed once, under one topic.
    every = [flag for title in sections for flag in sections[title]]
    assert len(every) == len(set(every))
    declared = {opt for p in module.command.params for opt in p.opts + p.secondary_opts if opt.startswith("-")}
    assert declared <= set(every)


def test_convert_help_has_the_issue_topics_and_examples(cli_runner):
    text = _help(cli_runner, "convert")
    titles = list(_sections(text))
    assert titles == ["Policy: which ops run LOW", "Constants out of the LOW range", "Calibration and tune",
                      "Output and checks", "Validation (with --validate)", "Display", "Examples"]
    # --level shows its values as written (not click's lowercase) beside its default.
    assert re.search(r"--level O0\|O1\|O2\|O3\|auto\s", text) and "[default: O2]" in text
    assert "INTEGER RANGE" not in text and "FLOAT RANGE" not in text


def _example_folder(tmp_path):
    """What the examples name: model.onnx (its batch dimension named ``batch``), samples/, mix.json."""
    model = tiny_mlp()
    for value in (model.graph.input[0], model.graph.output[0]):
        dim = value.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_param = "batch"
    onnx.save(model, str(tmp_path / "model.onnx"))
    (tmp_path / "samples").mkdir()
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
    np.savez(tmp_path / "samples" / "s0.npz", x=x)
    (tmp_path / "mix.json").write_text('{"black-list": {"to-add": ["Relu"]}}')


def test_the_help_examples_run_as_written(tmp_path, cli_runner, monkeypatch):
    _example_folder(tmp_path)
    monkeypatch.chdir(tmp_path)
    for module in (convert, validate):  # convert first: validate's examples read its output
        for line, _ in module.EXAMPLES:
            for command in line.split("&&"):
                words = shlex.split(command)
                assert words[0] == "ampconv"
                result = cli_runner.invoke(cli, words[1:])
                assert result.exit_code == 0, (command, result.output)
    assert (tmp_path / "r.html").exists() and (tmp_path / "model.fp16.onnx").exists()


def test_python_dash_m_ampconv_runs_the_cli(tmp_path):
    ran = subprocess.run([sys.executable, "-m", "ampconv", "--version"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert ran.returncode == 0 and ran.stdout.startswith("ampconv, version"), ran.stderr
    onnx.save(tiny_mlp(), str(tmp_path / "m.onnx"))
    ran = subprocess.run([sys.executable, "-m", "ampconv", "convert", "m.onnx", "-q"], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "m.fp16.onnx").exists()


def test_the_top_level_help_says_where_to_start(cli_runner):
    result = cli_runner.invoke(cli, ["--help"])
    assert result.exit_code == 0
    assert "ampconv convert model.onnx" in result.output and "by topic" in result.output
