"""Every input form, and every bad input named in one clear UsageError."""

import numpy as np
import pytest
import validate_models as vm
from onnx import numpy_helper

from ampconv.errors import ModelLoadError, UsageError
from ampconv.validation import ValidateOptions, parse_shape, validate
from ampconv.core import shapespec
from ampconv.numerics import modelio
from ampconv.validation import inputs as inputs_mod
from ampconv.validation.render import render
from ampconv_cli.errors import flag_of


@pytest.fixture()
def multi(tmp_path):
    return vm.multi_input_pair(tmp_path)


def _good(batch=2, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((batch, 3)).astype(np.float32),
        "ids": rng.integers(0, 4, batch).astype(np.int64),
        "mask": rng.integers(0, 2, (batch, 3)).astype(bool),
    }


def test_npz_file(tmp_path, multi):
    path = tmp_path / "one.npz"
    np.savez(path, **_good())
    result = validate(*multi, ValidateOptions(inputs=(str(path),)))
    assert result.passed and not result.random_inputs
    assert result.input_sources == (str(path),)


def test_npz_folder_gives_one_sample_per_file(tmp_path, multi):
    folder = tmp_path / "samples"
    folder.mkdir()
    for i in range(3):
        np.savez(folder / f"s{i}.npz", **_good(batch=i + 1, seed=i))
    result = validate(*multi, ValidateOptions(inputs=(str(folder),)))
    assert result.samples == 3 and result.passed
    assert len(result.outputs[0].per_sample) == 3


def _write_test_set(folder, sample, names=True):
    folder.mkdir(parents=True)
    for i, name in enumerate(["x", "ids", "mask"]):
        tensor = numpy_helper.from_array(sample[name], name if names else "")
        (folder / f"input_{i}.pb").write_bytes(tensor.SerializeToString())


def test_test_data_folders_model_dir_and_single_set(tmp_path, multi):
    model_dir = tmp_path / "model"
    _write_test_set(model_dir / "test_data_set_0", _good(seed=1))
    _write_test_set(model_dir / "test_data_set_1", _good(seed=2), names=False)  # by position
    result = validate(*multi, ValidateOptions(inputs=(str(model_dir),)))
    assert result.samples == 2 and result.passed
    single = validate(*multi, ValidateOptions(inputs=(str(model_dir / "test_data_set_1"),)))
    assert single.samples == 1 and single.passed


def test_random_inputs_with_shape_are_flagged_and_seeded(multi):
    opts = ValidateOptions(shapes=(("batch", (4,)),), samples=2, seed=7)
    result = validate(*multi, opts)
    assert result.random_inputs and result.samples == 2
    assert any("random" in n for n in result.notes)
    assert result.outputs[0].shape == (4, 3)
    again = validate(*multi, opts)
    assert again.outputs[0].worst == result.outputs[0].worst


def test_random_values_per_kind(tmp_path, multi):
    model = modelio.load(multi[0])
    specs = modelio.declared_inputs(model)
    bounds = inputs_mod.integer_bounds(model)
    assert bounds == {"ids": 4}  # Gather into a 4-row table
    s = inputs_mod.random_samples(specs, {"x": (5, 3), "batch": (5,)}, 1, 0, bounds).samples[0]
    assert s["x"].dtype == np.float32 and s["x"].shape == (5, 3)
    assert s["ids"].dtype == np.int64 and s["ids"].min() >= 0 and s["ids"].max() < 4
    assert s["mask"].dtype == bool and s["mask"].shape == (5, 3)


def test_whole_input_shape_and_symbol_forms():
    spec = modelio.InputSpec("x", modelio.ir.DataType.FLOAT, ("batch", 3))
    assert shapespec.resolve_shape(spec, {"x": (2, 3)}) == (2, 3)
    assert shapespec.resolve_shape(spec, {"batch": (6,)}) == (6, 3)
    with pytest.raises(UsageError, match="axis 1 is 4, the model fixes it to 3"):
        shapespec.resolve_shape(spec, {"x": (2, 4)})
    with pytest.raises(UsageError, match="rank 3 given"):
        shapespec.resolve_shape(spec, {"x": (2, 3, 1)})


