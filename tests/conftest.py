"""Shared fixtures: a click runner and a tiny valid float32 model."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


# Why a browser test of the report page (tests/report/test_html_report.py) is skipped.
BROWSER_SKIP = "chromium is not installed"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Browser tests that did not run are said in every run's summary, not only under ``-rs``."""
    skipped = [report for report in terminalreporter.stats.get("skipped", [])
               if BROWSER_SKIP in str(getattr(report, "longrepr", ""))]
    if skipped:
        terminalreporter.write_sep(
            "=", f"{len(skipped)} browser test(s) of the report page did not run: {BROWSER_SKIP} "
            "(make test-browser installs it and runs them)", yellow=True, bold=True)


def make_model(graph: onnx.GraphProto, opset: int = 17, ir_version: int = 8, extra_opsets=()) -> onnx.ModelProto:
    """A ModelProto with an explicit IR version (onnxruntime 1.31 rejects IR > 11)."""
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="ampconv-tests")
    model.ir_version = ir_version
    return model


def tiny_mlp() -> onnx.ModelProto:
    """x[2,4] -> MatMul(W) -> Add(b) -> Relu -> y: the smallest model with a LOW node."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal((3,)).astype(np.float32), "b")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("Add", ["h", "b"], ["a"], name="add"),
            helper.make_node("Relu", ["a"], ["y"], name="relu"),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [w, b],
    )
    return make_model(graph)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture()
def cli_runner():
    from click.testing import CliRunner

    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates stderr
        return CliRunner()


@pytest.fixture()
def mlp_path(tmp_path) -> Path:
    path = tmp_path / "mlp.onnx"
    onnx.save(tiny_mlp(), str(path))
    return path
