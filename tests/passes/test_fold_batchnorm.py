"""Conv -> BatchNormalization folded in float32 where the LOW type has no norm kernel (``passes.fold_batchnorm``).

The fold must compute what the pair computed (float32 runs of both graphs
agree), happen only for a LOW type no provider runs the norm in (bfloat16),
and leave every norm a caller or the user still needs as a node.
"""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ampconv
from ampconv.config import Config
from ampconv.passes.fold_batchnorm import FoldBatchNormPass, fold_reason
from ampconv.policy import load_policy
from ampconv.runtime.target import choose_target

RNG = np.random.default_rng(7)


def _stats(channels: int, rng=RNG, var_low: float = 0.5) -> dict:
    """Trained-like statistics: gamma ~ 1, beta and mean small, variance about 1."""
    return {
        "gamma": rng.uniform(0.5, 1.5, channels).astype(np.float32),
        "beta": rng.normal(0, 0.2, channels).astype(np.float32),
        "mean": rng.normal(0, 0.5, channels).astype(np.float32),
        "var": rng.uniform(var_low, 2.0, channels).astype(np.float32),
    }


def conv_bn(opset: int = 17, *, bias: bool = True, group: int = 1, stats_as_inputs: bool = False,
            training: bool = False, conv_out_is_output: bool = False, shared_weight: bool = False,
            weight_is_input: bool = False, constant_stats: bool = False, dims: int = 2) -> onnx.ModelProto:
    """x -> Conv -> BatchNormalization -> Relu -> y (the negatives' variations by keyword)."""
    cin, cout, k = 4, 8, 3
    spatial = [6] * dims
    w = RNG.normal(0, 0.3, (cout, cin // group) + (k,) * dims).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    conv_inputs = ["x", "w"] + (["b"] if bias else [])
    if bias:
        inits.append(numpy_helper.from_array(RNG.normal(0, 0.1, cout).astype(np.float32), "b"))
    stats = _stats(cout)
    nodes = [helper.make_node("Conv", conv_inputs, ["c"], name="conv", pads=[1] * (2 * dims), group=group)]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, cin] + spatial)]
    if constant_stats:
        for name, data in stats.items():
            nodes.insert(0, helper.make_node("Constant", [], [name], name=f"const_{name}",
                                             value=numpy_helper.from_array(data, name)))
    else:
        inits += [numpy_helper.from_array(data, name) for name, data in stats.items()]
    if stats_as_inputs:
        inputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT, [cout]) for name in stats]
    if weight_is_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, list(w.shape)))
    bn_outputs = ["n", "rm", "rv"] if training else ["n"]
    attrs = {"epsilon": 1e-5, **({"training_mode": 1} if training else {})}
    nodes.append(helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], bn_outputs,
                                  name="bn", **attrs))
    nodes.append(helper.make_node("Relu", ["n"], ["y"], name="relu"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if conv_out_is_output:
        outputs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    if shared_weight:  # a second Conv reads the same weight, with a norm of its own
        stats2 = {f"{name}2": data for name, data in _stats(cout).items()}
        inits += [numpy_helper.from_array(data, name) for name, data in stats2.items()]
        nodes += [helper.make_node("Conv", ["x", "w"], ["c2"], name="conv2", pads=[1] * (2 * dims), group=group),
                  helper.make_node("BatchNormalization", ["c2", *stats2], ["y2"], name="bn2")]
        outputs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model: onnx.ModelProto, feeds: dict) -> list:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {k: v for k, v in feeds.items()
                                             if k in {i.name for i in session.get_inputs()}})))


def _fold(proto: onnx.ModelProto, level: str = "O2", preset: str = "default", keep_fp32=(), block_ops=()):
    """The pass run on ``proto`` read into the IR, typed as the pipeline types it: (folded records, the proto)."""
    model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(proto))
    policy = load_policy(level=level, preset=preset, block_ops=tuple(block_ops), target=choose_target("cuda"))
    fold = FoldBatchNormPass("test", policy, [re.compile(p) for p in keep_fp32])
    fold(model)
    return fold.folded, ir.serde.serialize_model(model)


def _feeds(proto: onnx.ModelProto) -> dict:
    x = next(i for i in proto.graph.input if i.name == "x")
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
    return {"x": RNG.normal(0, 1, shape).astype(np.float32)}


