"""Emulation is faithful: it rounds like fp16/bf16, overflows like fp16, and localizes."""

import numpy as np
import onnx
import pytest
import validate_models as vm
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from ampconv.validation import ValidateOptions, validate
from ampconv.numerics import modelio, runners
from ampconv.numerics import emulate as emulation


@pytest.fixture()
def sample_npz(tmp_path):
    path = tmp_path / "overflow.npz"
    np.savez(path, **vm.overflow_inputs())
    return str(path)


def _run_emulated(path, tmp_path, feeds):
    model = modelio.load(path)
    stats = emulation.emulate(model)
    out = modelio.save_derived(model, str(tmp_path), "emulated", external=False)
    runner = runners.make_session(out, "emulated", runners.CPU, optimize=False)
    return runner.run(feeds), stats, onnx.load(out)


def test_fp16_overflow_fails_under_emulation_and_is_localized(tmp_path, sample_npz):
    ref, conv = vm.overflow_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(inputs=(sample_npz,), localize=True))
    assert not result.passed
    assert result.backend == "emulate" and result.dtype == "fp16"
    worst = result.outputs[0].worst
    assert worst.new_nonfinite == 8
    loc = result.localization
    assert loc.node == "scale_up" and loc.op_type == "Mul" and loc.output == "big"
    assert "non-finite" in loc.reason
    assert loc.precision == "LOW" and "float16" in loc.rule
    assert loc.backend == "emulate"


def test_localization_reports_converter_decision(tmp_path, sample_npz):
    ref, conv = vm.overflow_pair(tmp_path)
    decisions = {"scale_up": {"precision": "LOW", "rule": "white list"}}
    result = validate(ref, conv, ValidateOptions(inputs=(sample_npz,), localize=True, decisions=decisions))
    assert result.localization.rule == "white list"


def test_same_model_with_the_node_kept_float32_passes(tmp_path, sample_npz):
    ref, conv = vm.overflow_pair(tmp_path, scale_low=False)
    result = validate(ref, conv, ValidateOptions(inputs=(sample_npz,), localize=True))
    assert result.passed
    assert result.localization is None


def test_cpu_native_backend_does_not_catch_the_overflow(tmp_path, sample_npz):
    # Why emulation exists: the CPU provider computes this fp16 Mul in float32.
    if runners.cuda_available():
        pytest.skip("a CUDA provider is present; native would run real fp16 kernels")
    ref, conv = vm.overflow_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(inputs=(sample_npz,), backend="native"))
    assert result.passed
    assert result.backend == "native" and result.provider == runners.CPU
    assert any("computes most float16 ops in float32" in n for n in result.notes)


def test_auto_backend_is_emulate_without_cuda(tmp_path, sample_npz):
    if runners.cuda_available():
        pytest.skip("CUDA present")
    ref, conv = vm.overflow_pair(tmp_path)
    assert validate(ref, conv, ValidateOptions(inputs=(sample_npz,))).backend == "emulate"


def test_bf16_validates_on_cpu(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path, "bf16")
    result = validate(ref, conv, ValidateOptions(shapes=(("batch", (3,)),), samples=2))
    assert result.dtype == "bf16" and result.backend == "emulate"
    assert result.passed
    assert (result.rtol, result.atol) == (5e-2, 5e-2)
    # bf16 keeps 8 bits: it really rounds, and more coarsely than fp16.
    ref16, conv16 = vm.mlp_pair(tmp_path, "fp16")
    fp16 = validate(ref16, conv16, ValidateOptions(shapes=(("batch", (3,)),), samples=2))
    assert result.outputs[0].worst.max_abs > 4 * fp16.outputs[0].worst.max_abs > 0


def test_bf16_native_on_cpu_is_a_clear_error(tmp_path):
    if runners.cuda_available():
        pytest.skip("CUDA present")
    from ampconv.errors import AmpconvError

    ref, conv = vm.mlp_pair(tmp_path, "bf16")
    with pytest.raises(AmpconvError, match="try backend=.emulate."):
        validate(ref, conv, ValidateOptions(shapes=(("batch", (3,)),), backend="native"))


