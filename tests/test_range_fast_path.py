"""constants.range_stats: the one-step check of small tensors agrees with the general scan."""

from __future__ import annotations

import numpy as np
import pytest

from ampconv.chunks import CHUNK_ELEMENTS
from ampconv.constants import SMALL_ELEMENTS, _all_in_range, range_stats
from ampconv.lowtypes import range_limits


def _general(array, low):
    flat = np.ascontiguousarray(array, dtype=np.float32).reshape(-1)
    return range_stats(None, low, chunks=[flat[i:i + CHUNK_ELEMENTS] for i in range(0, flat.size, CHUNK_ELEMENTS)])


@pytest.mark.parametrize("low", ["fp16", "bf16"])
def test_in_range_small_tensors_take_the_fast_path_with_the_same_answer(low):
    rng = np.random.default_rng(0)
    array = np.concatenate([rng.standard_normal(300), np.zeros(20)]).astype(np.float32)
    fast = _all_in_range(array, range_limits(low))
    assert fast is not None
    assert fast == _general(array, low) == range_stats(array, low)


@pytest.mark.parametrize("value", [1e6, np.inf, np.nan, 1e-9, -2e-8])
def test_any_value_out_of_range_leaves_it_to_the_general_scan(value):
    array = np.array([0.5, -0.25, 0.0, value], dtype=np.float32)
    assert _all_in_range(array, range_limits("fp16")) is None
    stats = range_stats(array, "fp16")
    assert stats == _general(array, "fp16")
    assert stats.overflow or stats.underflow or not np.isfinite(value)


def test_a_tensor_above_the_small_size_is_scanned_in_chunks():
    array = np.full(SMALL_ELEMENTS + 1, 70000.0, dtype=np.float32)
    stats = range_stats(array, "fp16")
    assert stats.overflow == SMALL_ELEMENTS + 1 and stats == _general(array, "fp16")


def test_an_empty_tensor():
    assert range_stats(np.zeros(0, np.float32), "fp16").size == 0