@pytest.mark.parametrize("opset", [9, 11, 13, 14, 15, 17, 22])
@pytest.mark.parametrize("bias", [True, False])
def test_folded_pair_computes_what_the_pair_computed(opset, bias):
    proto = conv_bn(opset, bias=bias)
    folded, out = _fold(proto)
    assert [(f.node, f.into) for f in folded] == [("bn", "conv")]
    assert [n.op_type for n in out.graph.node] == ["Conv", "Relu"]
    assert len(out.graph.node[0].input) == 3  # a bias is made when the Conv had none
    feeds = _feeds(proto)
    np.testing.assert_allclose(_run(out, feeds)["y"], _run(proto, feeds)["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", [dict(group=4), dict(group=2, dims=1), dict(dims=3), dict(constant_stats=True)])
def test_grouped_1d_3d_and_constant_node_statistics_fold(case):
    proto = conv_bn(**case)
    folded, out = _fold(proto)
    assert len(folded) == 1 and "BatchNormalization" not in {n.op_type for n in out.graph.node}
    assert "Constant" not in {n.op_type for n in out.graph.node}  # the statistics' Constants are gone with it
    feeds = _feeds(proto)
    np.testing.assert_allclose(_run(out, feeds)["y"], _run(proto, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_the_norm_output_keeps_its_name_and_unused_statistics_leave():
    folded, out = _fold(conv_bn())
    assert out.graph.node[0].output[0] == "n"  # the Conv now produces the norm's value, by its name
    assert {i.name for i in out.graph.initializer} == {"w", "b"}


@pytest.mark.parametrize("case, why", [
    (dict(stats_as_inputs=True), "statistics a caller may feed at run time"),
    (dict(training=True, opset=15), "training mode: it updates its running statistics"),
    (dict(conv_out_is_output=True), "the Conv's output is also read as a graph output"),
    (dict(shared_weight=True), "the weight is read by a second Conv with other statistics"),
    (dict(weight_is_input=True), "the weight is a graph input"),
])
def test_negative_norms_stay_nodes(case, why):
    folded, out = _fold(conv_bn(**case))
    assert folded == [], why
    assert "BatchNormalization" in {n.op_type for n in out.graph.node}, why


@pytest.mark.parametrize("kwargs", [
    dict(keep_fp32=("^bn$",)), dict(keep_fp32=("^conv$",)), dict(block_ops=("BatchNormalization",)),
    dict(preset="mindspore"),  # MindSpore keeps BatchNorm float32 at O2
])
def test_norms_the_user_or_policy_keeps_float32_stay(kwargs):
    folded, out = _fold(conv_bn(), **kwargs)
    assert folded == []
    assert "BatchNormalization" in {n.op_type for n in out.graph.node}


def test_fold_reason_asks_the_gpu_table_for_the_low_type():
    assert "no bfloat16 BatchNormalization kernel" in fold_reason("bf16", choose_target("cpu"), 17)
    assert "no bfloat16 BatchNormalization kernel" in fold_reason("bf16", choose_target("cuda"), 22)
    # Negative: CUDA has float16 norms, and a float16 plan for a CPU asks no GPU at all.
    assert fold_reason("fp16", choose_target("cuda"), 17) is None
    assert fold_reason("fp16", choose_target("cpu"), 17) is None


def _convert(tmp_path, proto, **config):
    src, dst = tmp_path / "m.onnx", tmp_path / "m.out.onnx"
    onnx.save(proto, src)
    report = ampconv.convert(src, dst, Config(overwrite=True, **config))
    return report, onnx.load(dst)


def test_bf16_conversion_folds_and_reports_it(tmp_path):
    report, out = _convert(tmp_path, conv_bn(), dtype="bf16")
    assert report.folded == [{"node": "bn", "into": "conv", "reason": report.folded[0]["reason"]}]
    assert any(note.startswith("folded 1 BatchNormalization node into the Conv") for note in report.notes)
    assert "BatchNormalization" not in {n.op_type for n in out.graph.node}
    assert {n["name"] for n in report.nodes} == {"conv", "relu"}
    assert json.loads(json.dumps(report.to_dict()))["folded"][0]["into"] == "conv"
    conv = next(n for n in out.graph.node if n.op_type == "Conv")
    weight = next(i for i in out.graph.initializer if i.name == conv.input[1])
    assert weight.data_type == TensorProto.BFLOAT16  # rounded once, after the float32 fold


def test_fp16_and_o0_conversions_keep_the_norm(tmp_path):
    for config in (dict(dtype="fp16"), dict(dtype="bf16", level="O0")):
        report, out = _convert(tmp_path, conv_bn(), **config)
        assert report.folded == [], config
        assert "BatchNormalization" in {n.op_type for n in out.graph.node}, config


def gemm_bn(trans_b: int, bias: str, beta: float = 1.0, opset: int = 17) -> onnx.ModelProto:
    """x[2, 6] -> Gemm (PyTorch's Linear) -> BatchNormalization (BatchNorm1d) -> y; ``bias``: none, 1d or 2d."""
    k, n = 6, 5
    w = RNG.normal(0, 0.4, (n, k) if trans_b else (k, n)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    inputs = ["x", "w"]
    if bias != "none":
        c = RNG.normal(0, 0.3, (n,) if bias == "1d" else (1, n)).astype(np.float32)
        inits.append(numpy_helper.from_array(c, "c"))
        inputs.append("c")
    stats = _stats(n)
    inits += [numpy_helper.from_array(data, name) for name, data in stats.items()]
    nodes = [helper.make_node("Gemm", inputs, ["g"], name="fc", transB=trans_b, beta=beta, alpha=0.7),
             helper.make_node("BatchNormalization", ["g", "gamma", "beta", "mean", "var"], ["y"], name="bn1d")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("bias, beta", [("none", 1.0), ("1d", 1.0), ("2d", 0.5), ("1d", 2.0)])
def test_gemm_then_batchnorm1d_folds_with_its_transpose_and_beta(trans_b, bias, beta):
    proto = gemm_bn(trans_b, bias, beta)
    folded, out = _fold(proto)
    assert [(f.node, f.into) for f in folded] == [("bn1d", "fc")]
    assert [n.op_type for n in out.graph.node] == ["Gemm"]
    feeds = {"x": RNG.normal(0, 1, (2, 6)).astype(np.float32)}
    np.testing.assert_allclose(_run(out, feeds)["y"], _run(proto, feeds)["y"], rtol=1e-5, atol=1e-5)


def test_negative_an_opset_6_gemm_with_broadcast_is_left():
    proto = gemm_bn(1, "1d", opset=6)
    proto.graph.node[0].attribute.append(helper.make_attribute("broadcast", 1))
    folded, out = _fold(proto)
    assert folded == [] and [n.op_type for n in out.graph.node] == ["Gemm", "BatchNormalization"]
