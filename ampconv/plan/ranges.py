"""The planner's narrow window on weights: range statistics of constant values, read once each.

The planner never touches files: it asks this reader for the range facts of a
constant, which streams float32 tensors chunk by chunk and releases their
mapped pages (RSS must not grow with the model), and remembers the answer.
"""

from __future__ import annotations

from typing import Dict, Optional

import onnx_ir as ir

from ampconv.chunks import read_chunks, release_mapped
from ampconv.constants import RangeStats, range_stats
from ampconv.plan.values import constant_array


class RangeReader:
    """Range statistics of constant values against one LOW type, cached per value."""

    def __init__(self, low: str) -> None:
        self.low = low
        self._stats: Dict[ir.Value, Optional[RangeStats]] = {}

    def stats(self, value: ir.Value) -> Optional[RangeStats]:
        """The range facts of constant ``value``; None when its data cannot be read."""
        if value not in self._stats:
            tensor = value.const_value
            if tensor is not None and tensor.dtype == ir.DataType.FLOAT:
                self._stats[value] = self._streamed(tensor)
            else:
                array = constant_array(value)
                self._stats[value] = None if array is None else range_stats(array, self.low)
                del array
                release_mapped(tensor)
        return self._stats[value]

    def _streamed(self, tensor: ir.TensorProtocol) -> Optional[RangeStats]:
        try:
            return range_stats(None, self.low, chunks=read_chunks(tensor))
        except Exception:  # noqa: BLE001 - unreadable data is reported by the loader, not here
            return None
        finally:
            release_mapped(tensor)


def misfit(stats: RangeStats, tensor: str, low: str) -> str:
    """One phrase: how the values of ``tensor`` do not fit the LOW type."""
    if stats.overflow:
        return f"constant {stats.example_overflow:.3g} in {tensor} exceeds {low} (it would become inf)"
    return f"constant {stats.example_underflow:.3g} in {tensor} underflows to 0 in {low}"
