"""Range facts about constant tensors, and exact float32 -> LOW conversion.

Checks work on the float32 bit patterns (one pass of integer compares per
chunk), so even multi-GB weights are scanned at memory speed without large
temporaries.
"""

from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

import numpy as np

# Elements per scan step (1 MiB of float32: stays in cache, bounded temporaries).
# The same constant as the chunks ``read_chunks`` yields, imported rather than
# repeated: ``range_stats`` scans those chunks through a buffer of this size, and
# a chunk larger than the buffer would raise.
from ampconv.tensors.chunks import CHUNK_ELEMENTS
from ampconv.tensors.fastcast import cast_into

from ampconv.core.lowtypes import RangeLimits, low_type, range_limits

_INF_BITS = 0x7F800000
# The largest float32 subnormal's bits (below 2^-126).
_SUBNORMAL32_BITS = 0x007FFFFF


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
    # Of ``underflow``, the values float32 itself holds only as subnormals (|x| < 2^-126 ~ 1.2e-38).
    subnormal: int = 0
    # The limits "overflow" and "underflow" were counted against (None: the LOW type's own).
    limits: Optional[RangeLimits] = dataclasses.field(default=None, compare=False)

    def pins(self) -> bool:
        """Whether this constant must keep its consumer in float32 (docs/precision.md sec. 6).

        Any overflow pins. Underflow pins a small constant (an epsilon, a scale:
        flushing it changes the op's meaning, e.g. ``x / sqrt(var + 0)``) or a
        tensor where more than 1% of the non-zero values vanish; a large weight
        with a few subnormal entries is only reported, because flushing them is
        below the weight's own rounding noise. Values that are subnormal in
        float32 itself (training leftovers such as -9e-42 in a bias) never pin:
        no float32 computation resolves them either (GPU kernels commonly flush
        them to zero), so flushing them changes nothing the model relies on.
        """
        if self.overflow:
            return True
        significant = self.underflow - self.subnormal
        if not significant:
            return False
        return self.size <= 16 or significant > 0.01 * max(self.nonzero, 1)


def range_stats(array, low: str, chunks=None, limits: Optional[RangeLimits] = None) -> RangeStats:
    """Scan float32 data for values the LOW type cannot hold (or, with ``limits``, that lie outside them).

    ``chunks`` (an iterable of 1-D float32 arrays of at most ``CHUNK_ELEMENTS``,
    e.g. ``ampconv.tensors.chunks.read_chunks``) lets a memory-mapped tensor be scanned
    with one chunk resident at a time. The common case (nothing out of range)
    costs one in-place mask, one max and two counts per chunk into a reused
    buffer; details are computed only for the chunks that need them.
    """
    limits = limits or range_limits(low)
    if chunks is None:
        flat = np.ascontiguousarray(as_float32(array)).reshape(-1)
        if flat.size <= SMALL_ELEMENTS:
            fits = _all_in_range(flat, limits)
            if fits is not None:
                return fits
        chunks = (flat[i : i + CHUNK_ELEMENTS] for i in range(0, flat.size, CHUNK_ELEMENTS))
    overflow = underflow = nonzero = size = subnormal = 0
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
            tiny_bits = min(limits.underflow_bits, _SUBNORMAL32_BITS)
            subnormal += int(np.count_nonzero(bits <= tiny_bits)) - zeros
            if ex_under is None:
                under = (bits > 0) & (bits <= limits.underflow_bits)
                ex_under = float(values[int(np.argmax(under))])
    fill = ex_over if overflow and mask_like else None
    return RangeStats(size, nonzero, overflow, underflow, max_abs, ex_over, ex_under, fill, subnormal, limits)


# Up to this many elements, a tensor is first checked in one step (``_all_in_range``):
# big graphs hold thousands of small biases and scales, nearly all in range, and
# the general scan's per-call set-up cost more than the data.
SMALL_ELEMENTS = 4096


def _all_in_range(flat: np.ndarray, limits: RangeLimits) -> Optional[RangeStats]:
    """The stats of a small float32 vector when no value lies outside ``limits``; None when any does."""
    if flat.size == 0:
        return RangeStats(0, 0, 0, 0, 0.0, limits=limits)
    return batch_in_range([flat.astype("<f4", copy=False).tobytes()], limits)[0]


