"""The default synthetic run executes the user's model in a forked child (ampconv/runtime/isolated.py): a runtime that
dies on random inputs (SIGFPE in a native kernel) costs the run's evidence and says so; the conversion goes on."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import pytest

import ampconv
from ampconv.runtime.isolated import IsolatedFailure, run_isolated

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork (elsewhere: in-process)")


def _add(a, b):
    return a + b


def _fail():
    raise ValueError("the step's own error")


def _die():
    os.kill(os.getpid(), signal.SIGFPE)


def _hang():
    time.sleep(30)


def test_the_isolated_step_answers_raises_and_dies_as_words():
    assert run_isolated(_add, 2, 3) == 5
    with pytest.raises(ValueError, match="the step's own error"):
        run_isolated(_fail)
    with pytest.raises(IsolatedFailure, match="SIGFPE"):
        run_isolated(_die)
    with pytest.raises(IsolatedFailure, match="did not finish in 0.5 s"):
        run_isolated(_hang, timeout=0.5)


def _fuzz_valid():
    path = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_valid.py"
    if "fuzz_valid" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fuzz_valid", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["fuzz_valid"] = module
        spec.loader.exec_module(module)
    return sys.modules["fuzz_valid"]


def test_a_model_that_crashes_onnxruntime_on_random_inputs_still_converts(tmp_path):
    """The fuzz case that killed `ampconv convert` with "Floating point exception": TopK with k = batch / 2, then a
    Resize and a Scan over what is empty at batch 1 (the synthetic run's size for a symbolic axis)."""
    case = _fuzz_valid().make_case(1, 2162)
    src = tmp_path / "model.onnx"
    src.write_bytes(case.model)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(overwrite=True))
    assert any("synthetic float32 run could not run on random inputs (the run died of SIGFPE)" in n
               for n in report.notes), report.notes
    assert (tmp_path / "out.onnx").exists()


def test_validate_on_a_model_that_crashes_onnxruntime_is_a_one_line_error(tmp_path, cli_runner):
    """`ampconv validate` runs the models in a forked child too: the crash is an error line and a non-zero exit."""
    from ampconv_cli.main import cli

    case = _fuzz_valid().make_case(1, 2162)
    src = tmp_path / "model.onnx"
    src.write_bytes(case.model)
    out = tmp_path / "out.onnx"
    ampconv.convert(src, out, ampconv.Config(overwrite=True))
    result = cli_runner.invoke(cli, ["validate", str(src), str(out)])
    assert result.exit_code not in (0, 3), result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [f"ampconv: error: {out}: validation could not run the models (the run died of SIGFPE)"]


class _Finalized:
    """Cyclic garbage whose finalizer says which process ran it (an onnxruntime session's would crash a fork)."""

    ran_in: list = []

    def __init__(self):
        self.me = self

    def __del__(self):
        _Finalized.ran_in.append(os.getpid())


def _collect_and_report():
    import gc

    gc.collect()
    return list(_Finalized.ran_in)


def test_the_child_never_collects_the_garbage_it_inherited():
    import gc

    gc.disable()  # keep the cycle uncollected until the fork
    try:
        _Finalized.ran_in.clear()
        _Finalized()
        assert run_isolated(_collect_and_report) == []  # the child left it alone
    finally:
        gc.enable()
    gc.collect()
    assert _Finalized.ran_in == [os.getpid()]  # the parent collects its own garbage
