"""The README's "Your own measure of success" example runs as written (issue 39): the metric module it writes,
each command, the lines it shows and the exit codes it states, on the samples ``make samples`` builds."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from ampconv_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]


def _example() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("$ cd sample_models/out\n$ cat > task.py")
    return text[start:text.index("```", start)]


def _steps(example: str):
    """(the module's text, [(command words, the lines shown after it)])."""
    module = re.search(r"cat > task.py <<'EOF'\n(.*?)\nEOF\n", example, flags=re.S).group(1)
    after = example.split("\nEOF\n", 1)[1]
    steps = []
    for chunk in after.split("$ ")[1:]:
        command, *shown = chunk.rstrip("\n").split("\n")
        steps.append((shlex.split(command), shown))
    return module + "\n", steps


@pytest.fixture()
def samples(tmp_path):
    spec = importlib.util.spec_from_file_location("sample_build", ROOT / "sample_models" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    build.build_readme_examples(tmp_path)
    return tmp_path


def test_the_readme_metric_example_runs_as_written(samples, monkeypatch, cli_runner):
    module, steps = _steps(_example())
    assert [words[:2] for words, _ in steps] == [["ampconv", "convert"], ["ampconv", "validate"],
                                                 ["ampconv", "convert"], ["ampconv", "validate"]]
    monkeypatch.chdir(samples)
    (samples / "task.py").write_text(module)
    codes = []
    for words, shown in steps:
        result = cli_runner.invoke(cli, words[1:])
        codes.append(result.exit_code)
        printed = (result.stdout + result.stderr).splitlines()
        for line in shown:
            assert line in printed, (words, line, printed)
    assert codes == [0, 3, 0, 0]  # "The first validate exits 3, the second 0."
