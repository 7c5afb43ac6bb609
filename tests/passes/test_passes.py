"""Rewrite passes: cleanup cases 1-4 (each with a negative), apply rules, fixed point."""

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import ampconv
from ampconv.passes.cleanup import cleanup
from ampconv.config import Config
from helpers import convert_text, elem_types, ops, run, save

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def load_ir(text):
    return ir.from_onnx_text(text)


def casts(model):
    return [n for g in model.graphs() for n in g if n.op_type == "Cast"]


def test_identity_cast_removed():
    model = load_ir(HEADER + """
    g (float16[2] x) => (float16[2] y) {
        c = Cast <to = 10> (x)
        y = Neg (c)
    }""")
    stats = cleanup(model)
    assert stats.identity == 1 and not casts(model)


def test_exact_round_trip_removed():
    model = load_ir(HEADER + """
    g (float16[2] x) => (float16[2] y) {
        up = Cast <to = 1> (x)
        down = Cast <to = 10> (up)
        y = Neg (down)
    }""")
    stats = cleanup(model)
    assert stats.round_trip == 1 and not casts(model)  # the bypassed pair is then dead


def test_lossy_pair_is_kept():
    # HIGH -> LOW -> HIGH rounds: never removed (negative case for case 2).
    model = load_ir(HEADER + """
    g (float[2] x) => (float[2] y) {
        down = Cast <to = 10> (x)
        up = Cast <to = 1> (down)
        y = Neg (up)
    }""")
    stats = cleanup(model)
    assert stats.removed == 0 and len(casts(model)) == 2


def test_duplicate_sibling_casts_merged():
    model = load_ir(HEADER + """
    g (float[2] x) => (float16[2] y) {
        a = Cast <to = 10> (x)
        b = Cast <to = 10> (x)
        y = Add (a, b)
    }""")
    stats = cleanup(model)
    assert stats.duplicate == 1 and len(casts(model)) == 1


def test_cast_producing_graph_output_keeps_public_name():
    from ampconv.reading.prepare import infer_types

    model = load_ir(HEADER + """
    g (float16[2] x) => (float16[2] y) {
        n = Neg (x)
        y = Cast <to = 10> (n)
    }""")
    infer_types(model)
    cleanup(model)
    assert not casts(model)
    assert model.graph.outputs[0].name == "y"
    assert model.graph[0].op_type == "Neg"


def test_nothing_to_do_leaves_model_unchanged():
    text = HEADER + """
    g (float[2] x) => (float16[2] y) {
        y = Cast <to = 10> (x)
    }"""
    model = load_ir(text)
    before = ir.to_proto(model).SerializeToString()
    stats = cleanup(model)
    assert stats.removed == 0
    assert ir.to_proto(model).SerializeToString() == before


def test_existing_cast_to_float_on_low_path_is_retargeted_or_removed(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        mm = MatMul (x, w)
        c = Cast <to = 1> (mm)
        y = MatMul (c, w)
    }""" % ", ".join(["1.0"] * 16)
    report, model = convert_text(tmp_path, text, level="O1")
    for cast in ops(model, "Cast"):
        to = cast.attribute[0].i
        assert elem_types(model)[cast.output[0]] == to  # no Cast whose `to` disagrees
    assert [c.input[0] for c in ops(model, "Cast")] == ["x", "y__fp16"]


def test_initializer_shared_by_low_and_high_consumers_duplicated_once(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y, float[2, 4] z) <float[4, 4] w = {%s}> {
        y = MatMul (x, w)
        z = Softmax (w2)
        w2 = Identity (w)
    }""" % ", ".join(["1.0"] * 16)
    # Identity before use keeps the graph valid in text order: fix order explicitly.
    text = text.replace("z = Softmax (w2)\n        w2 = Identity (w)", "w2 = Add (w, w)\n        z2 = Softmax (w2)\n        z = Slice (z2, s0, s1)")
    text = text.replace("<float[4, 4] w", "<int64[1] s0 = {0}, int64[1] s1 = {2}, float[4, 4] w")
    report, model = convert_text(tmp_path, text, level="O2", keep_fp32=("Add",))
    fates = {i["name"]: i["fate"] for i in report.initializers}
    assert fates["w"] == "duplicated"
    names = [t.name for t in model.graph.initializer]
    assert names.count("w") == 1 and names.count("w__fp16") == 1


def test_every_cast_left_is_on_a_boundary(tmp_path):

    from sample_models.build import build_all

    paths = build_all(tmp_path / "samples")
    for name, path in paths.items():
        for level in ("O1", "O2", "O3"):
            out = tmp_path / f"{name}.{level}.onnx"
            ampconv.convert(path, out, ampconv.Config(level=level, overwrite=True))
            model = ir.load(str(out))
            assert cleanup(model).removed == 0, (name, level)


def test_initializer_rounding_is_nearest_even(tmp_path):
    values = np.array([1.0 + 2**-11, 1.0 + 3 * 2**-11, 65504.0, -0.0, 1e-9, 7e4], np.float32)
    text = HEADER + """
    g (float[6] x) => (float[6] y) <float[6] k = {%s}> {
        y = Mul (x, k)
    }""" % ", ".join(repr(float(v)) for v in values)
    report, model = convert_text(tmp_path, text, level="O3", clamp=False, keep_io_types=False)
    # 7e4 pins the Mul (overflow) unless clamped: with clamp, the stored k is RNE + clamp
    # (7e4 -> 65504, and 1e-9, which would round to 0, raised to the smallest subnormal).
    report, model = convert_text(tmp_path, text, level="O3", clamp=True, keep_io_types=False)
    k = [t for t in model.graph.initializer if t.name == "k"][0]
    stored = onnx.numpy_helper.to_array(k)
    expected = np.where(values == np.float32(1e-9), np.float32(2.0**-24), np.clip(values, -65504, 65504))
    expected = expected.astype(np.float16)
    np.testing.assert_array_equal(stored.view(np.uint16), expected.view(np.uint16))
    assert np.signbit(stored[3])


