"""Range facts about constant tensors, and exact float32 -> LOW conversion.

Checks work on the float32 bit patterns (one pass of integer compares per
chunk), so even multi-GB weights are scanned at memory speed without large
temporaries.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import ml_dtypes
import numpy as np

CHUNK = 1 << 22  # elements per scan step: bounded temporaries for huge tensors

# Bit patterns of |x| (float32) at which rounding to the LOW type overflows to inf
# (the halfway point above the largest finite value rounds to even = inf) and
# below which (inclusive) a non-zero value rounds to zero.
_LIMITS = {
    "fp16": {"overflow": 0x477FF000, "underflow": 0x33000000, "max": 65504.0},
    "bf16": {"overflow": 0x7F7F8000, "underflow": 0x00008000, "max": float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)},
}
_INF_BITS = 0x7F800000

NUMPY_LOW = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


@dataclasses.dataclass(frozen=True)
class RangeStats:
    """How a float32 constant fares when rounded to a LOW type."""

    size: int
    nonzero: int
    overflow: int  # finite values that would become +-inf
    underflow: int  # non-zero values that would become +-0
    max_abs: float  # largest finite magnitude
    example_overflow: Optional[float] = None
    example_underflow: Optional[float] = None
    mask_fill: Optional[float] = None  # the single negative value every overflow has, if any

    def pins(self) -> bool:
        """Whether this constant must keep its consumer in float32 (POLICY.md sec. 6).

        Any overflow pins. Underflow pins a small constant (an epsilon, a scale:
        flushing it changes the op's meaning, e.g. ``x / sqrt(var + 0)``) or a
        tensor where more than 1% of the non-zero values vanish; a large weight
        with a few subnormal entries is only reported, because flushing them is
        below the weight's own rounding noise.
        """
        if self.overflow:
            return True
        if not self.underflow:
            return False
        return self.size <= 16 or self.underflow > 0.01 * max(self.nonzero, 1)


def range_stats(array: np.ndarray, low: str) -> RangeStats:
    """Scan a float32 array for values the LOW type cannot hold."""
    limits = _LIMITS[low]
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    bits = flat.view(np.uint32)
    overflow = underflow = nonzero = 0
    mask_like = True
    max_abs = 0.0
    ex_over = ex_under = None
    for start in range(0, bits.size, CHUNK):
        chunk = bits[start : start + CHUNK] & np.uint32(0x7FFFFFFF)
        finite = chunk < _INF_BITS
        over = finite & (chunk >= limits["overflow"])
        under = (chunk > 0) & (chunk <= limits["underflow"])
        n_over, n_under = int(np.count_nonzero(over)), int(np.count_nonzero(under))
        nonzero += int(np.count_nonzero(chunk))
        if n_over:
            overflow += n_over
            if ex_over is None:
                ex_over = float(flat[start + int(np.argmax(over))])
            over_values = flat[start : start + CHUNK][over]
            if over_values.min() != over_values.max() or over_values.max() >= 0:
                mask_like = False
            elif ex_over is not None and over_values[0] != ex_over:
                mask_like = False
        if n_under:
            underflow += n_under
            if ex_under is None:
                ex_under = float(flat[start + int(np.argmax(under))])
        finite_chunk = np.where(finite, chunk, 0)
        if finite_chunk.size:
            max_abs = max(max_abs, float(np.uint32(finite_chunk.max()).view(np.float32)))
    fill = ex_over if overflow and mask_like else None
    return RangeStats(bits.size, nonzero, overflow, underflow, max_abs, ex_over, ex_under, fill)


# What an attention-mask fill (-1e9, float32 lowest) becomes in LOW: far below any
# real logit, so softmax still gives exactly 0, yet finite, so a score added to it
# cannot overflow to -inf and a fully masked row cannot produce NaN (-inf - -inf).
MASK_FILL = {"fp16": -32768.0, "bf16": -1.0e30}


def to_low(array: np.ndarray, low: str, clamp: bool | str = False) -> np.ndarray:
    """Round float32 to the LOW type, nearest-even; signs, inf and nan are kept.

    With ``clamp=True``, finite values beyond the LOW range become +-max instead
    of +-inf; with ``clamp="mask"``, the mask fill values become ``MASK_FILL``.
    """
    array = np.asarray(array, dtype=np.float32)
    if clamp == "mask":
        limit = np.float32(_LIMITS[low]["max"])
        array = np.where(np.isfinite(array) & (array < -limit), np.float32(MASK_FILL[low]), array)
    elif clamp:
        limit = np.float32(_LIMITS[low]["max"])
        finite = np.isfinite(array)
        array = np.where(finite, np.clip(array, -limit, limit), array)
    with np.errstate(over="ignore"):
        return array.astype(NUMPY_LOW[low])