def test_emulation_rounds_exactly_like_numpy_float16(tmp_path):
    # y = Cast(x, fp16) * c16 + Constant(fp16) + ConstantOfShape(fp16) -> float
    c16 = np.float16(1.1)
    nodes = [
        h.make_node("Cast", ["x"], ["x16"], to=T.FLOAT16, name="cast_in"),
        h.make_node("Mul", ["x16", "c16"], ["m"], name="mul"),
        h.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.float16([0.1]), "kv"), name="const"),
        h.make_node("Add", ["m", "k"], ["a"], name="add"),
        h.make_node("Shape", ["x"], ["s"], name="shape"),
        h.make_node("ConstantOfShape", ["s"], ["z"], value=numpy_helper.from_array(np.float16([0.3]), "zv"), name="cos"),
        h.make_node("Add", ["a", "z"], ["b"], name="add2"),
        h.make_node("Cast", ["b"], ["y"], to=T.FLOAT, name="cast_out"),
    ]
    graph = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [5])], [h.make_tensor_value_info("y", T.FLOAT, [5])],
        [numpy_helper.from_array(np.array([c16]), "c16")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 9
    path = str(tmp_path / "rounding.onnx")
    onnx.save(model, path)
    x = np.array([1.0001, 3.14159, 1000.7, 2e-8, -7.77777], dtype=np.float32)
    out, stats, emulated = _run_emulated(path, tmp_path, {"x": x})
    expected = ((x.astype(np.float16) * c16) + np.float16(0.1)) + np.float16(0.3)
    np.testing.assert_array_equal(out["y"], expected.astype(np.float32))
    # Nothing LOW is left but the Casts to LOW of the round trips.
    assert stats.widened_initializers == 1 and stats.retyped_attributes == 3
    types = {vi.type.tensor_type.elem_type for vi in list(emulated.graph.value_info) + list(emulated.graph.output)}
    assert T.FLOAT16 not in {t.data_type for t in emulated.graph.initializer}
    assert all(n.attribute[0].i == T.FLOAT for n in emulated.graph.node if n.op_type == "Cast" and "__ampconv_emu_up" in n.name)
    assert T.FLOAT in types


def test_rounded_value_keeps_the_original_name(tmp_path):
    _, conv = vm.overflow_pair(tmp_path)
    model = modelio.load(conv)
    emulation.emulate(model)
    big = next(v for n in model.graph for v in n.outputs if v.name == "big")
    assert big.producer().op_type == "Cast"  # the rounded copy
    assert big.producer().inputs[0].producer().op_type == "Cast"
    assert big.producer().inputs[0].producer().inputs[0].producer().name == "scale_up"
    assert all(u[0].name == "scale_down" or u[0].op_type == "Cast" for u in big.uses())


def test_float32_model_is_left_unchanged(tmp_path):
    ref, _ = vm.overflow_pair(tmp_path)
    model = modelio.load(ref)
    before = [(n.name, n.op_type, [v.name for v in n.inputs]) for n in model.graph]
    stats = emulation.emulate(model)
    assert stats == emulation.EmulationStats()
    assert [(n.name, n.op_type, [v.name for v in n.inputs]) for n in model.graph] == before
    assert [v.name for v in model.graph.outputs] == ["y"]


def test_emulation_inside_if_subgraph(tmp_path):
    ref, conv = vm.if_pair(tmp_path)
    hot = tmp_path / "hot.npz"
    np.savez(hot, x=np.float32([70, 71, 72, 73]), cond=np.array(True))
    cold = tmp_path / "cold.npz"
    np.savez(cold, x=np.float32([70, 71, 72, 73]), cond=np.array(False))
    assert not validate(ref, conv, ValidateOptions(inputs=(str(hot),))).passed
    assert validate(ref, conv, ValidateOptions(inputs=(str(cold),))).passed
    model = modelio.load(conv)
    emulation.emulate(model)
    branch = next(n for n in model.graph if n.op_type == "If").attributes["then_branch"].as_graph()
    assert [n.op_type for n in branch].count("Cast") == 4  # a round trip after Mul and after Div


def test_emulation_inside_loop_matches_float16_accumulation(tmp_path):
    # acc_{i+1} = acc_i + x (fp16) for 2000 trips: fp16 stalls once acc's spacing exceeds 2*x.
    body = h.make_graph(
        [h.make_node("Add", ["acc_in", "x16"], ["acc_out"], name="acc_add"),
         h.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_id")],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("acc_in", T.FLOAT16, [1])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT16, [1])],
    )
    nodes = [
        h.make_node("Cast", ["x"], ["x16"], to=T.FLOAT16, name="cast_in"),
        h.make_node("Loop", ["trips", "", "acc0"], ["acc"], body=body, name="loop"),
        h.make_node("Cast", ["acc"], ["y"], to=T.FLOAT, name="cast_out"),
    ]
    graph = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1])], [h.make_tensor_value_info("y", T.FLOAT, [1])],
        [numpy_helper.from_array(np.int64(2000), "trips"), numpy_helper.from_array(np.float16([0]), "acc0")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 9
    path = str(tmp_path / "loop.onnx")
    onnx.save(model, path)
    x = np.float32([0.1])
    out, _, _ = _run_emulated(path, tmp_path, {"x": x})
    acc = np.float16(0)
    for _ in range(2000):
        acc = np.float16(acc + np.float16(x[0]))
    assert out["y"][0] == np.float32(acc)
    assert abs(out["y"][0] - 200.0) > 10  # float32 gives ~200: fp16 accumulation error is reproduced


def test_emulated_copy_of_external_data_model_is_written_with_external_data(tmp_path):
    _, conv = vm.mlp_pair(tmp_path, "fp16")
    proto = onnx.load(conv)
    ext = tmp_path / "ext"
    ext.mkdir()
    onnx.save(proto, str(ext / "m.onnx"), save_as_external_data=True, location="m.data", size_threshold=0)
    model = modelio.load(str(ext / "m.onnx"))
    assert modelio.has_external_data(model)
    assert modelio.wants_external(model, str(ext / "m.onnx"))
    emulation.emulate(model)
    path = modelio.save_derived(model, str(tmp_path), "emu", external=True)
    assert (tmp_path / "emu.data").stat().st_size > 0
    runner = runners.make_session(path, "emulated", runners.CPU, optimize=False)
    assert runner.run({"x": np.ones((2, 8), np.float32)})["logits"].shape == (2, 5)


def test_native_backend_wraps_bfloat16_graph_io(tmp_path):
    # A model with bf16 graph input and output (keep_io_types=False); Cast and Mul in float.
    nodes = [
        h.make_node("Cast", ["x"], ["xf"], to=T.FLOAT, name="up"),
        h.make_node("Mul", ["xf", "two"], ["m"], name="mul"),
        h.make_node("Cast", ["m"], ["y"], to=T.BFLOAT16, name="down"),
    ]
    graph = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", T.BFLOAT16, [3])], [h.make_tensor_value_info("y", T.BFLOAT16, [3])],
        [numpy_helper.from_array(np.float32([2.0]), "two")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 9
    conv = str(tmp_path / "bf16io.onnx")
    onnx.save(model, conv)
    ref_graph = h.make_graph(
        [h.make_node("Mul", ["x", "two"], ["y"], name="mul")], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [3])], [h.make_tensor_value_info("y", T.FLOAT, [3])],
        [numpy_helper.from_array(np.float32([2.0]), "two")],
    )
    ref_model = h.make_model(ref_graph, opset_imports=[h.make_opsetid("", 17)])
    ref_model.ir_version = 9
    ref = str(tmp_path / "ref.onnx")
    onnx.save(ref_model, ref)
    for backend in ("native", "emulate"):
        result = validate(ref, conv, ValidateOptions(backend=backend))
        assert result.passed and result.dtype == "bf16", backend
        assert result.outputs[0].worst.max_abs > 0  # the input really went through bf16


