"""The runtime's type ties (``ampconv.runtime.kernel_ties``): variables every onnxruntime kernel binds to one type.

BatchNormalization from opset 15 types its statistics with ``T1``/``T2`` apart
from X's ``T``; onnxruntime registers no kernel for a mix (CPU nor CUDA), so a
float16 X with float32 statistics loads, yet runs on no kernel of its own: on
CUDA onnxruntime copies it to the CPU and back in float32 (1.91 ms against
0.44 ms for the sample CNN at batch 16 on an H200, bench/results/gpu_latency.md),
and its Conv+BatchNormalization fusion no longer applies. These tests hold
the table to the installed registry, the derivation to its rule, and a
conversion to what onnxruntime then runs.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ampconv
from ampconv.runtime import kernel_ties
from ampconv.runtime.facts import RuntimeFacts
from ampconv.runtime.schema import type_ties

FLOAT, HALF = "tensor(float)", "tensor(float16)"


def test_table_is_what_the_installed_registry_derives():
    installed = f"onnxruntime {ort.__version__}"
    if installed != kernel_ties.SOURCE:
        pytest.skip(f"table from {kernel_ties.SOURCE}, installed {installed}: `python scripts/kernel_ties.py` rewrites it")
    from ampconv.runtime.installed import kernel_rows

    assert kernel_ties.derive_ties(kernel_rows()) == kernel_ties.TIES


def test_kernels_that_bind_one_type_tie():
    rows = [("CPU", "", "Norm", (15, 99), {"T": [FLOAT], "T1": [FLOAT]}),
            ("CUDA", "", "Norm", (15, 99), {"T": [HALF], "T1": [HALF]})]
    assert kernel_ties.derive_ties(rows) == {("", "Norm"): ((15, 99, (("T1", "T"),)),)}
    assert kernel_ties.kernel_ties("", "Norm", 17, kernel_ties.derive_ties(rows)) == (("T1", "T"),)
    assert kernel_ties.kernel_ties("", "Norm", 14, kernel_ties.derive_ties(rows)) == ()


@pytest.mark.parametrize("second", [
    {"T": [HALF], "T1": [FLOAT]},                 # one kernel takes a mix
    {"T": [HALF, FLOAT], "T1": [HALF, FLOAT]},    # one kernel takes any pair
    {"T": [HALF]},                                # one kernel leaves T1 out
])
def test_a_kernel_that_binds_them_apart_unties(second):
    rows = [("CPU", "", "Norm", (15, 99), {"T": [FLOAT], "T1": [FLOAT]}), ("CUDA", "", "Norm", (15, 99), second)]
    assert kernel_ties.derive_ties(rows) == {}


def test_the_pinned_table_ties_batchnorm_statistics_and_nothing_that_mixes():
    assert dict(kernel_ties.kernel_ties("", "BatchNormalization", 15)) == {"T1": "T", "T2": "T"}
    assert dict(kernel_ties.kernel_ties("", "BatchNormalization", 14)) == {"U": "T"}
    assert kernel_ties.kernel_ties("", "BatchNormalization", 12) == ()  # one variable at 9-13: nothing to tie
    assert kernel_ties.kernel_ties("", "Pow", 15) == ()  # exponent in its own type: kernels take the mix
    assert kernel_ties.kernel_ties("", "LayerNormalization", 17) == ()  # U (mean, inv std) stays float32
    assert kernel_ties.kernel_ties("", "Dropout", 13) == ()


def test_type_ties_read_the_runtime_and_a_runtime_without_ties_adds_none():
    assert dict(type_ties("", "BatchNormalization", 15)) == {"T1": "T", "T2": "T"}
    assert type_ties("", "BatchNormalization", 15, runtime=RuntimeFacts()) == ()


def _conv_bn(path, var, opset=15):
    """Conv then BatchNormalization then Relu at ``opset`` (statistics typed apart from X from 15)."""
    rng = np.random.default_rng(0)
    c = 8
    inits = [numpy_helper.from_array(a.astype(np.float32), n) for a, n in (
        (rng.standard_normal((c, 3, 3, 3)) * 0.2, "w"), (1 + 0.1 * rng.standard_normal(c), "gamma"),
        (0.1 * rng.standard_normal(c), "beta"), (0.1 * rng.standard_normal(c), "mean"), (var, "var"))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["b"], name="bn"),
             helper.make_node("Relu", ["b"], ["y"], name="relu")]
    graph = helper.make_graph(nodes, "conv_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, c, 16, 16])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


def _optimized_ops(path, tmp_path):
    """The op types onnxruntime's CPU session runs after its default graph optimizations."""
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def test_batchnorm_statistics_follow_x_so_the_runtime_fuses_it(tmp_path):
    src = _conv_bn(tmp_path / "m.onnx", var=np.full(8, 0.9))
    dst = tmp_path / "m.fp16.onnx"
    ampconv.convert(src, dst, ampconv.Config(dtype="fp16", overwrite=True))
    out = onnx.load(dst)
    types = {t.name: t.data_type for t in out.graph.initializer}
    assert [types[n] for n in ("gamma", "beta", "mean", "var")] == [TensorProto.FLOAT16] * 4
    assert "BatchNormalization" not in _optimized_ops(dst, tmp_path)  # folded into the Conv, as in float32
    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    want = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.abs(got - want).max() <= 2e-2 * np.abs(want).max()


