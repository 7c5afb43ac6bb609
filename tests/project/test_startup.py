"""Start-up stays light: ``ampconv --version``/``--help`` and ``import ampconv`` load no heavy module."""

from __future__ import annotations

import subprocess
import sys

import pytest

# sympy.core: "sympy" itself is a placeholder that ampconv.core.deferred_imports registers.
HEAVY = ("onnxruntime", "sympy.core", "onnx_ir", "onnx", "numpy")


@pytest.mark.parametrize("module", ["ampconv", "ampconv_cli.main"])
def test_import_pulls_in_no_heavy_module(module):
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_subcommand(args):
    code = (
        "import sys\nfrom ampconv_cli.main import cli\n"
        f"try:\n    cli.main({args!r}, standalone_mode=False)\nexcept SystemExit:\n    pass\n"
        f"print('LOADED:' + ' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "version" in result.stdout or "Commands" in result.stdout
    assert result.stdout.strip().splitlines()[-1] == "LOADED:"


def test_lazy_short_help_matches_each_command():
    import importlib

    from ampconv_cli.main import SUBCOMMANDS

    for name, (module, attribute, short) in SUBCOMMANDS.items():
        command = getattr(importlib.import_module(module), attribute)
        assert command.help.strip().splitlines()[0] == short, name


def test_help_lists_every_command():
    from click.testing import CliRunner

    from ampconv_cli.main import cli

    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in ("convert", "validate", "policy"):
        assert name in result.output
