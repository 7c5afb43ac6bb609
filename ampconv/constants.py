"""Range facts about constant tensors, and exact float32 -> LOW conversion.

Checks work on the float32 bit patterns (one pass of integer compares per
chunk), so even multi-GB weights are scanned at memory speed without large
temporaries.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

# Elements per scan step (1 MiB of float32: stays in cache, bounded temporaries).
# The same constant as the chunks ``read_chunks`` yields, imported rather than
# repeated: ``range_stats`` scans those chunks through a buffer of this size, and
# a chunk larger than the buffer would raise.
from ampconv.chunks import CHUNK_ELEMENTS

from ampconv.lowtypes import low_type

_INF_BITS = 0x7F800000


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
        """Whether this constant must keep its consumer in float32 (docs/precision.md sec. 6).

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


def range_stats(array, low: str, chunks=None) -> RangeStats:
    """Scan float32 data for values the LOW type cannot hold.

    ``chunks`` (an iterable of 1-D float32 arrays of at most ``CHUNK_ELEMENTS``,
    e.g. ``ampconv.chunks.read_chunks``) lets a memory-mapped tensor be scanned
    with one chunk resident at a time. The common case (nothing out of range)
    costs one in-place mask, one max and two counts per chunk into a reused
    buffer; details are computed only for the chunks that need them.
    """
    limits = low_type(low)
    if chunks is None:
        flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
        chunks = (flat[i : i + CHUNK_ELEMENTS] for i in range(0, flat.size, CHUNK_ELEMENTS))
    overflow = underflow = nonzero = size = 0
    mask_like = True
    max_abs = 0.0
    ex_over = ex_under = None
    buffer = np.empty(CHUNK_ELEMENTS, dtype=np.uint32)
    for values in chunks:
        values = np.ascontiguousarray(values, dtype=np.float32)
        n = values.size
        size += n
        if n == 0:
            continue
        bits = np.bitwise_and(values.view(np.uint32), np.uint32(0x7FFFFFFF), out=buffer[:n])
        zeros = int(np.count_nonzero(bits == 0))
        nonzero += n - zeros
        n_under = int(np.count_nonzero(bits <= limits.underflow_bits)) - zeros
        top = int(bits.max())
        if top >= limits.overflow_bits:  # rare: overflow, inf or nan present
            finite = bits < _INF_BITS
            over = finite & (bits >= limits.overflow_bits)
            n_over = int(np.count_nonzero(over))
            if n_over:
                overflow += n_over
                over_values = values[over]
                if ex_over is None:
                    ex_over = float(over_values[0])
                if over_values.min() != over_values.max() or over_values[0] >= 0 or over_values[0] != ex_over:
                    mask_like = False
            top = int(np.where(finite, bits, 0).max())
        max_abs = max(max_abs, float(np.uint32(top).view(np.float32)))
        if n_under:
            underflow += n_under
            if ex_under is None:
                under = (bits > 0) & (bits <= limits.underflow_bits)
                ex_under = float(values[int(np.argmax(under))])
    fill = ex_over if overflow and mask_like else None
    return RangeStats(size, nonzero, overflow, underflow, max_abs, ex_over, ex_under, fill)


def to_low(array: np.ndarray, low: str, clamp: bool | str = False) -> np.ndarray:
    """Round float32 to the LOW type, nearest-even; signs, inf and nan are kept.

    With ``clamp=True``, finite values beyond the LOW range become +-max instead
    of +-inf; with ``clamp="mask"``, the mask fill values become the type's ``mask_fill``.
    """
    array = np.asarray(array, dtype=np.float32)
    target = low_type(low)
    if clamp == "mask":
        limit = np.float32(target.max)
        array = np.where(np.isfinite(array) & (array < -limit), np.float32(target.mask_fill), array)
    elif clamp:
        limit = np.float32(target.max)
        finite = np.isfinite(array)
        array = np.where(finite, np.clip(array, -limit, limit), array)
    with np.errstate(over="ignore"):
        return array.astype(target.numpy)
