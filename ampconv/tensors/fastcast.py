"""float32 -> float16 casts at memory speed, through onnxruntime's Cast kernel.

numpy's float32 -> float16 cast is a scalar loop: about 1.5 GB/s of float32 per
core on the bench machine, which made the cast the largest cost of converting
a 1.35 GB model. onnxruntime's CPU Cast kernel uses the processor's vector
conversion instructions: 12-20 GB/s on the same chunks. Both round to nearest
even; on a sample of 44 million float32 bit patterns (every 97th) they agree
bit for bit on every non-NaN value, and differ only in the payload bits of
NaNs. So a chunk holding a NaN is cast again with numpy, and the result is
always exactly numpy's (``tests/write/test_fastcast.py`` checks every 1009th bit
pattern, NaNs included, through both paths).

The plain cast of a chunk (``chunks``) and the cast after ``--clamp``
(``constants.to_low``) both come here, so a clamped weight streams as fast.

Building and self-checking the session costs about 0.1 s, more than numpy
needs for tens of megabytes, so small models never pay it: casts go through
numpy until ``SESSION_AFTER_BYTES`` of float32 have been cast that way.

When onnxruntime is not installed, or its answer on the self-check values at
start-up is not numpy's, every cast is numpy's. bfloat16 always uses
``ml_dtypes`` (onnxruntime's Python API cannot return bfloat16 arrays).
"""

from __future__ import annotations

import threading
from typing import Optional

import numpy as np

# float32 bytes cast by numpy after which the onnxruntime session is built: at
# about 1.5 GB/s numpy spends some 40 ms on them, less than the session's set-up
# (measured 70-130 ms with the self-check), so a model below it is faster without.
SESSION_AFTER_BYTES = 64 * 1024**2

_lock = threading.Lock()
_session = None  # onnxruntime.InferenceSession, False when unavailable, None before the first try
_numpy_bytes = 0  # float32 bytes cast by numpy while no session was built


def _probe_values() -> np.ndarray:
    """float32 values where a wrong rounding rule would show."""
    bits = [
        0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
        0x477FEFFF, 0x477FF000, 0x477FF001, 0xC77FF000,  # around the overflow threshold
        0x33000000, 0x33000001, 0x32FFFFFF, 0xB3000001,  # around half the smallest subnormal
        0x387FC000, 0x38800000, 0x38801000, 0x38803000,  # subnormal/normal border, ties
        0x3F801000, 0x3F803000, 0x3F801001, 0x3F800FFF,  # ties to even, just off a tie
        0x00000001, 0x007FFFFF, 0x7F7FFFFF, 0x3F800000,  # float32 subnormals, max, 1.0
    ]
    ramp = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    all_bits = np.concatenate([np.array(bits, dtype=np.uint32), ramp]).view(np.float32)
    return all_bits[~np.isnan(all_bits)]


def _get_session():
    """The shared Cast session, built and self-checked once; None when not usable."""
    global _session
    if _session is None:
        with _lock:
            if _session is None:
                _session = _build_session() or False
    return _session or None


def _build_session():
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    try:
        graph = helper.make_graph(
            [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)],
            "cast",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [None])],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # callers already run one cast per writer thread
        options.log_severity_level = 4  # fatal only: a refusal here is answered by numpy, never printed
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        probe = _probe_values()
        got = session.run(None, {"x": probe})[0]
        with np.errstate(over="ignore"):
            want = probe.astype(np.float16)
        if got.dtype != np.float16 or not np.array_equal(got.view(np.uint16), want.view(np.uint16)):
            return None
        return session
    except Exception:  # any runtime trouble: numpy is always right, only slower
        return None


def to_float16_into(out: np.ndarray, chunk: np.ndarray) -> None:
    """Write ``chunk`` (1-D float32) rounded to float16 into ``out``, exactly as numpy would."""
    global _numpy_bytes
    session = None
    if chunk.size >= 4096 and (_session is not None or _numpy_bytes >= SESSION_AFTER_BYTES):
        session = _get_session()
    if session is not None:
        got = session.run(None, {"x": np.ascontiguousarray(chunk, dtype=np.float32)})[0]
        # A NaN's payload is the one thing the two casts treat differently.
        if int(np.bitwise_and(got.view(np.uint16), np.uint16(0x7FFF)).max()) <= 0x7C00:
            out[...] = got
            return
    if session is None:
        _numpy_bytes += chunk.nbytes  # unlocked: a lost update only delays the session
    with np.errstate(over="ignore", invalid="ignore"):  # inf is the cast's answer
        np.copyto(out, chunk, casting="unsafe")


def available() -> bool:
    """Whether the onnxruntime path is in use (the tests check both paths)."""
    return _get_session() is not None


def cast_into(out: np.ndarray, chunk: np.ndarray, dtype: "np.dtype") -> None:
    """Cast a float32 chunk into ``out`` of ``dtype`` (float16 fast when possible)."""
    if np.dtype(dtype) == np.float16:
        to_float16_into(out, chunk)
        return
    with np.errstate(over="ignore", invalid="ignore"):
        np.copyto(out, chunk, casting="unsafe")


def reset(session: Optional[object] = None) -> None:
    """Forget the cached session and the bytes cast so far (tests use it to force either path)."""
    global _session, _numpy_bytes
    with _lock:
        _session = session
        _numpy_bytes = 0