def test_progress_callback_counts_samples(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    calls = []
    validate(ref, conv, ValidateOptions(shapes=(("batch", (1,)),), samples=3, progress=lambda d, t: calls.append((d, t))))
    assert calls == [(1, 3), (2, 3), (3, 3)]


def test_emulation_rounds_the_outputs_of_onnxruntime_contrib_ops(tmp_path):
    """A fused op's output gets its type from onnxruntime's schema, so emulation rounds it (and what follows)."""
    from onnx import TensorProto, helper, numpy_helper

    import ampconv
    from ampconv.numerics import emulate as emulation
    from ampconv.numerics import modelio

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32), "w")
    bias = numpy_helper.from_array(np.zeros(8, np.float32), "bias")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("FastGelu", ["h", "bias"], ["g"], domain="com.microsoft", name="gelu"),
         helper.make_node("MatMul", ["g", "w"], ["y"], name="mm2")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])], [w, bias]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    src, dst = tmp_path / "m.onnx", tmp_path / "m.fp16.onnx"
    onnx.save(model, str(src))
    ampconv.convert(src, dst, ampconv.Config())
    converted = modelio.load(str(dst))
    stats = emulation.emulate(converted)
    assert stats.untyped == 0
    rounded = {n.inputs[0].name for n in converted.graph if n.op_type == "Cast"}
    assert any(name.startswith("g") for name in rounded)  # the FastGelu output is rounded
    result = ampconv.validate(src, dst, ampconv.ValidateOptions(backend="emulate"))
    assert not any("no inferable type" in note for note in result.notes)


def test_an_omitted_optional_output_is_left_alone(tmp_path):
    """LSTM with Y omitted (output name ""): once typed, emulation used to round it with a Cast of "" (invalid)."""
    import ampconv

    hidden, size = 3, 2
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("W", (1, 4 * hidden, size)), ("R", (1, 4 * hidden, hidden)))]
    node = h.make_node("LSTM", ["X", "W", "R"], ["", "Y_h"], hidden_size=hidden)
    graph = h.make_graph([node], "lstm", [h.make_tensor_value_info("X", T.FLOAT, [1, 2, size])],
                         [h.make_tensor_value_info("Y_h", T.FLOAT, [1, 2, hidden])], weights)
    ref, out = tmp_path / "lstm.onnx", tmp_path / "lstm16.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 14)]), ref)
    ampconv.convert(str(ref), str(out), ampconv.Config(level="O3"))
    model = modelio.load(str(out))
    emulation.emulate(model)
    assert not any(n.op_type == "Cast" and not n.inputs[0].name for n in model.graph)
    assert validate(str(ref), str(out), ValidateOptions(backend="emulate")).passed
