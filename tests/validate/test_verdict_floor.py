"""The floor (issue 30): each output's error judged against the error no LOW conversion can avoid.

The floor model (``ampconv.validation.floor``) is the float32 reference with
its weights, inputs, products, elementwise results and outputs rounded to the LOW type. A failing
figure within ``FLOOR_FACTOR`` times the floor's passes, and says so; a
changed result (a flipped clear label, a new NaN/Inf) never does. Each model
here is converted by ``ampconv.convert`` and validated on 10 seeds: the
verdict must agree with a task metric computed here, independently of the
criteria, on every seed.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx import TensorProto as T

import ampconv
from ampconv.core.lowtypes import low_type
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.criteria import FLOOR_FACTOR, default_criteria, judge
from ampconv.validation.floor import floor_model, rounded

import validate_models as vm

SEEDS = range(10)


def _save(model: onnx.ModelProto, path) -> str:
    model.ir_version = vm.IR_VERSION
    onnx.save(model, str(path))
    return str(path)


def _convert(tmp_path, model: onnx.ModelProto, dtype: str, name: str) -> tuple[str, str]:
    src = _save(model, tmp_path / f"{name}.onnx")
    dst = str(tmp_path / f"{name}.{dtype}.onnx")
    ampconv.convert(src, dst, ampconv.Config(dtype=dtype, overwrite=True))
    return src, dst


def _break(dst: str, op: str, path, **attrs) -> str:
    """A copy of the converted model whose (only) output goes through one more node: a broken conversion."""
    model = onnx.load(dst)
    out = model.graph.output[0].name
    for node in model.graph.node:
        node.output[:] = [f"{o}_before" if o == out else o for o in node.output]
    inputs = [f"{out}_before"]
    if "operand" in attrs:  # Mul's factor, Gather's indices
        model.graph.initializer.append(numpy_helper.from_array(np.asarray(attrs.pop("operand")), "operand"))
        inputs.append("operand")
    model.graph.node.append(helper.make_node(op, inputs, [out], **attrs))
    return _save(model, path)


# ---------------------------------------------------------------- the floor model


def test_the_floor_model_rounds_inputs_weights_products_and_outputs(tmp_path):
    from ampconv.reading.prepare import infer_types

    model = ir.serde.deserialize_model(vm.sensitive_classifier())
    infer_types(model)
    stats = floor_model(model, low_type("fp16"))
    assert (stats.inputs, stats.weights, stats.products, stats.outputs) == (1, 3, 3, 1)
    ops = [node.op_type for node in model.graph]
    # Rounded on entry, after MatMul, Relu and MatMul (not the Add of a constant bias: it may lift values into
    # a cancellation a converter avoids), and on exit (the last result is the output: twice).
    assert ops.count("Cast") == 2 * (1 + 3 + 1)
    assert [v.name for v in model.graph.outputs] == ["logits"]
    # A normalization, a reduction or a Softmax is the converter's choice: never rounded by the floor.
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["p"]), helper.make_node("ReduceMean", ["p"], ["m"], keepdims=1),
         helper.make_node("Div", ["p", "m"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])], [helper.make_tensor_value_info("y", T.FLOAT, [2, 8])])
    other = ir.serde.deserialize_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    infer_types(other)
    assert floor_model(other, low_type("fp16")).products == 0


def test_the_floor_keeps_float32_what_a_converter_keeps():
    fp16 = low_type("fp16")
    mask = np.array([0.0, -1e9], np.float32)  # -1e9 overflows fp16: a converter keeps it float32
    epsilon = np.array([1e-12], np.float32)  # flushes to zero in fp16
    weight = np.array([0.1, 3.14159], np.float32)
    assert np.array_equal(rounded(mask, fp16), mask)
    assert np.array_equal(rounded(epsilon, fp16), epsilon)
    assert np.array_equal(rounded(weight, fp16), weight.astype(np.float16).astype(np.float32))
    assert not np.array_equal(rounded(weight, fp16), weight)


# ---------------------------------------------------------------- the rule


def _noisy(ref, relative, seed):
    rng = np.random.default_rng(seed)
    return (ref + rng.standard_normal(ref.shape) * relative * np.sqrt(np.mean(ref**2))).astype(np.float32)


def test_a_failing_figure_within_the_floor_passes_and_says_how_many_times_it():
    ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    conv, floor = _noisy(ref, 0.03, 1), _noisy(ref, 0.02, 2)
    criteria = default_criteria("fp16")
    alone = judge(ref, conv, criteria)
    assert not alone.passed and alone.criterion == "cosine"
    m = judge(ref, conv, criteria, floor=floor)
    assert m.passed and m.criterion == "floor"
    assert 1.2 < m.floor_ratio < 1.8
    assert "but that is 1.5x the unavoidable error" in m.decided_by and "cosine" in m.decided_by


def test_a_failing_figure_beyond_the_floor_still_fails_with_the_ratio():
    ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    conv, floor = _noisy(ref, 0.03, 1), _noisy(ref, 0.003, 2)
    m = judge(ref, conv, default_criteria("fp16"), floor=floor)
    assert not m.passed and m.criterion == "cosine"
    assert m.floor_ratio > FLOOR_FACTOR
    assert "x the unavoidable error" in m.decided_by


def test_a_passing_output_quotes_its_ratio_too():
    ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    m = judge(ref, _noisy(ref, 1e-4, 1), default_criteria("fp16"), floor=_noisy(ref, 1e-4, 2))
    assert m.passed and m.criterion != "floor" and "x the unavoidable error" in m.decided_by


def test_the_floor_never_excuses_a_new_nonfinite_or_a_flipped_clear_label():
    ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    conv = ref.copy()
    conv[0, 0] = np.inf
    m = judge(ref, conv, default_criteria("fp16"), floor=conv)  # even a floor with the same inf
    assert not m.passed and m.criterion == "nonfinite"
    logits = np.array([[5.0, 0.0, 0.0]] * 20, np.float32)
    flipped = logits[:, ::-1].copy()
    m = judge(logits, flipped, default_criteria("fp16"), floor=flipped)
    assert not m.passed and m.criterion == "label"


# ---------------------------------------------------------------- models, 10 seeds each


def _map_task(ref: np.ndarray, conv: np.ndarray) -> bool:
    """A probability map's task: the text area over DB's threshold of 0.3 that it feeds to box extraction
    (IoU >= 0.9, or both empty)."""
    a, b = ref > 0.3, conv > 0.3
    union = np.count_nonzero(a | b)
    return (np.count_nonzero(a & b) / union if union else 1.0) >= 0.9


def _class_task(ref: np.ndarray, conv: np.ndarray) -> bool:
    """A classifier's task: top-1 kept on every row that makes a decision, whose reference top-1 leads top-2 by
    5% of the logits' scale or more (a smaller lead is a coin toss: rounding the inputs alone flips such rows)."""
    top2 = -np.sort(-ref, axis=-1)[:, :2]
    scale = np.maximum(np.abs(top2[:, 0]), np.sqrt(np.mean(ref**2)))
    clear = top2[:, 0] - top2[:, 1] > 0.05 * scale
    return bool(np.all(np.argmax(ref[clear], -1) == np.argmax(conv[clear], -1)))


