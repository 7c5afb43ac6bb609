"""ampconv.writing.writer on its own: streaming writes, progress, source release, inline/external.

The converter is not involved: a stand-in (``bench/_io_standin.py``) turns
every float32 initializer into a float16 ``ir.LazyTensor`` with a Cast back, the
shape of what the converter's initializer pass produces. The written model is
checked with ``ampconv.runtime.loadcheck.check_written``, which has its test here too.
"""

from __future__ import annotations

import hashlib
import pathlib

import numpy as np
import onnx
import onnx_ir as ir
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

from ampconv.writing import writer
from ampconv.tensors.chunks import tensor_sources
from ampconv.errors import ConversionError, OutputError
from ampconv.reading.load import load_model
from ampconv.runtime.loadcheck import check_written
from ampconv.writing.outputs import publish, staging_dir
from ampconv.writing.writer import write_model
from bench import _io_standin as standin
from sample_models import gpt

TINY = gpt.GptSpec(layers=2, hidden=64, vocab=500, max_positions=64)


def _build(tmp_path, layout="single", spec=TINY, name="gpt"):
    return gpt.build(tmp_path / layout, spec, layout=layout, seed=1, name=name)


def _hashes(folder: pathlib.Path):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


def _fp32_weights(path: pathlib.Path):
    model = onnx.load(str(path))
    return {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer
            if t.data_type == onnx.TensorProto.FLOAT}


def _convert_with_io(src: pathlib.Path, dst: pathlib.Path, **write_kwargs):
    model = load_model(src)
    standin.convert_initializers(model)
    with staging_dir(dst) as tmp:
        staged = tmp / dst.name
        note = write_model(model, staged, external=write_kwargs.pop("external", True), **write_kwargs)
        check_written(staged, runtime=True)
        publish(tmp, dst)
    return model, note


@pytest.mark.parametrize("layout", gpt.LAYOUTS)
def test_every_layout_round_trips_with_rne_values(tmp_path, layout):
    src = _build(tmp_path, layout)
    before = _hashes(src.parent)
    originals = _fp32_weights(src)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    dst = out_dir / "gpt.fp16.onnx"
    _convert_with_io(src, dst)
    assert _hashes(src.parent) == before  # input untouched
    assert sorted(p.name for p in out_dir.iterdir()) == ["gpt.fp16.onnx", "gpt.fp16.onnx.data"]
    converted = onnx.load(str(dst))
    got = {t.name[: -len("_fp16")]: onnx.numpy_helper.to_array(t) for t in converted.graph.initializer
           if t.name.endswith("_fp16")}
    assert got.keys() == originals.keys()
    for name, arr in originals.items():
        assert got[name].dtype == np.float16
        np.testing.assert_array_equal(got[name].view(np.uint16), arr.astype(np.float16).view(np.uint16))
    ort = pytest.importorskip("onnxruntime")
    feeds = {"input_ids": np.array([[1, 2, 3, 4]], np.int64)}
    ref = ort.InferenceSession(str(src), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    out = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(out, ref, atol=2e-2)


def test_progress_reports_bytes_and_completes(tmp_path):
    src = _build(tmp_path)
    calls = []
    model, _ = _convert_with_io(src, tmp_path / "o.onnx", progress=lambda d, t: calls.append((d, t)))
    total = calls[0][1]
    assert calls[0] == (0, total)
    assert calls[-1] == (total, total)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert {t for _, t in calls} == {total}
    # total = bytes of everything that went to the data file
    assert total == (tmp_path / "o.onnx.data").stat().st_size
    assert len(calls) > 5


def test_sources_are_released_and_model_restored(tmp_path):
    src = _build(tmp_path)
    model = load_model(src)
    standin.convert_initializers(model)
    lazies = [v.const_value for v in model.graph.initializers.values() if isinstance(v.const_value, ir.LazyTensor)]
    sources = [s for t in lazies for s in tensor_sources(t)]
    assert len(sources) >= 10  # every external weight of the model
    with staging_dir(tmp_path / "o.onnx") as tmp:
        write_model(model, tmp / "o.onnx", external=True)
    assert all(isinstance(s, ir.ExternalTensor) and s.raw is None for s in sources if s.nbytes > 1024)
    # The model's tensors are the same objects as before the save.
    assert [v.const_value for v in model.graph.initializers.values()
            if isinstance(v.const_value, ir.LazyTensor)] == lazies


def test_shared_source_parallel_write(tmp_path):
    """Two lazy tensors reading one mapped tensor, written by 4 threads: no race, right values."""
    src = _build(tmp_path)
    model = load_model(src)
    wte = model.graph.initializers["wte"]
    ext = wte.const_value
    for i in range(6):
        lazy = standin.lazy_fp16(ext)
        lazy.name = f"copy{i}"
        model.graph.register_initializer(ir.Value(name=f"copy{i}", const_value=lazy,
                                                  type=ir.TensorType(ir.DataType.FLOAT16), shape=ext.shape))
    dst = tmp_path / "o.onnx"
    with staging_dir(dst) as tmp:
        write_model(model, tmp / dst.name, external=True, max_workers=4)
        publish(tmp, dst)
    out = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(dst)).graph.initializer}
    expected = _fp32_weights(src)["wte"]
    for i in range(6):
        np.testing.assert_array_equal(out[f"copy{i}"], expected.astype(np.float16))
    np.testing.assert_array_equal(out["wte"], expected)


