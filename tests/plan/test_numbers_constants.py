"""Constants judged by their effect (issue 29): a value that rounds to 0 keeps its consumer float32 only when
flushing it changes the consumer's output by more than that output's own LOW rounding (``plan.effect``)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import ampconv
import hazard_models as hm
import numbers_models as nm
from bench.figures import deploy_figures
from ampconv.validation.options import ValidateOptions
from helpers import decisions


def _convert(tmp_path, proto, name, **options):
    src = hm.save(proto, tmp_path, name)
    out = tmp_path / f"{name}.fp16.onnx"
    return src, out, ampconv.convert(src, out, ampconv.Config(overwrite=True, **options))


def _float16_tool(src, tmp_path):
    from onnxruntime.transformers.float16 import convert_float_to_float16

    path = tmp_path / "ort.fp16.onnx"
    onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), path)
    return deploy_figures(path)


@pytest.mark.parametrize("name", sorted(nm.CNNS))
def test_cnn_exports_with_folded_beta_zero_and_dead_channels_run_every_heavy_op_low(tmp_path, name):
    src, out, report = _convert(tmp_path, nm.CNNS[name](), name)
    ours, tool = deploy_figures(out), _float16_tool(src, tmp_path)
    assert ours.heavy_low == ours.heavy_nodes == tool.heavy_nodes, ours.heavy_other_names
    assert ours.casts <= tool.casts + 2, (ours.casts, tool.casts)
    rounded = [c for c in report.constants if c["underflow"]]
    assert rounded and all(c["action"].startswith("stored rounded (") for c in rounded)
    assert any("added to" in c["action"] for c in rounded) and any("flushing them" in c["action"] for c in rounded)
    assert ampconv.validate(src, out, ValidateOptions(backend="emulate", samples=2)).passed


def _conv(weight: np.ndarray, bias: np.ndarray, then: str = "Relu") -> onnx.ModelProto:
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[1, 1])]
    if then == "Sqrt":  # the bias keeps an amplifier's input away from 0: an epsilon
        nodes.append(h.make_node("Sqrt", ["c"], ["y"], name="then"))
    else:
        nodes.append(h.make_node(then, ["c"], ["y"], name="then"))
    out = weight.shape[0]
    return hm.model(nodes, [hm.vi("x", T.FLOAT, [1, weight.shape[1], 4, 4])], [hm.vi("y", T.FLOAT, [1, out, 4, 4])],
                    [hm.init("w", weight), hm.init("b", bias)])


def _weights(dead_rows: int, out: int = 8, cin: int = 8) -> np.ndarray:
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((out, cin, 1, 1)) * 0.3
    weight[:dead_rows] = nm.TINY
    return weight


def test_a_bias_of_1e_9_is_stored_rounded_and_the_conv_runs_low(tmp_path):
    _src, _out, report = _convert(tmp_path, _conv(_weights(0), np.full(8, nm.TINY)), "bias")
    assert decisions(report)["conv"]["precision"] == "LOW"
    (note,) = report.constants
    assert note["tensor"] == "b" and "no more than rounding that output to float16 may" in note["action"]


def test_an_epsilon_bias_that_feeds_an_amplifier_still_keeps_its_consumer_float32(tmp_path):
    _src, _out, report = _convert(tmp_path, _conv(_weights(0), np.full(8, nm.TINY), then="Sqrt"), "eps")
    node = decisions(report)["conv"]
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant")


def test_dead_channels_are_stored_rounded_but_a_weight_of_tiny_values_only_is_not(tmp_path):
    _src, _out, report = _convert(tmp_path, _conv(_weights(2), np.zeros(8)), "dead")
    assert decisions(report)["conv"]["precision"] == "LOW"
    assert "flushing them changes each output of conv" in report.constants[0]["action"]
    _src, _out, report = _convert(tmp_path, _conv(_weights(8), np.zeros(8)), "all_tiny")
    node = decisions(report)["conv"]
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant")


def test_a_user_limit_is_judged_by_the_limit_not_the_effect(tmp_path):
    _src, _out, report = _convert(tmp_path, _conv(_weights(0), np.full(8, nm.TINY)), "limit", min_positive=1e-6)
    assert decisions(report)["conv"]["precision"] == "HIGH"


# ------------------------------------------------------------ issue 37: any spelling of a bias or a factor
def _dense_then(op: str, constant: np.ndarray, then: str = "Relu") -> onnx.ModelProto:
    """y = then(op(x @ W, constant)): a bias or a scale spelled after a MatMul instead of inside a Conv."""
    rng = np.random.default_rng(1)
    nodes = [h.make_node("MatMul", ["x", "w"], ["m"], name="dense"), h.make_node(op, ["m", "k"], ["a"], name="apply"),
             h.make_node(then, ["a"], ["y"], name="then")]
    return hm.model(nodes, [hm.vi("x", T.FLOAT, [2, 8])], [hm.vi("y", T.FLOAT, [2, 8])],
                    [hm.init("w", rng.standard_normal((8, 8))), hm.init("k", constant)])


@pytest.mark.parametrize("op", ["Add", "Sub"])
def test_a_tiny_bias_added_after_a_matmul_is_judged_by_its_effect(tmp_path, op):
    bias = np.full(8, 1e-9)
    bias[:3] = 0.1  # live units beside pruned ones
    _src, _out, report = _convert(tmp_path, _dense_then(op, bias), f"bias_{op}", release=False)
    node = decisions(report)["apply"]
    assert node["precision"] == "LOW", node
    (record,) = [c for c in report.constants if c["tensor"] == "k"]
    assert record["action"].startswith("stored rounded (added to apply's output")


def test_a_tiny_bias_before_an_amplifier_still_pins(tmp_path):
    _src, _out, report = _convert(tmp_path, _dense_then("Add", np.full(8, 1e-9), "Sqrt"), "eps", release=False)
    node = decisions(report)["apply"]
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant")


def test_a_scale_with_dead_channels_is_judged_by_its_effect(tmp_path):
    scale = np.full(8, 1e-9)
    scale[:4] = 0.5
    _src, _out, report = _convert(tmp_path, _dense_then("Mul", scale), "scale", release=False)
    assert decisions(report)["apply"]["precision"] == "LOW"
    (record,) = [c for c in report.constants if c["tensor"] == "k"]
    assert "a factor of apply's output" in record["action"]


def test_a_scale_that_flushes_whole_still_pins(tmp_path):
    _src, _out, report = _convert(tmp_path, _dense_then("Mul", np.full(8, 1e-9)), "dead", release=False)
    node = decisions(report)["apply"]
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant")
