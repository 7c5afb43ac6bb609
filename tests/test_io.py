"""ampconv.io on its own: lazy loading checks, streaming writes, output safety.

The converter is not involved: a stand-in (``bench/_io_standin.py``) turns
every float32 initializer into a float16 ``ir.LazyTensor`` with a Cast back, the
shape of what the converter's initializer pass produces.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ampconv import io  # noqa: E402
from ampconv.errors import ConversionError, ModelLoadError, OutputError  # noqa: E402
from bench import _io_standin as standin  # noqa: E402
from sample_models import gpt  # noqa: E402

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
    model = io.load_model(src)
    standin.convert_initializers(model)
    with io.staging_dir(dst) as tmp:
        staged = tmp / dst.name
        note = io.write_model(model, staged, external=write_kwargs.pop("external", True), **write_kwargs)
        io.check_written(staged, runtime=True)
        io.publish(tmp, dst)
    return model, note


# --- loading ---------------------------------------------------------------


def test_load_is_lazy_and_lists_data_files(tmp_path):
    src = _build(tmp_path)
    model = io.load_model(src)
    tensors = list(io.external_tensors(model))
    assert tensors and all(t.raw is None for t in tensors)  # nothing mapped yet
    assert io.external_data_files(model) == [(src.parent / "gpt.onnx.data").resolve()]
    assert io.weight_bytes(model) == gpt.weight_bytes(TINY) + sum(
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
        io.load_model(src)


def test_truncated_data_file_names_tensor_and_file(tmp_path):
    src = _build(tmp_path)
    data = src.parent / "gpt.onnx.data"
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size - 10)
    with pytest.raises(ModelLoadError, match=r"gpt\.onnx\.data is truncated: tensor 'h\.1\.mlp\.c_proj\.weight'"):
        io.load_model(src)


def test_missing_shard_names_the_shard(tmp_path):
    src = gpt.build(tmp_path, TINY, layout="shards", shard_mb=0.1, name="gpt")
    shards = sorted(tmp_path.glob("gpt-*.data"))
    assert len(shards) > 2
    shards[-1].unlink()
    with pytest.raises(ModelLoadError, match=shards[-1].name):
        io.load_model(src)


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
        io.load_model(src)


def test_not_onnx_and_empty_files(tmp_path):
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="empty"):
        io.load_model(empty)
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01not a model at all" * 10)
    with pytest.raises(ModelLoadError, match="junk.onnx"):
        io.load_model(junk)
    with pytest.raises(ModelLoadError, match="no such file"):
        io.load_model(tmp_path / "absent.onnx")


# --- writing ---------------------------------------------------------------


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
    model = io.load_model(src)
    standin.convert_initializers(model)
    lazies = [v.const_value for v in model.graph.initializers.values() if isinstance(v.const_value, ir.LazyTensor)]
    sources = [s for t in lazies for s in io.tensor_sources(t)]
    assert len(sources) >= 10  # every external weight of the model
    with io.staging_dir(tmp_path / "o.onnx") as tmp:
        io.write_model(model, tmp / "o.onnx", external=True)
    assert all(isinstance(s, ir.ExternalTensor) and s.raw is None for s in sources if s.nbytes > 1024)
    # The model's tensors are the same objects as before the save.
    assert [v.const_value for v in model.graph.initializers.values()
            if isinstance(v.const_value, ir.LazyTensor)] == lazies


def test_sources_found_in_closures(tmp_path):
    src = _build(tmp_path)
    model = io.load_model(src)
    ext = next(io.external_tensors(model))
    lazy = ir.LazyTensor(lambda: ir.tensor(ext.numpy().astype(np.float16)), dtype=ir.DataType.FLOAT16,
                         shape=ext.shape)
    assert io.tensor_sources(lazy) == [ext]
    assert io.tensor_sources(ext) == [ext]
    assert io.tensor_sources(ir.tensor(np.zeros(3, np.float32))) == []


def test_shared_source_parallel_write(tmp_path):
    """Two lazy tensors reading one mapped tensor, written by 4 threads: no race, right values."""
    src = _build(tmp_path)
    model = io.load_model(src)
    wte = model.graph.initializers["wte"]
    ext = wte.const_value
    for i in range(6):
        lazy = standin.lazy_fp16(ext)
        lazy.name = f"copy{i}"
        model.graph.register_initializer(ir.Value(name=f"copy{i}", const_value=lazy,
                                                  type=ir.TensorType(ir.DataType.FLOAT16), shape=ext.shape))
    dst = tmp_path / "o.onnx"
    with io.staging_dir(dst) as tmp:
        io.write_model(model, tmp / dst.name, external=True, max_workers=4)
        io.publish(tmp, dst)
    out = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(dst)).graph.initializer}
    expected = _fp32_weights(src)["wte"]
    for i in range(6):
        np.testing.assert_array_equal(out[f"copy{i}"], expected.astype(np.float16))
    np.testing.assert_array_equal(out["wte"], expected)


def test_inline_over_limit_switches_to_external(tmp_path, monkeypatch):
    src = _build(tmp_path, "inline")
    monkeypatch.setattr(io, "INLINE_WEIGHT_LIMIT", 1000)  # stands in for 1.8 GB
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
    model = io.load_model(src)
    standin.convert_initializers(model)
    seen = []

    def interrupt(done, total):
        seen.append(done)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with io.staging_dir(out_dir / "o.onnx") as tmp:
            io.write_model(model, tmp / "o.onnx", external=True, progress=interrupt, max_workers=workers)
    assert list(out_dir.iterdir()) == []


def test_disk_error_becomes_output_error(tmp_path, monkeypatch):
    src = _build(tmp_path)
    model = io.load_model(src)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ir, "save", full)
    with pytest.raises(OutputError, match="disk full"):
        io.write_model(model, tmp_path / "o.onnx", external=True)


# --- output paths ------------------------------------------------------------


def test_output_equal_to_input_or_its_data(tmp_path):
    src = _build(tmp_path)
    model = io.load_model(src)
    with pytest.raises(OutputError, match="is the input model"):
        io.check_output_path(src, src, model, overwrite=True)
    with pytest.raises(OutputError, match="external data file"):
        io.check_output_path(src, src.parent / "gpt.onnx.data", model, overwrite=True)
    # gpt.onnx.data is what an output named "gpt.onnx" would write: same file as the input's
    twin = tmp_path / "gpt.onnx"
    twin.symlink_to(src)
    with pytest.raises(OutputError, match="is the input model"):
        io.check_output_path(src, twin, model, overwrite=True)


def test_output_whose_data_file_is_the_input_model(tmp_path):
    src = _build(tmp_path, "inline")
    renamed = src.with_name("o.onnx.data")  # a model file that happens to have this name
    src.rename(renamed)
    model = io.load_model(renamed)
    with pytest.raises(OutputError, match="would overwrite the input model"):
        io.check_output_path(renamed, renamed.with_name("o.onnx"), model, overwrite=True)


def test_output_folder_problems(tmp_path, monkeypatch):
    src = _build(tmp_path)
    model = io.load_model(src)
    with pytest.raises(OutputError, match="does not exist"):
        io.check_output_path(src, tmp_path / "nope" / "o.onnx", model, overwrite=False)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        io.check_output_path(src, afile / "o.onnx", model, overwrite=False)
    (tmp_path / "exists.onnx").write_text("x")
    with pytest.raises(OutputError, match="already exists"):
        io.check_output_path(src, tmp_path / "exists.onnx", model, overwrite=False)
    io.check_output_path(src, tmp_path / "exists.onnx", model, overwrite=True)
    # Read-only folder: as root chmod does not stop writes, so this checks only
    # that the os.access answer is honoured (simulated).
    monkeypatch.setattr(io.os, "access", lambda *a, **k: False)
    with pytest.raises(OutputError, match="not writable"):
        io.check_output_path(src, tmp_path / "o.onnx", model, overwrite=False)


def test_unwritable_folder_real_failure():
    """A folder no one can create files in, root included (/proc): a real write failure."""
    with pytest.raises(OutputError, match="cannot write in /proc"):
        with io.staging_dir(pathlib.Path("/proc/o.onnx")):
            pass


def test_publish_moves_model_last(tmp_path, monkeypatch):
    staged = tmp_path / "stage"
    staged.mkdir()
    (staged / "o.onnx").write_text("m")
    (staged / "o.onnx.data").write_text("d")
    moves = []
    real = os.replace
    monkeypatch.setattr(io.os, "replace", lambda a, b: (moves.append(pathlib.Path(b).name), real(a, b)))
    io.publish(staged, tmp_path / "o.onnx")
    assert moves == ["o.onnx.data", "o.onnx"]


def test_check_written_rejects_broken_model(tmp_path):
    bad = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.INT64, [2])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    path = tmp_path / "bad.onnx"
    onnx.save(bad, str(path))
    with pytest.raises(ConversionError):
        io.check_written(path, runtime=True)


def test_default_and_data_names():
    assert io.default_output_path(pathlib.Path("/m/gpt.onnx"), "fp16") == pathlib.Path("/m/gpt.fp16.onnx")
    assert io.data_file_name(pathlib.Path("/m/gpt.fp16.onnx")) == "gpt.fp16.onnx.data"


# --- chunked reading: RSS follows one chunk, not the tensor ------------------------


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_read_chunks_drops_pages_of_mapped_tensor(tmp_path):
    spec = gpt.GptSpec(layers=0, hidden=1024, vocab=16000, max_positions=8)  # wte: 62.5 MiB
    src = gpt.build(tmp_path, spec, seed=0)
    model = io.load_model(src)
    wte = model.graph.initializers["wte"].const_value
    expected = float(np.sum(wte.numpy(), dtype=np.float64))
    wte.release()
    before = _rss_mb()
    total = sum(float(np.sum(c, dtype=np.float64)) for c in io.read_chunks(wte, 1 << 20))
    chunked_growth = _rss_mb() - before  # the map is still open here
    assert total == pytest.approx(expected)
    assert chunked_growth < 16, chunked_growth
    # Control: reading the same map whole keeps it all resident.
    wte.release()
    before = _rss_mb()
    float(np.sum(wte.numpy(), dtype=np.float64))
    assert _rss_mb() - before > 48
    wte.release()


def test_convert_chunked_equals_astype(tmp_path):
    src = _build(tmp_path)
    model = io.load_model(src)
    for value in model.graph.initializers.values():
        t = value.const_value
        if t.dtype != ir.DataType.FLOAT:
            continue
        got = io.convert_chunked(t, lambda a: a.astype(np.float16), np.float16)
        assert got.shape == tuple(t.shape.numpy())
        np.testing.assert_array_equal(got.view(np.uint16), t.numpy().astype(np.float16).view(np.uint16))
    # in-memory tensors (no map) work too, with chunks smaller than the tensor
    arr = np.random.default_rng(0).standard_normal((37, 11)).astype(np.float32)
    chunks = list(io.read_chunks(ir.tensor(arr), chunk_elements=100))
    assert len(chunks) == 5
    np.testing.assert_array_equal(np.concatenate(chunks), arr.reshape(-1))
