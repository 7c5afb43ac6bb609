"""Issue 31, items 1-2: every command the README shows runs as written, and prints what the README says it prints.

The README's examples run from a clone's root after ``make samples``; here a
temporary "clone" holds what that target builds (``sample_models/build.py``:
the samples and the models, calibration folders and inputs the examples
name) and ``model.onnx`` (the transformer sample: the README's stand-in for
the reader's model). Each code block runs in a fresh copy of it, through
bash, with the ``ampconv`` console script of this environment on ``PATH``.

- A transcript block (lines starting ``$ ``): each command runs in order, every
  block in one folder in the README's order;
  the lines after it are output it must print (each line, with ``...``
  standing for elided text, must appear in one line of stdout or stderr).
  ``$ cat FILE`` shows a file the reader writes: the test writes it.
- A block of bare ``ampconv ...`` lines: each must exit 0.
- The first-model walk-through runs as one script, ``source .venv/bin/activate``
  included, and must leave a converted, validated model and its page.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
# Languages whose blocks are not shell commands run here (the Python API has tests/cli/test_readme_api.py).
_NOT_SHELL = ("python", "json", "yaml", "make")


def code_blocks() -> list:
    """(language, lines) of every fenced block of the README, in order."""
    return [(lang, body.splitlines()) for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(),
                                                                      flags=re.S | re.M)]


def _builder():
    spec = importlib.util.spec_from_file_location("ampconv_sample_build", ROOT / "sample_models" / "build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """What a clone holds after ``make samples``, plus ``model.onnx``."""
    if not (BIN / "ampconv").exists():
        pytest.skip("the ampconv console script is not installed beside this interpreter")
    root = tmp_path_factory.mktemp("clone")
    samples = root / "sample_models"
    samples.mkdir()
    for path in (ROOT / "sample_models").glob("*.json"):
        shutil.copy(path, samples / path.name)
    build = _builder()
    out = samples / "out"
    build.build_all(out)
    build.build_readme_examples(out)
    shutil.copy(out / "transformer.onnx", root / "model.onnx")
    return root


def _fresh(clone, tmp_path) -> Path:
    folder = tmp_path / "clone"
    shutil.copytree(clone, folder, symlinks=True)
    return folder


def _bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _shown_in(expected: str, printed: list) -> bool:
    """Whether one printed line holds ``expected``'s pieces in order (``...`` and ``(...)`` elide text)."""
    pieces = [p.strip() for p in re.split(r"\(\.\.\.\)|\.\.\.", expected) if p.strip()]
    for line in printed:
        at = 0
        for piece in pieces:
            at = line.find(piece, at)
            if at < 0:
                break
            at += len(piece)
        else:
            return True
    return False


def transcripts() -> list:
    """Every README block written as a shell transcript (``$ `` lines), as (commands with their output) lists."""
    found = []
    for lang, lines in code_blocks():
        if lang in _NOT_SHELL or not any(line.startswith("$ ") for line in lines):
            continue
        steps = []
        for line in lines:
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
        found.append(steps)
    return found


def command_blocks() -> list:
    """Every README block of bare ``ampconv ...`` command lines (no transcript, not the walk-through)."""
    found = []
    for lang, lines in code_blocks():
        commands = [line for line in lines if line.startswith("ampconv ")]
        if lang in _NOT_SHELL or any(line.startswith(("$ ", "source ")) for line in lines) or not commands:
            continue
        found.append(commands)
    return found


def test_the_readme_shows_commands_to_run():
    assert len(transcripts()) >= 5 and len(command_blocks()) >= 2
    text = "\n".join(line for steps in transcripts() for command, _ in steps for line in [command])
    for model in ("constants.onnx", "audio.onnx", "cancel.onnx", "conv.onnx"):  # built by make samples
        assert f"sample_models/out/{model}" in text


def test_the_readme_transcripts_run_as_written_one_after_another(clone, tmp_path):
    """In one folder, in the README's order, as a reader trying each would (a later block may use an earlier file)."""
    folder = _fresh(clone, tmp_path)
    for steps in transcripts():
        for command, shown in steps:
            if command.startswith("cat "):  # a file the reader writes: the lines below are its content
                (folder / command.split()[1]).write_text("\n".join(shown) + "\n")
                continue
            ran = _bash(command, folder)
            assert ran.returncode == 0, (command, ran.stdout, ran.stderr)
            printed = (ran.stdout + ran.stderr).splitlines()
            for line in shown:
                if line.strip() not in ("", "..."):
                    assert _shown_in(line, printed), (command, line, ran.stdout + ran.stderr)


@pytest.mark.parametrize("index", range(len(command_blocks())))
def test_each_readme_command_block_runs(clone, tmp_path, index):
    folder = _fresh(clone, tmp_path)
    for command in command_blocks()[index]:
        ran = _bash(command, folder)
        assert ran.returncode == 0, (command, ran.stdout, ran.stderr)


def walkthrough() -> list:
    """The README's "first model in five lines" block."""
    section = README.read_text().split("## Your first model in five lines", 1)[1]
    return re.search(r"```sh\n(.*?)```", section, flags=re.S).group(1).splitlines()


def test_the_first_model_walkthrough_runs_as_written_twice_in_a_row(clone, tmp_path):
    """Issue 40: a reader runs it again (after a typo, or to see it once more) in the same folder."""
    lines = walkthrough()
    assert len(lines) == 5 and lines[0] == "source .venv/bin/activate"
    folder = _fresh(clone, tmp_path)
    # What make demo leaves: a .venv whose activate script puts ampconv on PATH (here, this environment's).
    (folder / ".venv" / "bin").mkdir(parents=True)
    (folder / ".venv" / "bin" / "activate").write_text(f'export PATH="{BIN}:$PATH"\n')
    env_path = "/usr/bin:/bin"  # ampconv is not on PATH until the first line runs
    for attempt in ("first", "second"):
        ran = subprocess.run(["bash", "-e", "-c", "\n".join(lines)], cwd=folder, capture_output=True, text=True,
                             timeout=300, env={**os.environ, "PATH": env_path})
        assert ran.returncode == 0, (attempt, ran.stdout, ran.stderr)
        report = json.loads((folder / "cnn.json").read_text())
        assert report["validation"]["passed"] is True and report["summary"]["nodes_low"] > 0, attempt
        assert (folder / "cnn.fp16.onnx").exists()
        page = (folder / "cnn.html").read_text()
        assert "PASS" in page
        assert "Policy: which ops run LOW" in ran.stdout  # the last line: the help, by topic


def test_the_readme_says_how_long_make_test_takes():
    setup = README.read_text().split("## Your first model", 1)[0]
    assert re.search(r"`make test` takes about \d+(-\d+)? minutes", setup), setup


def test_the_readme_says_where_the_command_lives():
    first_screen = README.read_text().split("## Your first model", 1)[0]
    assert "source .venv/bin/activate" in first_screen and ".venv/bin/ampconv" in first_screen
    assert "make demo" in first_screen and "not on PyPI" in first_screen
    # make demo ends by saying it too.
    demo = (ROOT / "Makefile").read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "source $(VENV)/bin/activate" in demo


def test_the_sample_mixlist_is_not_named_like_an_operator_info_file():
    names = {path.name for path in (ROOT / "sample_models").glob("*.json")}
    assert "ops_info.json" not in names and "mixlist.json" in names
    assert "ops_info.json" not in README.read_text()
