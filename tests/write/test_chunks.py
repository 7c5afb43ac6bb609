"""ampconv.tensors.chunks on its own: chunked reads (RSS follows one chunk, not the tensor),
chunked casts, and finding the mapped sources a lazy tensor reads.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np
import onnx_ir as ir
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

from ampconv.tensors.chunks import convert_chunked, read_chunks, tensor_sources
from ampconv.reading.load import external_tensors, load_model
from helpers import build_tiny_gpt, tiny_gpt_spec
from sample_models import gpt

TINY = tiny_gpt_spec()
_build = build_tiny_gpt


def test_sources_found_in_closures(tmp_path):
    src = _build(tmp_path)
    model = load_model(src)
    ext = next(external_tensors(model))
    lazy = ir.LazyTensor(lambda: ir.tensor(ext.numpy().astype(np.float16)), dtype=ir.DataType.FLOAT16,
                         shape=ext.shape)
    assert tensor_sources(lazy) == [ext]
    assert tensor_sources(ext) == [ext]
    assert tensor_sources(ir.tensor(np.zeros(3, np.float32))) == []


# --- chunked reading: RSS follows one chunk, not the tensor ------------------------



def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_read_chunks_drops_pages_of_mapped_tensor(tmp_path):
    spec = gpt.GptSpec(layers=0, hidden=1024, vocab=16000, max_positions=8)  # wte: 62.5 MiB
    src = gpt.build(tmp_path, spec, seed=0)
    model = load_model(src)
    wte = model.graph.initializers["wte"].const_value
    expected = float(np.sum(wte.numpy(), dtype=np.float64))
    wte.release()
    before = _rss_mb()
    total = sum(float(np.sum(c, dtype=np.float64)) for c in read_chunks(wte, 1 << 20))
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
    model = load_model(src)
    for value in model.graph.initializers.values():
        t = value.const_value
        if t.dtype != ir.DataType.FLOAT:
            continue
        got = convert_chunked(t, lambda a: a.astype(np.float16), np.float16)
        assert got.shape == tuple(t.shape.numpy())
        np.testing.assert_array_equal(got.view(np.uint16), t.numpy().astype(np.float16).view(np.uint16))
    # in-memory tensors (no map) work too, with chunks smaller than the tensor
    arr = np.random.default_rng(0).standard_normal((37, 11)).astype(np.float32)
    chunks = list(read_chunks(ir.tensor(arr), chunk_elements=100))
    assert len(chunks) == 5
    np.testing.assert_array_equal(np.concatenate(chunks), arr.reshape(-1))
