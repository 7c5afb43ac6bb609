"""ampconv.reading.sidecar: a big graph's types and checker verdict come from a child process, equal to in-process ones."""

from __future__ import annotations

import pathlib

import onnx
import pytest
from onnx import TensorProto, helper

ROOT = pathlib.Path(__file__).resolve().parents[2]

from ampconv.reading import sidecar
from ampconv.reading.load import CHECKER_META_KEY, INFERRED_META_KEY, input_checker_error, load_model
from ampconv.reading.repair import accept_input
from helpers import build_tiny_gpt, model_from_text, save

SEQUENCES = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
    s = SequenceConstruct(x, x)
    n = SequenceLength(s)
    t = SequenceAt(s, n)
    y = Relu(t)
}
"""


def _types(model):
    return {v.name: str(v.type) for node in model.graph for v in node.outputs}


def _invalid_for_the_checker(path: pathlib.Path) -> pathlib.Path:
    """An IR-3 model whose initializer is not a graph input: the checker refuses it, onnxruntime loads it."""
    weight = onnx.numpy_helper.from_array(__import__("numpy").ones(2, "float32"), "w")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], initializer=[weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.save(model, str(path))
    return path


@pytest.fixture
def always(monkeypatch):
    """Use the child for every graph, whatever its size (and whatever this machine's core count)."""
    monkeypatch.setattr(sidecar, "MIN_NODES", 0)
    monkeypatch.setattr(sidecar, "worth_it", lambda proto, subgraphs: not subgraphs)


def test_child_types_equal_in_process_types(tmp_path, always, monkeypatch):
    paths = [build_tiny_gpt(tmp_path), save(model_from_text(SEQUENCES), tmp_path / "seq.onnx")]
    for path in paths:
        from_child = load_model(path, infer_types=True)
        assert CHECKER_META_KEY in from_child.meta and from_child.meta[INFERRED_META_KEY]
        with monkeypatch.context() as patch:
            patch.setattr(sidecar, "worth_it", lambda proto, subgraphs: False)
            here = load_model(path, infer_types=True)
        assert CHECKER_META_KEY not in here.meta
        assert _types(from_child) == _types(here)
    assert "Sequence" in _types(from_child)["s"]  # a TypeProto crossed the pipe, not only element types


def test_child_checker_verdict_is_the_checkers(tmp_path, always):
    good = load_model(build_tiny_gpt(tmp_path), infer_types=True)
    assert input_checker_error(good) == (True, None)
    path = _invalid_for_the_checker(tmp_path / "ir3.onnx")
    bad = load_model(path, infer_types=True)
    known, error = input_checker_error(bad)
    assert known and isinstance(error, onnx.checker.ValidationError)
    assert accept_input(path, bad) == accept_input(path)  # same complaint as the checker run here


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"])
def test_a_failing_child_leaves_the_work_to_this_process(tmp_path, always, monkeypatch, executable):
    monkeypatch.setattr(sidecar.sys, "executable", executable)
    path = build_tiny_gpt(tmp_path)
    model = load_model(path, infer_types=True)
    assert CHECKER_META_KEY not in model.meta  # nothing came back: the checker runs later, here
    assert model.meta[INFERRED_META_KEY] and all(v.type is not None for n in model.graph for v in n.outputs)


def test_worth_it_only_for_big_flat_graphs_and_two_cores(monkeypatch):
    big = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["x"])] * 3, "g", [], []))
    monkeypatch.setattr(sidecar, "MIN_NODES", 3)
    monkeypatch.setattr(sidecar.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert sidecar.worth_it(big, subgraphs=False)
    assert not sidecar.worth_it(big, subgraphs=True)  # read whole from the inferred proto instead
    monkeypatch.setattr(sidecar, "MIN_NODES", 4)
    assert not sidecar.worth_it(big, subgraphs=False)  # too small to hide the child's start-up
    monkeypatch.setattr(sidecar, "MIN_NODES", 3)
    monkeypatch.setattr(sidecar.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert not sidecar.worth_it(big, subgraphs=False)  # one core: nothing runs beside the parent


def test_checker_child_gives_the_checkers_verdict(tmp_path):
    good = build_tiny_gpt(tmp_path)
    checker = sidecar.Checker()
    checker.submit(good)
    assert checker.error() is None
    bad = tmp_path / "bad.onnx"
    graph = helper.make_graph(  # y is declared INT64 but Relu of a float is float: the full check refuses it
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(bad))
    checker = sidecar.Checker()
    checker.submit(bad)
    error = checker.error()
    from ampconv.runtime.loadcheck import checker_error

    here = checker_error(bad, full=True)
    assert type(error) is type(here) and str(error) == str(here)


@pytest.mark.parametrize("executable", ["/nonexistent/python", "/bin/false"])
def test_a_checker_child_that_cannot_answer_says_so(tmp_path, monkeypatch, executable):
    monkeypatch.setattr(sidecar.sys, "executable", executable)
    checker = sidecar.Checker()
    checker.submit(build_tiny_gpt(tmp_path))
    with pytest.raises(sidecar.Checker.Unavailable):
        checker.error()


def test_conversion_with_the_checker_child_equals_one_without(tmp_path, monkeypatch):
    """The written model and the report's verdict do not depend on where the checker ran."""
    import ampconv
    from ampconv.pipeline import stages

    src = build_tiny_gpt(tmp_path, layout="inline")
    monkeypatch.setattr(stages, "big_enough", lambda nodes: True)
    with_child = ampconv.convert(src, tmp_path / "child.onnx", ampconv.Config())
    monkeypatch.setattr(stages, "big_enough", lambda nodes: False)
    without = ampconv.convert(src, tmp_path / "here.onnx", ampconv.Config())
    assert (tmp_path / "child.onnx").read_bytes() == (tmp_path / "here.onnx").read_bytes()
    assert with_child.notes == without.notes and with_child.warnings == without.warnings
