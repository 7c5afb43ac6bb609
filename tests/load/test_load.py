"""ampconv.reading.load on its own: lazy loading and the checks that refuse a model at once."""

from __future__ import annotations

import pathlib

import onnx
import onnx_ir as ir
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

from ampconv.errors import ModelLoadError
from ampconv.reading.load import external_data_files, external_tensors, load_model, weight_bytes
from helpers import build_tiny_gpt, tiny_gpt_spec
from sample_models import gpt

TINY = tiny_gpt_spec()
_build = build_tiny_gpt


def test_load_is_lazy_and_lists_data_files(tmp_path):
    src = _build(tmp_path)
    model = load_model(src)
    tensors = list(external_tensors(model))
    assert tensors and all(t.raw is None for t in tensors)  # nothing mapped yet
    assert external_data_files(model) == [(src.parent / "gpt.onnx.data").resolve()]
    assert weight_bytes(model) == gpt.weight_bytes(TINY) + sum(
        a.nbytes for a in _small_consts(src))


def _small_consts(src):
    # The graph's own small constants (shape values, scales) are initializers too.
    model = onnx.load(str(src), load_external_data=False)
    names = {n for n, _ in gpt.weight_shapes(TINY)}
    return [onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name not in names]


def test_missing_data_file_names_tensor_and_file(tmp_path):
    src = _build(tmp_path)
    (src.parent / "gpt.onnx.data").unlink()
    with pytest.raises(ModelLoadError, match=r"gpt\.onnx\.data.*'wte'.*missing"):
        load_model(src)


def test_truncated_data_file_names_tensor_and_file(tmp_path):
    src = _build(tmp_path)
    data = src.parent / "gpt.onnx.data"
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size - 10)
    with pytest.raises(ModelLoadError, match=r"gpt\.onnx\.data is truncated: tensor 'h\.1\.mlp\.c_proj\.weight'"):
        load_model(src)


def test_missing_shard_names_the_shard(tmp_path):
    src = gpt.build(tmp_path, TINY, layout="shards", shard_mb=0.1, name="gpt")
    shards = sorted(tmp_path.glob("gpt-*.data"))
    assert len(shards) > 2
    shards[-1].unlink()
    with pytest.raises(ModelLoadError, match=shards[-1].name):
        load_model(src)


def test_data_outside_model_folder_is_refused(tmp_path):
    src = _build(tmp_path)
    proto = onnx.load(str(src), load_external_data=False)
    for t in proto.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../elsewhere.data"
    (tmp_path / "elsewhere.data").write_bytes((src.parent / "gpt.onnx.data").read_bytes())
    onnx.save(proto, str(src))
    with pytest.raises(ModelLoadError, match="outside the model's folder"):
        load_model(src)


def test_not_onnx_and_empty_files(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        load_model(empty)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01not a model at all" * 10)
    with pytest.raises(ModelLoadError, match="junk.onnx"):
        load_model(junk)
    with pytest.raises(ModelLoadError, match="no such file"):
        load_model(tmp_path / "absent.onnx")


def test_inferred_types_of_a_flat_graph_come_without_shapes(tmp_path):
    """Types are what planning reads; inferred shapes are not added (nor written to the output's value_info)."""
    from ampconv.reading.load import INFERRED_META_KEY
    from helpers import model_from_text, save

    src = save(model_from_text("""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 4] x) => (float[2, 4] y) { h = Relu(x) y = Sigmoid(h) }
    """), tmp_path / "flat.onnx")
    model = load_model(src, infer_types=True)
    hidden = next(iter(model.graph)).outputs[0]
    assert model.meta.get(INFERRED_META_KEY) is True
    assert hidden.dtype == ir.DataType.FLOAT and hidden.shape is None


def test_a_graph_with_control_flow_keeps_inferred_shapes(tmp_path):
    """If/Loop/Scan: the inferred model is read whole, so body and loop values keep exact types and shapes."""
    from helpers import model_from_text, save

    src = save(model_from_text("""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 4] x, bool c) => (float[2, 4] y) {
            h = Relu(x)
            y = If (c) <then_branch = t () => (float[2, 4] a) { a = Sigmoid(h) },
                        else_branch = e () => (float[2, 4] b) { b = Tanh(h) }>
        }
    """), tmp_path / "cf.onnx")
    model = load_model(src, infer_types=True)
    hidden = next(iter(model.graph)).outputs[0]
    assert hidden.dtype == ir.DataType.FLOAT and hidden.shape is not None and list(hidden.shape) == [2, 4]


def test_no_inference_means_no_types_are_claimed(tmp_path):
    from ampconv.reading.load import INFERRED_META_KEY
    from helpers import model_from_text, save

    src = save(model_from_text("""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 4] x) => (float[2, 4] y) { h = Relu(x) y = Sigmoid(h) }
    """), tmp_path / "plain.onnx")
    model = load_model(src)
    assert INFERRED_META_KEY not in model.meta and next(iter(model.graph)).outputs[0].type is None


def test_weight_bytes_counts_every_form_of_constant(tmp_path):
    """Initializers, Constant tensors and Constant value_float(s)/value_int(s) all count as weights."""
    import ampconv
    from helpers import model_from_text, save

    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (float[3] y, int64[2] k, float s) {
        c = Constant <value_floats = [1.0, 2.0, 3.0]> ()
        t = Constant <value = float[3] {1.0, 2.0, 3.0}> ()
        s = Constant <value_float = 0.5> ()
        k = Constant <value_ints = [1, 2]> ()
        a = Add(x, c)
        y = Mul(a, t)
    }
    """
    path = save(model_from_text(text), tmp_path / "m.onnx")
    assert weight_bytes(load_model(path)) == 3 * 4 + 3 * 4 + 4 + 2 * 8
    report = ampconv.convert(path, tmp_path / "o.onnx", ampconv.Config(level="O3", overwrite=True))
    assert report.weight_bytes_after < report.weight_bytes_before  # the float constants went LOW: the line says so


def test_weights_and_casts_counts_both_in_one_walk():
    from ampconv.reading.load import weights_and_casts

    model = ir.serde.deserialize_model(onnx.parser.parse_model("""
        <ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
        g (float[2] x) => (float[2] y) <float[3] w = {1, 2, 3}> {
            c = Constant <value_floats = [1.0, 2.0]> ()
            a = Cast <to = 10> (x)
            b = custom.Cast (a)
            y = Cast <to = 1> (b)
        }"""))
    # 12 bytes of initializer + 8 of Constant; the custom-domain Cast is not onnx's
    assert weights_and_casts(model) == (20, 2)
    assert weight_bytes(model) == 20