def test_an_unset_symbolic_dimension_is_one_with_a_note_per_symbol(multi):
    """``batch`` ties x, ids and mask: all get 1, and one note names the symbol and the inputs sharing it."""
    result = validate(*multi)
    assert result.passed
    notes = [n for n in result.notes if "dimension 'batch'" in n]
    assert notes == ["dimension 'batch' (input x, ids, mask) is not set: random data uses size 1 there; "
                     "pass shapes={'batch': N} for the size the model will see"]  # a Python caller's words
    assert "pass --shape batch:N for the size the model will see" in render(result, "text", flag_of)
    assert not any("dimension 'batch'" in n for n in validate(*multi, ValidateOptions(shapes=(("batch", (3,)),))).notes)


def test_unknown_shape_name(multi):
    with pytest.raises(UsageError, match="shapes entry bogus: no input or dimension"):
        validate(*multi, ValidateOptions(shapes=(("batch", (1,)), ("bogus", (1,)))))


@pytest.mark.parametrize(
    "text, expected",
    [("x:1x3x224x224", ("x", (1, 3, 224, 224))), ("batch:8", ("batch", (8,))), ("a:b:2X3", ("a:b", (2, 3)))],
)
def test_parse_shape(text, expected):
    assert parse_shape(text) == expected


@pytest.mark.parametrize("text", ["x", "x:", ":3", "x:1xa", "x:-1"])
def test_bad_shape_syntax(text):
    with pytest.raises(UsageError, match="bad shape"):
        parse_shape(text)


def _bad(tmp_path, multi, **changes):
    sample = _good()
    sample.update(changes)
    sample = {k: v for k, v in sample.items() if v is not None}
    path = tmp_path / "bad.npz"
    np.savez(path, **sample)
    validate(*multi, ValidateOptions(inputs=(str(path),)))


def test_missing_input_name(tmp_path, multi):
    with pytest.raises(UsageError, match=r"bad.npz: missing input 'mask' \(model inputs: x, ids, mask\)"):
        _bad(tmp_path, multi, mask=None)


def test_unknown_input_name(tmp_path, multi):
    with pytest.raises(UsageError, match="bad.npz: unknown input 'extra'"):
        _bad(tmp_path, multi, extra=np.zeros(2))


def test_wrong_dtype(tmp_path, multi):
    with pytest.raises(UsageError, match="input 'ids' has dtype float32, the model declares int64"):
        _bad(tmp_path, multi, ids=np.zeros(2, np.float32))


def test_wrong_rank(tmp_path, multi):
    with pytest.raises(UsageError, match="input 'x' has rank 3 .* declares rank 2"):
        _bad(tmp_path, multi, x=np.zeros((2, 3, 1), np.float32))


def test_wrong_fixed_dimension(tmp_path, multi):
    with pytest.raises(UsageError, match=r"input 'x' has shape \[2, 4\], the model declares \[batch, 3\]"):
        _bad(tmp_path, multi, x=np.zeros((2, 4), np.float32))


def test_bad_npz_path(tmp_path, multi):
    with pytest.raises(UsageError, match="nope.npz: no such inputs file or folder"):
        validate(*multi, ValidateOptions(inputs=(str(tmp_path / "nope.npz"),)))
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"not a zip")
    with pytest.raises(UsageError, match="corrupt.npz: cannot read as .npz"):
        validate(*multi, ValidateOptions(inputs=(str(corrupt),)))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError, match="no .npz files or test_data_set_"):
        validate(*multi, ValidateOptions(inputs=(str(empty),)))


def test_missing_or_corrupt_model_file(tmp_path, multi):
    with pytest.raises(ModelLoadError, match="missing.onnx: no such model file"):
        validate(multi[0], str(tmp_path / "missing.onnx"))
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00garbage")
    with pytest.raises(ModelLoadError, match="junk.onnx: not a readable ONNX model"):
        validate(str(junk), multi[1])


def test_models_with_different_inputs_are_a_usage_error(tmp_path, multi):
    ref, _ = vm.overflow_pair(tmp_path)
    with pytest.raises(UsageError, match="differ from the reference"):
        validate(ref, multi[1])


def test_options_are_checked():
    with pytest.raises(UsageError, match="unknown backend"):
        ValidateOptions(backend="gpu")
    with pytest.raises(UsageError, match="samples must be at least 1"):
        ValidateOptions(samples=0)
    with pytest.raises(UsageError, match="rtol must be"):
        ValidateOptions(rtol=-1.0)
    assert ValidateOptions(shapes={"x": [1, 2]}).shapes == (("x", (1, 2)),)


