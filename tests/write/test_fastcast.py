"""The fast float16 cast gives numpy's bits exactly, and streamed writes equal whole ones."""

import io as pyio

import ml_dtypes
import numpy as np
import onnx_ir as ir
import pytest

from ampconv.tensors import fastcast
from ampconv.tensors.low_range import to_low
from ampconv.tensors.chunks import CHUNK_ELEMENTS, CastTensor


def numpy_fp16(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(np.float16)


def bit_patterns(step: int) -> np.ndarray:
    """Every ``step``-th float32 bit pattern (NaNs, infinities, subnormals included)."""
    return np.arange(0, 1 << 32, step, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.fixture(params=["runtime", "numpy"])
def cast_path(request):
    """Run a test through the onnxruntime path and through the numpy fallback."""
    if request.param == "runtime":
        pytest.importorskip("onnxruntime")
        fastcast.reset()
        assert fastcast.available()
    else:
        fastcast.reset(False)
        assert not fastcast.available()
    yield request.param
    fastcast.reset()


def test_every_sampled_bit_pattern_matches_numpy(cast_path):
    values = bit_patterns(1009)  # 4.3 million patterns, NaN payloads among them
    out = np.empty(values.size, np.float16)
    for start in range(0, values.size, CHUNK_ELEMENTS):
        chunk = values[start : start + CHUNK_ELEMENTS]
        fastcast.to_float16_into(out[start : start + chunk.size], chunk)
    assert np.array_equal(out.view(np.uint16), numpy_fp16(values).view(np.uint16))


def test_a_chunk_with_a_nan_gets_numpys_nan_bits(cast_path):
    values = np.linspace(-70000, 70000, 10000, dtype=np.float32)
    values[1234] = np.uint32(0x7FC01234).view(np.float32)  # a NaN with a payload
    values[5678] = np.uint32(0xFF800001).view(np.float32)  # a signalling negative NaN
    out = np.empty(values.size, np.float16)
    fastcast.to_float16_into(out, values)
    assert np.array_equal(out.view(np.uint16), numpy_fp16(values).view(np.uint16))


def test_ties_round_to_even_and_small_chunks_work(cast_path):
    # 1 + 2**-11 is halfway between two float16 values: it rounds to the even one (1.0).
    values = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65519.99, 65520.0, 2**-25, 2**-25 * 1.0001], np.float32)
    out = np.empty(values.size, np.float16)
    fastcast.cast_into(out, values, np.float16)
    assert np.array_equal(out.view(np.uint16), numpy_fp16(values).view(np.uint16))
    assert out[0] == 1.0 and out[1] == np.float16(1 + 2**-9) and np.isinf(out[3])


def test_bfloat16_casts_are_ml_dtypes_round_to_nearest_even():
    values = bit_patterns(65521)
    values = values[~np.isnan(values)]
    out = np.empty(values.size, ml_dtypes.bfloat16)
    fastcast.cast_into(out, values, np.dtype(ml_dtypes.bfloat16))
    assert np.array_equal(out.view(np.uint16), values.astype(ml_dtypes.bfloat16).view(np.uint16))


@pytest.mark.parametrize("dtype", [ir.DataType.FLOAT16, ir.DataType.BFLOAT16])
@pytest.mark.parametrize("clamped", [False, True])
def test_streamed_write_equals_the_whole_tensor(dtype, clamped):
    rng = np.random.default_rng(0)
    # Over two chunks, with values beyond float16's range so clamping matters.
    source = (rng.standard_normal(CHUNK_ELEMENTS * 2 + 17) * 3e4).astype(np.float32).reshape(-1, 1)
    low = "fp16" if dtype == ir.DataType.FLOAT16 else "bf16"
    convert = (lambda a: to_low(a, low, True)) if clamped else None
    tensor = CastTensor(ir.Tensor(source), dtype, convert, name="w")
    streamed = pyio.BytesIO()
    tensor.tofile(streamed)
    whole = tensor.numpy()
    assert whole.shape == source.shape and whole.dtype == dtype.numpy()
    assert streamed.getvalue() == whole.tobytes() == tensor.tobytes()
    with np.errstate(over="ignore"):
        expected = to_low(source, low, clamped) if clamped else source.astype(dtype.numpy())
    assert np.array_equal(whole.view(np.uint16), expected.view(np.uint16))
    if clamped and low == "fp16":
        assert np.isfinite(whole.astype(np.float32)).all()


def test_an_empty_tensor_streams_nothing():
    tensor = CastTensor(ir.Tensor(np.zeros((0, 3), np.float32)), ir.DataType.FLOAT16)
    out = pyio.BytesIO()
    tensor.tofile(out)
    assert out.getvalue() == b"" and tensor.numpy().shape == (0, 3)


def test_the_session_is_built_only_after_enough_bytes_went_through_numpy(monkeypatch):
    pytest.importorskip("onnxruntime")
    fastcast.reset()
    monkeypatch.setattr(fastcast, "SESSION_AFTER_BYTES", 3 * 4096 * 4)
    values = np.linspace(-1000, 1000, 4096, dtype=np.float32)
    out = np.empty(values.size, np.float16)
    for _ in range(3):  # a small model: numpy casts it, and no session is built
        fastcast.to_float16_into(out, values)
        assert fastcast._session is None
    fastcast.to_float16_into(out, values)  # past the threshold: the session takes over
    assert fastcast._session not in (None, False)
    assert np.array_equal(out.view(np.uint16), numpy_fp16(values).view(np.uint16))
    fastcast.reset()