def batch_in_range(raws: Sequence[bytes], limits: RangeLimits) -> List[Optional[RangeStats]]:
    """``_all_in_range`` for many small float32 tensors at once, given their little-endian bytes.

    Big graphs hold thousands of small biases and scales; one vectorized pass
    over their concatenated bits replaces a scan per tensor. Each tensor gets
    its stats when every value fits ``limits``, or None when any does not (the
    general scan then says which). Every entry of ``raws`` must be non-empty.
    """
    if not raws:
        return []
    sizes = np.fromiter((len(raw) // 4 for raw in raws), dtype=np.int64, count=len(raws))
    bits = np.frombuffer(b"".join(raws), dtype="<u4") & np.uint32(0x7FFFFFFF)
    starts = np.zeros(len(raws), dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    top = np.maximum.reduceat(bits, starts)
    nonzero_mask = bits != 0
    nonzero = np.add.reduceat(nonzero_mask, starts, dtype=np.int64)
    tiny = np.add.reduceat(nonzero_mask & (bits <= limits.underflow_bits), starts, dtype=np.int64)
    fits = (top < limits.overflow_bits) & (tiny == 0)
    max_abs = top.astype(np.uint32).view(np.float32)
    return [
        RangeStats(int(size), int(nz), 0, 0, float(peak), limits=limits) if ok else None
        for size, nz, peak, ok in zip(sizes.tolist(), nonzero.tolist(), max_abs.tolist(), fits.tolist())
    ]


def to_low(array: np.ndarray, low: str, clamp: bool | str = False, limits: Optional[RangeLimits] = None) -> np.ndarray:
    """Round float32 to the LOW type, nearest-even; signs, inf and nan are kept.

    With ``clamp=True``, the values ``range_stats`` counts against ``limits``
    (default: the LOW type's own) are brought inside them first: finite values
    beyond ``max_finite`` become +-``max_finite`` instead of +-inf, and non-zero
    values below the small limit become +-``min_positive`` (``clamp_small``
    "raise") or +-0 ("flush"). With ``clamp="mask"``, the negative values beyond
    ``max_finite`` (the mask fill) become the type's ``mask_fill``.
    """
    array = _c_float32(array)
    target = low_type(low)
    if clamp:
        array = clamp_values(array, limits or range_limits(low), mask=clamp == "mask")
    # The plain cast's kernel (numpy's bits; float16 through onnxruntime when it
    # can), so a clamped weight streams as fast as an unclamped one.
    out = np.empty(array.shape, dtype=target.numpy)
    cast_into(out.reshape(-1), array.reshape(-1), target.numpy)
    return out


def clamp_values(array: np.ndarray, limits: RangeLimits, mask: bool = False) -> np.ndarray:
    """``array`` (float32) with its values outside ``limits`` replaced as ``to_low`` describes.

    The tests are ``range_stats``'s, on the same bits, so a clamped tensor's
    report counts are exactly the values changed here.
    """
    array = _c_float32(array)
    bits = np.bitwise_and(array.view(np.uint32), np.uint32(0x7FFFFFFF))
    over = (bits >= limits.overflow_bits) & (bits < _INF_BITS)
    if mask:
        return np.where(over & (array < 0), np.float32(limits.low.mask_fill), array)
    out = np.where(over, np.copysign(np.float32(limits.clamp_to), array), array)
    under = (bits > 0) & (bits <= limits.underflow_bits)
    if under.any():
        small = np.float32(0.0 if limits.clamp_small == "flush" else limits.raise_to)
        out = np.where(under, np.copysign(small, array), out)
    return out


def as_float32(array) -> np.ndarray:
    """``array`` as float32, a wider float's values kept on the side of the limits they lie on.

    A float64 constant (a model's double path) may hold 1e300 or 1e-300:
    numpy's plain cast makes them inf (with a RuntimeWarning) and 0, and the
    scan would count neither. Finite magnitudes beyond float32's largest
    become that largest, non-zero ones below its smallest subnormal become
    that subnormal: both stay out of every LOW type's range, and are counted.
    """
    array = np.asarray(array)
    if array.dtype.kind != "f" or array.dtype.itemsize <= 4:
        return array.astype(np.float32, copy=False)
    info = np.finfo(np.float32)
    finite = np.isfinite(array)
    wide = np.where(finite, np.clip(array, -info.max, info.max), array)
    tiny = finite & (array != 0) & (np.abs(array) < info.smallest_subnormal)
    wide = np.where(tiny, np.copysign(info.smallest_subnormal, array), wide)
    return wide.astype(np.float32)


def _c_float32(array) -> np.ndarray:
    """``array`` as C-contiguous float32 of the same shape (``np.ascontiguousarray`` makes a 0-d array 1-d)."""
    array = as_float32(array)
    return array if array.flags.c_contiguous else array.copy(order="C")