def _verdicts(src: str, dst: str, task, **options) -> list[tuple[bool, bool, str]]:
    """(verdict, task metric, deciding words) per seed; the task metric reads the very arrays validation compared."""
    from ampconv.numerics import runners

    rows = []
    original = runners.Runner.run
    seen = {}

    def run(self, sample, names=None):
        outputs = original(self, sample, names)
        seen[self.label] = next(iter(outputs.values()))
        return outputs

    runners.Runner.run = run
    try:
        for seed in SEEDS:
            result = validate(src, dst, ValidateOptions(seed=seed, backend="emulate", **options))
            ok = task(seen["reference model"], seen["converted model"])
            rows.append((result.passed, ok, result.outputs[0].decided_by))
    finally:
        runners.Runner.run = original
    return rows


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_near_zero_probability_map_passes_on_every_seed(tmp_path, dtype):
    # Issue 30, 1: a text detector's near-zero map flipped with the seed (fp16: "scaled p99.9 error 0.11 > 0.1"
    # on seed 4; bf16: "cosine 0.9960 to 0.9990 < 0.999" on every seed) at 1.0x the unavoidable error.
    src, dst = _convert(tmp_path, vm.text_detector(), dtype, "text_detector")
    rows = _verdicts(src, dst, _map_task)
    assert all(task for _, task, _ in rows)
    assert all(verdict for verdict, _, _ in rows), [words for verdict, _, words in rows if not verdict]
    without = [validate(src, dst, ValidateOptions(seed=seed, backend="emulate", floor=False)).passed for seed in SEEDS]
    assert not all(without)  # what the floor changes: some seed failed without it
    assert any("the unavoidable error" in words and "within 5x" in words for _, _, words in rows)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_probability_map_detector_agrees_with_its_task_on_every_seed(tmp_path, dtype):
    src, dst = _convert(tmp_path, vm.prob_map_detector(size=32), dtype, "dbnet")
    ranges = {"input_ranges": {"x": (-1.0, 1.0)}}
    rows = _verdicts(src, dst, _map_task, **ranges)
    assert all(verdict and task for verdict, task, _ in rows), rows
    broken = _break(dst, "Transpose", tmp_path / "dbnet_broken.onnx", perm=[0, 1, 3, 2])
    rows = _verdicts(src, broken, _map_task, **ranges)
    assert not any(verdict or task for verdict, task, _ in rows), rows