def test_random_ids_stay_inside_a_fused_embedding_table():
    """onnxruntime's EmbedLayerNormalization reads its tables by input_ids and segment_ids (after a Cast to
    int32, as its transformer optimizer writes it): random ids are drawn below each table's size."""
    import onnx_ir as ir
    from onnx import TensorProto, helper, numpy_helper

    from ampconv.validation.inputs import integer_bounds

    tables = [numpy_helper.from_array(np.zeros((n, 4), np.float32), name)
              for n, name in ((7, "word"), (5, "pos"), (2, "segment"))]
    norms = [numpy_helper.from_array(np.ones(4, np.float32), "gamma"), numpy_helper.from_array(np.zeros(4, np.float32), "beta")]
    graph = helper.make_graph(
        [helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32),
         helper.make_node("Cast", ["token_type_ids"], ["seg32"], to=TensorProto.INT32),
         helper.make_node("EmbedLayerNormalization", ["ids32", "seg32", "word", "pos", "segment", "gamma", "beta"],
                          ["y", "mask_index"], domain="com.microsoft")],
        "g", [helper.make_tensor_value_info(n, TensorProto.INT64, [1, 3]) for n in ("input_ids", "token_type_ids")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])], tables + norms)
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                                   helper.make_opsetid("com.microsoft", 1)]))
    assert integer_bounds(model) == {"input_ids": 7, "token_type_ids": 2}


def _single(path, op, in_type, in_shape, out_shape, out_type=None):
    """A one-node model ``x -> op -> y``: enough to share names with an unrelated model."""
    import onnx
    from onnx import TensorProto, helper

    out_type = TensorProto.FLOAT if out_type is None else out_type
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=out_type)] if op == "Cast" else [helper.make_node(op, ["x"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", in_type, in_shape)],
        [helper.make_tensor_value_info("y", out_type, out_shape)],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


def test_unrelated_models_sharing_names_are_a_usage_error_not_a_runtime_error(tmp_path):
    """Two exports named x -> y but of another rank, size or element kind: refused before any session runs."""
    from onnx import TensorProto as T

    ref = _single(tmp_path / "mlp.onnx", "Relu", T.FLOAT, [1, 4], [1, 4])
    cnn = _single(tmp_path / "cnn.onnx", "GlobalAveragePool", T.FLOAT, [1, 3, 8, 8], [1, 3, 1, 1])
    wide = _single(tmp_path / "wide.onnx", "Relu", T.FLOAT, [1, 5], [1, 5])
    ids = _single(tmp_path / "ids.onnx", "Cast", T.INT64, [1, 4], [1, 4])
    cases = [(cnn, "input 'x' has rank 4, rank 2 in the reference"), (wide, "input 'x' has 5 at axis 1, 4"),
             (ids, "input 'x' is int64, float")]
    for other, message in cases:
        with pytest.raises(UsageError, match="not one model before and after conversion") as caught:
            validate(ref, other)
        assert message in str(caught.value) and str(other) in str(caught.value)


def test_a_converted_interface_may_lower_floats_and_fix_symbolic_dims(tmp_path):
    """Negative: float32 -> float16 I/O and a fixed size for a symbolic dimension are the same model."""
    from onnx import TensorProto as T

    ref = _single(tmp_path / "ref.onnx", "Relu", T.FLOAT, ["batch", 4], ["batch", 4])
    half = _single(tmp_path / "half.onnx", "Relu", T.FLOAT16, [2, 4], [2, 4], out_type=T.FLOAT16)
    result = validate(ref, half, ValidateOptions(shapes=(("batch", (2,)),)))
    assert result.passed


def test_a_corrected_output_shape_is_not_an_unrelated_model(tmp_path):
    """The converter writes the inferred shape where a declared output shape is wrong: still the same model."""
    from onnx import TensorProto as T

    ref = _single(tmp_path / "ref.onnx", "Relu", T.FLOAT, [1, 4], [1, 4, 1])  # output declared rank 3: wrong
    conv = _single(tmp_path / "conv.onnx", "Relu", T.FLOAT, [1, 4], [1, 4])
    assert validate(ref, conv).passed
    ints = _single(tmp_path / "ints.onnx", "Cast", T.FLOAT, [1, 4], [1, 4], out_type=T.INT64)
    with pytest.raises(UsageError, match="output 'y' is int64, float"):
        validate(ref, ints)
