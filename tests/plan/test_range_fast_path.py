"""constants.range_stats: the one-step check of small tensors agrees with the general scan."""

from __future__ import annotations

import numpy as np
import pytest

from ampconv.tensors.chunks import CHUNK_ELEMENTS
from ampconv.tensors.low_range import SMALL_ELEMENTS, _all_in_range, range_stats
from ampconv.core.lowtypes import range_limits


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


@pytest.mark.parametrize("low,max_finite", [("fp16", None), ("bf16", None), ("fp16", 1000.0)])
def test_batch_in_range_agrees_with_the_one_tensor_check(low, max_finite):
    from ampconv.tensors.low_range import batch_in_range
    limits = range_limits(low, max_finite=max_finite)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (1, 7, 300, SMALL_ELEMENTS)]
    arrays += [np.zeros(5, np.float32), np.array([0.5, 1e6], np.float32), np.array([np.nan], np.float32),
               np.array([1.0, -1e-9, 0.0], np.float32), np.array([-np.inf, 2.0], np.float32),
               np.array([3000.0], np.float32)]
    batched = batch_in_range([a.astype("<f4").tobytes() for a in arrays], limits)
    assert batched == [_all_in_range(a, limits) for a in arrays]
    assert batched[6] is None and batched[8] is None  # nan, inf: left to the general scan in every type
    assert batch_in_range([], limits) == []


def test_prefetch_fills_the_planner_cache_only_for_small_in_range_proto_tensors():
    import onnx
    import onnx_ir as ir

    from ampconv.plan.ranges import RangeReader

    def value(name, array):
        tensor = ir.serde.deserialize_tensor(onnx.numpy_helper.from_array(array, name=name))
        return ir.Value(name=name, const_value=tensor)

    small = value("small", np.linspace(-1, 1, 64, dtype=np.float32))
    big = value("big", np.ones(SMALL_ELEMENTS + 1, np.float32))
    wild = value("wild", np.array([1.0, 1e9], np.float32))
    ints = value("ints", np.arange(4, dtype=np.int64))
    in_memory = ir.Value(name="mem", const_value=ir.Tensor(np.ones(3, np.float32)))
    reader = RangeReader("fp16")
    reader.prefetch([small, big, wild, ints, in_memory])
    assert set(reader._stats) == {small}
    assert reader.stats(small) == range_stats(small.const_value.numpy(), "fp16")
    assert reader.stats(wild).overflow == 1  # left to the general scan, which counts it
