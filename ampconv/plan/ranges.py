"""The planner's narrow window on weights: range statistics of constant values, read once each.

Rules read weights only through this reader: it answers the range facts of a
constant, streaming a float32 tensor (in memory or memory-mapped from its
external data file) chunk by chunk, releasing the mapped pages (RSS must not
grow with the model), and remembers the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional

import numpy as np
import onnx_ir as ir

from ampconv.tensors import tensorsize
from ampconv.tensors.chunks import read_chunks, release_mapped
from ampconv.tensors.low_range import SMALL_ELEMENTS, RangeStats, batch_in_range, range_stats
from ampconv.core.lowtypes import RangeLimits, range_limits
from ampconv.plan.values import constant_array

if TYPE_CHECKING:  # decision.py is the planner's output; imported for the annotation only
    from ampconv.plan.decision import ConstantNote


_UNREAD = object()  # ``RangeReader.stats``: not read yet (None is an answer: unreadable)


class RangeReader:
    """Range statistics of constant values against one LOW type's limits, cached per value.

    ``limits`` are the LOW type's own, or those ``max_finite``/``min_positive``
    set (``ampconv.core.lowtypes.range_limits``); every count and reason uses them.
    """

    def __init__(self, low: str, limits: Optional[RangeLimits] = None) -> None:
        self.low = low
        self.limits = limits or range_limits(low)
        self._stats: Dict[ir.Value, Optional[RangeStats]] = {}
        # Constants the batched scan found all finite and in range: their largest magnitude.
        self._finite: Dict[ir.Value, float] = {}
        self._shares: Dict[tuple, Optional[float]] = {}

    def stats(self, value: ir.Value) -> Optional[RangeStats]:
        """The range facts of constant ``value``; None when its data cannot be read."""
        known = self._stats.get(value, _UNREAD)  # one look-up: the planner asks for every weight, often twice
        if known is not _UNREAD:
            return known
        tensor = value.const_value
        if tensor is not None and tensor.dtype == ir.DataType.FLOAT and isinstance(tensor, ir.ExternalTensor):
            self._stats[value] = self._streamed(tensor)
        else:
            array = constant_array(value)
            self._stats[value] = None if array is None else range_stats(array, self.low, limits=self.limits)
            del array
            release_mapped(tensor)
        return self._stats[value]

    def known(self, value: ir.Value) -> Optional[RangeStats]:
        """The range facts of ``value`` if they were read already (None: not read, or unreadable); reads nothing."""
        known = self._stats.get(value)
        return known if isinstance(known, RangeStats) else None

    def source_peak(self, value: Optional[ir.Value], tensor: ir.TensorProtocol) -> Optional[float]:
        """The largest finite magnitude of the float32 constant ``tensor`` was rounded from (``value``'s).

        The planner's scan of ``value`` when there was one; else the rounded
        lazy ``tensor``'s float32 source, read now, chunk by chunk. None when
        neither can be read.
        """
        stats = self.known(value) if value is not None else None
        if stats is not None:
            return stats.max_abs
        source = getattr(tensor, "source", None)  # a lazily rounded weight (``chunks.CastTensor``)
        if source is None or source.dtype != ir.DataType.FLOAT:
            return None
        found = self._streamed(source)
        return found.max_abs if found is not None else None

    def prefetch(self, values: Iterable[ir.Value]) -> None:
        """Scan the small float32 initializers among ``values`` in one vectorized pass, ahead of ``stats``.

        Only tensors still held as raw bytes in the model's proto, of at most
        ``SMALL_ELEMENTS`` values, are batched (``batch_in_range``); a tensor
        with any value out of range is left to ``stats``, which counts the
        details the report needs.
        """
        picked: List[ir.Value] = []
        raws: List[bytes] = []
        for value in values:
            if value in self._stats:
                continue
            raw = tensorsize.proto_float32_bytes(value.const_value, SMALL_ELEMENTS)
            if raw is not None:
                picked.append(value)
                raws.append(raw)
        for value, stats in zip(picked, batch_in_range(raws, self.limits)):
            if stats is not None:
                self._stats[value] = stats
                self._finite[value] = stats.max_abs  # "fits" means below the overflow bits: no inf, no NaN

    def finite_bound(self, value: ir.Value) -> Optional[float]:
        """The largest magnitude of constant ``value`` if a scan showed all its values finite; None when unknown.

        Known only for the small weights ``prefetch`` scanned, and never read
        from the data: a rule can use it to skip reading a constant it rules out.
        """
        return self._finite.get(value)

    def flushed_share(self, value: ir.Value, out_axis: int) -> Optional[float]:
        """How much the values that flush to 0 weigh in one output of a product with weight ``value``.

        ``out_axis``: the weight's axis that indexes outputs (a Conv's 0, a
        MatMul's last). The answer is the largest, over outputs, of the
        magnitudes that round to 0 summed along the other axes, over the
        largest L1 norm of any output's weights: an upper bound on how much
        flushing them changes an output, relative to the largest output the
        same activation makes. None when the weight is too large or unreadable.
        """
        key = (value, out_axis)
        if key in self._shares:
            return self._shares[key]
        tensor = value.const_value
        share = None
        if tensor is not None and tensorsize.size(tensor) <= SHARE_ELEMENTS:
            array = constant_array(value)
            release_mapped(tensor)
            if array is not None and array.ndim > 0 and array.dtype == np.float32:
                share = _flushed_share(array, out_axis % array.ndim, self.limits)
        self._shares[key] = share
        return share

    def _streamed(self, tensor: ir.TensorProtocol) -> Optional[RangeStats]:
        try:
            return range_stats(None, self.low, chunks=read_chunks(tensor), limits=self.limits)
        except Exception:  # noqa: BLE001 - unreadable data is reported by the loader, not here
            return None
        finally:
            release_mapped(tensor)


# Weights up to this many values are read whole to weigh their flushed values (a CNN's Conv weights are smaller).
SHARE_ELEMENTS = 1 << 24


def _flushed_share(array: np.ndarray, out_axis: int, limits: RangeLimits) -> float:
    """``RangeReader.flushed_share`` of one weight array (float32)."""
    magnitudes = np.abs(np.moveaxis(array, out_axis, 0).reshape(array.shape[out_axis], -1))
    bits = magnitudes.view(np.uint32)
    flushed = np.where((bits > 0) & (bits <= limits.underflow_bits), magnitudes, np.float32(0))
    largest = float(magnitudes.sum(axis=1, dtype=np.float64).max())
    if largest == 0 or not np.isfinite(largest):
        return 1.0
    return float(flushed.sum(axis=1, dtype=np.float64).max()) / largest


def misfit(stats: RangeStats, tensor: str, low: str) -> str:
    """One phrase: how the values of ``tensor`` do not fit the LOW type (or the limits in use), quoting the limit."""
    limits = stats.limits or range_limits(low)
    if stats.overflow:
        return f"constant {stats.example_overflow:.3g} in {tensor} {limits.too_large()}"
    return f"constant {stats.example_underflow:.3g} in {tensor} {limits.too_small()}"


def clamp_advice(stats: RangeStats, low: str) -> str:
    """The option that stores this constant LOW instead, and what it would do to the values."""
    limits = stats.limits or range_limits(low)
    if stats.overflow:
        return f"use --clamp to clamp it to +-{limits.max_finite:g} instead"
    if limits.clamp_small == "flush":
        return "use --clamp to flush such values to 0 instead"
    return (
        f"use --clamp to raise such values to +-{limits.min_positive:.3g} instead, "
        "or --clamp --clamp-small flush to flush them to 0"
    )


# What each guard action did, as the report's ``action`` says it (keys: ``ConstantNote.action``).
_ACTIONS = {
    "pinned": "consumer kept float32",
    "reported": "stored rounded (flush to zero is below the weight's rounding noise)",
}
# A reported constant whose only too small values are float32 subnormals (RangeStats.pins).
_FLOAT32_SUBNORMALS = "stored rounded (float32 subnormals: no float32 kernel resolves them either)"
# A reported constant whose consumer ended up float32 (a later rule): nothing was rounded.
_NOT_ROUNDED = "consumer runs float32, so it reads the constant unrounded"


def constant_record(note: "ConstantNote", low: str, consumer_low: bool = True) -> Dict[str, Any]:
    """The report's record of one ``ConstantNote``: the values that do not fit, the limits, what was done.

    ``clamped``, ``flushed`` and ``raised`` count the values ``--clamp``
    changed in the tensor (to +-max_finite, to +-0, to +-min_positive); they
    are the scan's counts, made with the test the clamp applies.
    ``consumer_low``: whether the consumer's final decision is LOW; a
    constant only reported (neither pinned nor changed) is rounded only then,
    and the record says which.
    """
    s = note.stats
    limits = s.limits or range_limits(low)
    parts = []
    if s.overflow:
        where = f"above max_finite {limits.max_finite:g}" if limits.max_set else f"beyond {low} range"
        parts.append(f"{s.overflow} value(s) {where} (e.g. {s.example_overflow:.4g})")
    if s.underflow:
        where = f"below min_positive {limits.min_positive:g}" if limits.min_set else f"round to 0 in {low}"
        parts.append(f"{s.underflow} non-zero value(s) {where} (e.g. {s.example_underflow:.3g})")
    clamped = note.action == "clamped"
    small = s.underflow if clamped else 0
    if note.action == "mask":
        action = (
            f"attention-mask fill {s.mask_fill:.4g} stored as {limits.low.mask_fill:g} "
            "(softmax still gives 0; finite, so no NaN rows)"
        )
    elif clamped:
        action = _clamp_action(s, limits, low)
    elif note.action == "reported" and not consumer_low:
        action = _NOT_ROUNDED
    elif note.action == "reported" and note.effect:
        action = f"stored rounded ({note.effect})"
    elif note.action == "reported" and s.underflow and s.subnormal == s.underflow:
        action = _FLOAT32_SUBNORMALS
    elif note.action == "reported" and limits.min_set:
        action = "stored rounded (few values below min_positive; below the weight's rounding noise)"
    else:
        action = _ACTIONS[note.action]
    return {
        "tensor": note.tensor,
        "consumer": note.consumer,
        "overflow": s.overflow,
        "underflow": s.underflow,
        "max_abs": s.max_abs,
        "detail": "; ".join(parts),
        "action": action,
        "max_finite": limits.max_finite,
        "min_positive": limits.min_positive,
        "clamped": s.overflow if clamped else 0,
        "flushed": small if limits.clamp_small == "flush" else 0,
        "raised": small if limits.clamp_small == "raise" else 0,
    }


def _clamp_action(s: RangeStats, limits: RangeLimits, low: str) -> str:
    """``action`` of a clamped constant: what happened to the large and the tiny values."""
    done = []
    if s.overflow:
        done.append(f"{s.overflow} clamped to +-{limits.max_finite:g}")
    if s.underflow:
        verb = "flushed" if limits.clamp_small == "flush" else "raised"
        done.append(f"{s.underflow} {verb} to {limits.small_target()}")
    return f"clamped (--clamp: {', '.join(done)})"