@pytest.mark.parametrize("dtype, offset", [("fp16", 200.0), ("bf16", 25.0)])
def test_a_classifier_sensitive_to_the_low_type_passes_at_its_floor_on_every_seed(tmp_path, dtype, offset):
    # Issue 30, 3: "cosine 0.99988 < 0.9999" with every clear top-1 kept, the same for any converter.
    src, dst = _convert(tmp_path, vm.sensitive_classifier(offset=offset), dtype, "classifier")
    shapes = {"shapes": {"batch": (64,)}}
    rows = _verdicts(src, dst, _class_task, **shapes)
    assert all(task for _, task, _ in rows)
    assert all(verdict for verdict, _, _ in rows), [words for verdict, _, words in rows if not verdict]
    assert all("the unavoidable error" in words for _, _, words in rows)
    reversed_labels = np.arange(9, -1, -1, dtype=np.int64)
    broken = _break(dst, "Gather", tmp_path / "classifier_broken.onnx", operand=reversed_labels, axis=1)
    rows = _verdicts(src, broken, _class_task, **shapes)
    assert not any(verdict or task for verdict, task, _ in rows), rows


def test_the_floor_never_excuses_changed_decisions(tmp_path):
    # In bf16 this classifier (offset 200) flips the top-1 of rows leading by 5% to 20%: the task fails on every
    # seed; its cosine (0.9946) is only 1.4x the floor's, but changed decisions are not the floor's to excuse.
    src, dst = _convert(tmp_path, vm.sensitive_classifier(offset=200.0), "bf16", "classifier")
    rows = _verdicts(src, dst, _class_task, shapes={"batch": (64,)})
    assert not any(task for _, task, _ in rows)
    assert not any(verdict for verdict, _, _ in rows), rows
    assert any("changed their top-1" in words and "the floor does not excuse" in words for _, _, words in rows)


def test_an_error_near_its_threshold_and_far_beyond_the_floor_fails():
    ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    floor = _noisy(ref, 1e-4, 2)
    criteria = default_criteria("bf16")
    near = (ref * np.float32(1.06)).astype(np.float32)  # a wrong scale, within bf16's thresholds (p99 0.06)
    assert judge(ref, near, criteria).passed
    m = judge(ref, near, criteria, floor=floor)
    assert not m.passed and m.criterion == "beyond_floor" and "the conversion, not the model" in m.decided_by
    far_from_threshold = (ref * np.float32(1.001)).astype(np.float32)  # 10x the floor, a tenth of the threshold
    assert judge(ref, far_from_threshold, criteria, floor=floor).passed


def test_a_decoded_image_scaled_by_08_fails_on_every_seed_in_bf16(tmp_path):
    # Its p99 sits on bf16's threshold (0.1 <= 0.1 on 7 of 10 seeds without the floor): 43x the floor.
    src, dst = _convert(tmp_path, vm.image_decoder(), "bf16", "decoder")
    broken = _break(dst, "Mul", tmp_path / "decoder_dark.onnx", operand=np.float32(0.8))
    results = [validate(src, broken, ValidateOptions(seed=seed, backend="emulate")) for seed in SEEDS]
    assert not any(r.passed for r in results)


def test_bf16_rounding_at_an_opset_without_bfloat16_casts(tmp_path):
    # Cast takes bfloat16 from opset 13: an older model's floor rounds by Veltkamp's splitting (PP-OCRv4's
    # detector is opset 11; its floor model failed to load before).
    import onnxruntime as ort

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4096])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4096])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model = ir.serde.deserialize_model(proto)
    stats = floor_model(model, low_type("bf16"))
    assert stats.inputs == 1 and not any(node.op_type == "Cast" for node in model.graph)
    path = str(tmp_path / "floor.onnx")
    ir.save(model, path)
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32) * 100
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    got = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    expected = np.maximum(rounded(x, low_type("bf16")), 0)
    assert np.mean(got == expected) > 0.999  # ties may round the other way
    assert np.max(np.abs(got - expected) / np.maximum(np.abs(expected), 1e-30)) <= 2.0**-7


def test_the_floor_never_rounds_a_value_into_an_overflow(tmp_path):
    # A decomposed LayerNorm at +-3e4 (docs/hazards.md 5): the variance 9e8 is beyond fp16; a converter keeps
    # it float32, so the floor does too (rounded, it would read inf and "explain" the O3 conversion's overflow).
    import onnxruntime as ort

    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = ir.serde.deserialize_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    floor_model(model, low_type("fp16"))
    path = str(tmp_path / "floor.onnx")
    ir.save(model, path)
    x = np.array([1.0001, 40000.0, -50000.0], np.float32)
    y = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert np.isfinite(y).all() and y[1] == 80000.0 and y[2] == 2 * np.float32(np.float16(-50000.0))
    assert y[0] == np.float32(np.float16(2 * np.float16(1.0001)))


def test_the_floor_model_of_a_model_with_subgraphs_runs(tmp_path):
    # Rounding inside If branches names every value it adds: a body shares its outer graph's names (SSA).
    ref, conv = vm.if_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(backend="emulate", inputs=()))
    assert not any("could not be measured" in note for note in result.notes), result.notes
    assert result.outputs[0].worst.floor_ratio is not None
