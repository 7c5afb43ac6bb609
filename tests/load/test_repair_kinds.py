"""Every model onnxruntime accepts converts: the issue's two models, and each repair kind in and out of subgraphs.

A repaired input's output passes the full onnx.checker (except the one field
no declaration can satisfy: the shape of an output whose rank varies), loads
in onnxruntime, and stays accurate; no value is left half-typed in any graph.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ampconv
from accept_models import REPAIR_KINDS, computed_size_classifier, if_untyped_subgraph, repairable
from ampconv.errors import ModelLoadError
from ampconv.runtime.loadcheck import checker_error

CONVERSIONS = {
    "O2": {"level": "O2"},
    "O3": {"level": "O3"},
    "bf16": {"dtype": "bf16"},
    "no-keep-io-types": {"keep_io_types": False},
}


def _run(path, feeds):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {name: _as_input(feeds[name], session, name) for name in names})


def _as_input(array, session, name):
    kind = next(i.type for i in session.get_inputs() if i.name == name)
    return array.astype(np.float16) if kind == "tensor(float16)" else array


def _half_typed(model: onnx.ModelProto):
    """value_info entries (any graph) whose type is present but carries no element type."""
    found = []

    def visit(graph):
        for info in list(graph.input) + list(graph.output) + list(graph.value_info):
            if info.HasField("type") and info.type.WhichOneof("value") is None:
                found.append(info.name)
            elif info.type.HasField("tensor_type") and not info.type.tensor_type.elem_type:
                found.append(info.name)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)

    visit(model.graph)
    return found


def _convert_and_check(tmp_path, model, feeds, conversion, *, full_check=True):
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])  # the premise: onnxruntime loads it
    dst = tmp_path / f"out.{conversion}.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True, **CONVERSIONS[conversion]))
    assert report.output == str(dst)
    written = onnx.load(str(dst))
    assert _half_typed(written) == []
    if full_check:
        onnx.checker.check_model(str(dst), full_check=True)
    if conversion != "bf16":  # the CPU provider has no bfloat16 kernels: emulated validation below
        for got, ref in zip(_run(dst, feeds), _run(src, feeds)):
            assert got.shape == ref.shape
            np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-2, atol=2e-2)
    return src, dst, report


@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
@pytest.mark.parametrize("opset", [11, 13])
def test_computed_size_resize_classifier_converts(tmp_path, opset, conversion):
    model, feeds = computed_size_classifier(opset)
    src, dst, report = _convert_and_check(tmp_path, model, feeds, conversion)
    assert report.load_check["probe_nodes"] is not None  # the probe was used, with the real shape computation
    np.savez(tmp_path / "feeds.npz", **feeds)
    result = ampconv.validate(src, dst, ampconv.ValidateOptions(backend="emulate", inputs=(str(tmp_path / "feeds.npz"),)))
    assert result.passed, [o.to_dict() for o in result.outputs]


@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
def test_if_with_untyped_subgraph_value_info_converts(tmp_path, conversion):
    model, feeds = if_untyped_subgraph()
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    _, _, report = _convert_and_check(tmp_path, model, feeds, conversion)
    assert any("graph output y has no type: taken from type inference" in n for n in report.notes), report.notes


@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
def test_if_whose_branches_differ_in_rank_converts_with_its_output_rank_left_open(tmp_path, conversion):
    model, feeds = if_untyped_subgraph(rank_varies=True)
    src, dst, report = _convert_and_check(tmp_path, model, feeds, conversion, full_check=False)
    assert any("graph output y has no fixed rank" in n for n in report.notes), report.notes
    written = onnx.load(str(dst))
    assert not written.graph.output[0].type.tensor_type.HasField("shape")  # no rank is true for both branches
    # Everything but that one field passes the full checker.
    assert checker_error(dst, full=True, rankless=("y",)) is None
    for sign in (1.0, -1.0):  # both branches, both ranks
        flipped = {"x": np.abs(feeds["x"]) * sign}
        if conversion != "bf16":
            for got, ref in zip(_run(dst, flipped), _run(src, flipped)):
                assert got.shape == ref.shape
                np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


def test_a_rankless_checker_copy_leaves_nothing_behind(tmp_path):
    model, _ = if_untyped_subgraph(rank_varies=True)
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    dst = tmp_path / "out.onnx"
    ampconv.convert(src, dst, ampconv.Config())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "out.onnx"]
    assert checker_error(dst, full=True) is not None  # without the rankless name the checker refuses it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.onnx", "out.onnx"]


# onnxruntime refuses an IR 3 initializer that only a branch reads ("Graph ctor should have created NodeArg
# for initializer"), and so does the checker: the converter refuses it, naming both tools.
REFUSED_BY_RUNTIME = {("ir3-initializer", True)}
# onnxruntime refuses a main-graph value_info with a shape and no element type ("Invalid tensor data type 0");
# the checker does not look at value_info, so the input is read as valid and the conversion types the value.
TYPED_BY_CONVERSION = {("shape-without-type", False)}


@pytest.mark.parametrize("in_subgraph", [False, True], ids=["main", "subgraph"])
@pytest.mark.parametrize("kind", REPAIR_KINDS)
def test_each_repair_kind_gives_a_checker_valid_output(tmp_path, kind, in_subgraph):
    model, feeds = repairable(kind, in_subgraph)
    if (kind, in_subgraph) in REFUSED_BY_RUNTIME:
        src = tmp_path / "in.onnx"
        onnx.save(model, str(src))
        with pytest.raises(ModelLoadError, match="the input model is invalid: onnx.checker: .*; onnxruntime: "):
            ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
        assert not (tmp_path / "out.onnx").exists()
        return
    if (kind, in_subgraph) in TYPED_BY_CONVERSION:
        src = tmp_path / "in.onnx"
        onnx.save(model, str(src))
        with pytest.raises(Exception, match="Invalid tensor data type 0"):
            _run(src, feeds)
        ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
        onnx.checker.check_model(str(tmp_path / "out.onnx"), full_check=True)
        assert _half_typed(onnx.load(str(tmp_path / "out.onnx"))) == []
        assert _run(tmp_path / "out.onnx", feeds)[0].shape == (2, 3)
        return
    src, dst, report = _convert_and_check(tmp_path, model, feeds, "O2")
    if checker_error(src, full=False) is not None:
        assert any("loads in onnxruntime: converted a repaired copy" in n for n in report.notes), report.notes


def test_a_repair_notes_each_fix(tmp_path):
    model, _ = repairable("shape-without-type", in_subgraph=True)
    model.graph.output[0].ClearField("type")
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert any("graph output y has no type: taken from type inference" in n for n in report.notes)
    onnx.checker.check_model(str(tmp_path / "out.onnx"), full_check=True)


def test_valid_input_is_not_repaired(tmp_path):
    model, _ = repairable("no-shape", in_subgraph=False)
    model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 2
    model.graph.output[0].type.tensor_type.shape.dim.add().dim_value = 3
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    onnx.checker.check_model(str(src), full_check=True)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert not any("repaired" in n or "no fixed rank" in n for n in report.notes)