def test_initializer_fate_record_is_its_asdict():
    import dataclasses

    from ampconv.passes.apply import InitializerFate

    fate = InitializerFate("w", "main", (3, 4), 48, "LOW", 24)
    assert fate.record() == dataclasses.asdict(fate)
    assert [f.name for f in dataclasses.fields(fate)] == list(fate.record())  # a new field must join the record



@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_small_initializers_cast_together_have_the_bits_of_one_by_one_casts(tmp_path, dtype):
    """The batched cast of small inline weights equals ``to_low`` tensor by tensor, typed-field ones included."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    import ampconv
    from ampconv.tensors.low_range import to_low

    rng = np.random.default_rng(3)
    weights = {f"w{i}": (rng.standard_normal(shape) * 10).astype(np.float32)
               for i, shape in enumerate([(4,), (3, 5), (1,), (2, 2, 2), (64,)])}
    inits = [numpy_helper.from_array(a, name) for name, a in weights.items()]
    weights["typed"] = rng.standard_normal(6).astype(np.float32)
    inits.append(helper.make_tensor("typed", onnx.TensorProto.FLOAT, [6], weights["typed"].tolist()))  # float_data
    # Each weight multiplies the input on its own, so the shapes need not broadcast together.
    nodes = [helper.make_node("Mul", ["x", name], [f"m_{name}"]) for name in weights]
    outputs = [helper.make_tensor_value_info(f"m_{name}", onnx.TensorProto.FLOAT, None) for name in weights]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
                              outputs, inits)
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(src))
    dst = tmp_path / "out.onnx"
    ampconv.convert(src, dst, ampconv.Config(level="O3", dtype=dtype, overwrite=True))
    written = {t.name: t for t in onnx.load(str(dst)).graph.initializer}
    for name, array in weights.items():
        expected = to_low(array, dtype)
        got = numpy_helper.to_array(written[name])
        assert got.shape == array.shape, name
        assert got.view(np.uint16).tolist() == expected.view(np.uint16).tolist(), name


def _weight_input_model(tmp_path):
    """y = MatMul(x, w) + b, with w an initializer the model also lists as a graph input (an old exporter's habit)."""
    rng = np.random.default_rng(3)
    w = rng.normal(0, 0.5, (4, 3)).astype(np.float32)
    b = rng.normal(0, 0.5, (3,)).astype(np.float32)
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         onnx.helper.make_node("Add", ["m", "b"], ["y"], name="add")],
        "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4]),
              onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [4, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    return save(model, tmp_path / "weight_input.onnx")


def test_a_weight_that_is_a_graph_input_takes_the_low_type_with_its_input(tmp_path):
    """A copy would not see what a caller feeds: the weight and its graph input are retyped in place."""
    src = _weight_input_model(tmp_path)
    dst = tmp_path / "out.onnx"
    report = ampconv.convert(src, dst, Config(overwrite=True))
    model = onnx.load(dst)
    assert [t.name for t in model.graph.initializer if t.name.startswith("w")] == ["w"]  # no w__fp16 copy
    declared = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    assert declared == {"x": onnx.TensorProto.FLOAT, "w": onnx.TensorProto.FLOAT16}
    assert any("also lists as graph inputs" in note and "'w'" in note for note in report.notes)
    assert "w" not in {d["name"] for d in report.interface}  # a weight, not part of the interface
    # The fed weight reaches the MatMul: the output reacts as the float32 model's does.
    x = np.random.default_rng(4).normal(0, 1, (2, 4)).astype(np.float32)
    w2 = np.full((4, 3), 0.25, np.float32)
    ref = run(src, {"x": x, "w": w2})[0]
    got = run(dst, {"x": x, "w": w2.astype(np.float16)})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-2, atol=1e-2)


def test_keep_io_types_naming_a_weight_input_keeps_it_float32_and_casts_it(tmp_path):
    """Negative: a weight input the user keeps stays float32; its LOW reader reads it through a Cast (no copy)."""
    src = _weight_input_model(tmp_path)
    dst = tmp_path / "out.onnx"
    report = ampconv.convert(src, dst, Config(overwrite=True, keep_io_types=("x", "w", "y")))
    model = onnx.load(dst)
    declared = {i.name: i.type.tensor_type.elem_type for i in model.graph.input}
    assert declared == {"x": onnx.TensorProto.FLOAT, "w": onnx.TensorProto.FLOAT}
    assert "w" in [c.input[0] for c in ops(model, "Cast")]
    assert not any("also lists as graph inputs" in note for note in report.notes)
    x = np.random.default_rng(4).normal(0, 1, (2, 4)).astype(np.float32)
    w2 = np.full((4, 3), 0.25, np.float32)
    np.testing.assert_allclose(run(dst, {"x": x, "w": w2})[0], run(src, {"x": x, "w": w2})[0], rtol=1e-2, atol=1e-2)