def test_statistics_that_overflow_keep_the_whole_node_float32(tmp_path):
    """Negative: a variance beyond float16 keeps BatchNormalization float32, all five inputs alike (a kernel exists)."""
    src = _conv_bn(tmp_path / "m.onnx", var=np.array([1.2e5, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]))
    dst = tmp_path / "m.fp16.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(dtype="fp16", overwrite=True))
    assert {n["name"]: n for n in report.nodes}["bn"]["precision"] == "HIGH"
    out = onnx.load(dst)
    types = {t.name: t.data_type for t in out.graph.initializer}
    assert [types[n] for n in ("gamma", "beta", "mean", "var")] == [TensorProto.FLOAT] * 4
    ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])  # one type throughout: a kernel exists


def test_a_training_mode_batchnorm_keeps_its_state_float32(tmp_path):
    """BatchNormalization with training_mode=1 updates its running statistics: state, like a training op's, so it
    stays float32 even at O3 (whose tie would otherwise put the running mean in the LOW type)."""
    c = 3
    inits = [numpy_helper.from_array(np.full(c, v, np.float32), n)
             for v, n in ((1.0, "gamma"), (0.0, "beta"), (0.0, "mean"), (1.0, "var"))]
    node = helper.make_node("BatchNormalization", ["x", "gamma", "beta", "mean", "var"], ["y", "rm", "rv"],
                            name="bn", training_mode=1, momentum=0.9)
    graph = helper.make_graph([node], "bn_train", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                               for n, s in (("y", [2, c, 4]), ("rm", [c]), ("rv", [c]))], inits)
    src = tmp_path / "bn.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), src)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(level="O3", overwrite=True, synthetic_run=False))
    bn = {n["name"]: n for n in report.nodes}["bn"]
    assert (bn["precision"], bn["rule"]) == ("HIGH", "hard-quantization") and "training_mode=1" in bn["reason"]


def test_only_float_types_count_a_bool_beside_them_does_not_untie():
    """Attention's mask U admits bool beside Q's float type: a float mask must be Q's type (no kernel mixes them);
    found by the blind set tests/blind/kernels.py (9 Casts onnxruntime inserted around a float32 mask)."""
    rows = [("CPU", "", "Attn", (23, 99), {"T1": [FLOAT], "U": ["tensor(bool)", FLOAT]}),
            ("CPU", "", "Attn", (23, 99), {"T1": [HALF], "U": ["tensor(bool)", HALF]})]
    assert kernel_ties.derive_ties(rows) == {("", "Attn"): ((23, 99, (("U", "T1"),)),)}
    assert dict(kernel_ties.kernel_ties("", "Attention", 23))["U"] == "T1"
    rows.append(("CUDA", "", "Attn", (23, 99), {"T1": [HALF], "U": ["tensor(bool)", FLOAT]}))  # a mixing kernel
    assert kernel_ties.derive_ties(rows) == {}