def test_inline_over_limit_switches_to_external(tmp_path, monkeypatch):
    src = _build(tmp_path, "inline")
    monkeypatch.setattr(writer, "INLINE_WEIGHT_LIMIT", 1000)  # stands in for 1.8 GB
    dst = tmp_path / "o.onnx"
    _, note = _convert_with_io(src, dst, external=False)
    assert note and "external data o.onnx.data" in note
    assert (tmp_path / "o.onnx.data").stat().st_size > 0


def test_inline_under_limit_stays_inline(tmp_path):
    src = _build(tmp_path, "inline")
    dst = tmp_path / "o.onnx"
    _, note = _convert_with_io(src, dst, external=False)
    assert note is None
    assert not (tmp_path / "o.onnx.data").exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_while_writing_leaves_nothing(tmp_path, workers):
    src = _build(tmp_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    model = load_model(src)
    standin.convert_initializers(model)
    seen = []

    def interrupt(done, total):
        seen.append(done)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with staging_dir(out_dir / "o.onnx") as tmp:
            write_model(model, tmp / "o.onnx", external=True, progress=interrupt, max_workers=workers)
    assert list(out_dir.iterdir()) == []


def test_disk_error_becomes_output_error(tmp_path, monkeypatch):
    src = _build(tmp_path)
    model = load_model(src)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ir, "save", full)
    with pytest.raises(OutputError, match="disk full"):
        write_model(model, tmp_path / "o.onnx", external=True)


def test_check_written_rejects_broken_model(tmp_path):
    bad = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [2])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    path = tmp_path / "bad.onnx"
    onnx.save(bad, str(path))
    with pytest.raises(ConversionError):
        check_written(path, runtime=True)


def test_inline_save_tracks_big_and_mapped_tensors_only(tmp_path):
    """Small in-memory tensors get no stand-in (thousands of them on big graphs); the rest keep the tracking."""
    small = ir.Value(name="small", const_value=ir.Tensor(np.ones(8, np.float32), name="small"))
    big = ir.Value(name="big", const_value=ir.Tensor(np.ones(4096, np.float32), name="big"))
    raw = tmp_path / "w.bin"
    raw.write_bytes(np.arange(4, dtype=np.float32).tobytes())
    mapped_tensor = ir.ExternalTensor("w.bin", 0, 16, ir.DataType.FLOAT, shape=ir.Shape([4]), name="mapped",
                                      base_dir=str(tmp_path))
    mapped = ir.Value(name="mapped", const_value=mapped_tensor)
    graph = ir.Graph([], [small, big, mapped], nodes=[], initializers=[small, big, mapped],
                     opset_imports={"": 17}, name="g")
    model = ir.Model(graph, ir_version=8)
    inline = writer._WriteTracker(model, external=False, progress=None)
    assert [v.name for v, _, _ in inline._values] == ["big", "mapped"]
    external = writer._WriteTracker(model, external=True, progress=None)
    assert [v.name for v, _, _ in external._values] == ["big"]  # exactly what goes to the data file
    calls = []
    write_model(model, tmp_path / "o.onnx", external=False, progress=lambda d, t: calls.append((d, t)))
    assert calls[0] == (0, 4096 * 4 + 16) and calls[-1] == (4096 * 4 + 16, 4096 * 4 + 16)
    written = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "o.onnx")).graph.initializer}
    assert written["small"].tolist() == [1.0] * 8 and written["mapped"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert model.graph.initializers["big"].const_value is big.const_value  # restored after the save


def test_the_output_declares_only_the_value_info_its_input_declared(tmp_path):
    """Inferred types of intermediate values are not written: a converted file never grows by them."""
    import ampconv
    from onnx import helper

    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("Tanh", ["r"], ["y"], name="tanh")],
        "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
        [onnx.numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")],
        value_info=[helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, [2, 4])],
    ), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    written = onnx.load(str(tmp_path / "out.onnx"))
    declared = {v.name: v.type.tensor_type.elem_type for v in written.graph.value_info}
    assert declared == {"r": onnx.TensorProto.FLOAT16}  # the input's own, with its new type; not h, not w
    inferred = onnx.shape_inference.infer_shapes(written)
    assert {v.name for v in inferred.graph.value_info} >= {"h", "r"}  # nothing is lost: inference derives them


def test_inline_save_writes_what_onnx_ir_writes(tmp_path, monkeypatch):
    """The inline fast path (no onnx.save_model walk) gives ir.save's bytes; a text extension keeps its format."""
    src = _build(tmp_path, layout="inline")
    model = load_model(src)
    write_model(model, tmp_path / "fast.onnx", external=False)
    with monkeypatch.context() as patch:
        patch.setattr(writer, "_save_inline", lambda model, path: ir.save(model, str(path)))
        write_model(model, tmp_path / "reference.onnx", external=False)
    assert (tmp_path / "fast.onnx").read_bytes() == (tmp_path / "reference.onnx").read_bytes()
    write_model(model, tmp_path / "text.json", external=False)
    assert (tmp_path / "text.json").read_bytes().lstrip().startswith(b"{")  # JSON, as ir.save writes it
