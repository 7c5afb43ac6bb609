"""Range thresholds (``max_finite``, ``min_positive``) and ``--clamp`` for too large and too small constants.

Each rule positive and negative, on the in-memory path and on the streamed
external-data path, through the library and the CLI (docs/hazards.md, "Range
thresholds").
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import ampconv
from ampconv.tensors import chunks
from ampconv.tensors.chunks import CHUNK_ELEMENTS
from ampconv.tensors.low_range import clamp_values, range_stats, to_low
from ampconv.errors import UsageError
from ampconv.core.lowtypes import range_limits
from ampconv_cli.main import cli
from helpers import decisions

FP16_TINY = np.float16(2.0**-24)  # the smallest float16 subnormal: what "raise" makes of tiny values
OLD_KEYS = {"tensor", "consumer", "overflow", "underflow", "max_abs", "detail", "action"}
NEW_KEYS = {"max_finite", "min_positive", "clamped", "flushed", "raised"}


# ------------------------------------------------------------------ models
def _add_model(values, path: Path, name: str = "k", op: str = "Add") -> Path:
    """y = MatMul(x, I) + k: the Add (or ``op``) reads constant ``k`` in its main slot (O2: it follows the LOW
    MatMul)."""
    values = np.asarray(values, np.float32)
    n = values.size
    graph = h.make_graph(
        [h.make_node("MatMul", ["x", "eye"], ["m"], name="mm"), h.make_node(op, ["m", name], ["y"], name="add")],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1, n])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, n])],
        [nh.from_array(np.eye(n, dtype=np.float32), "eye"), nh.from_array(values.reshape(1, n), name)],
    )
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def _conv_model(weight: np.ndarray, path: Path, external: bool = False) -> Path:
    """y = Conv(x, w): ``external`` stores every initializer in ``<path>.data``."""
    out_ch, in_ch, kh, kw = weight.shape
    graph = h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["y"], name="conv")],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1, in_ch, kh, kw])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, out_ch, 1, 1])],
        [nh.from_array(weight.astype(np.float32), "w")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    if external:
        onnx.save(model, str(path), save_as_external_data=True, location=path.name + ".data", size_threshold=0)
    else:
        onnx.save(model, str(path))
    return path


def _tiny_weight(shape=(4, 2, 3, 3), seed: int = 0) -> np.ndarray:
    """A Conv weight whose few values (over 1% of them: they pin the Conv) are too small for fp16.

    Normal in float32 (1e-30): values float32 itself holds only as subnormals never pin
    (``RangeStats.pins``; tests/end_to_end/test_hazards.py).
    """
    rng = np.random.default_rng(seed)
    weight = rng.normal(0, 0.1, shape).astype(np.float32)
    flat = weight.reshape(-1)
    flat[::9] = np.float32(1e-30) * np.sign(flat[::9])  # signed, fp16 rounds them to 0
    return weight


def _convert(src: Path, **config):
    dst = src.with_name(src.stem + ".out.onnx")
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True, **config))
    return report, onnx.load(str(dst))


def _stored(model: onnx.ModelProto, name: str) -> np.ndarray:
    return nh.to_array(next(t for t in model.graph.initializer if t.name == name))


def _record(report, tensor: str) -> dict:
    return next(c for c in report.constants if c["tensor"] == tensor)


# ------------------------------------------------------------- max_finite
def test_custom_max_finite_pins_a_constant_the_default_lets_through(tmp_path):
    src = _add_model([3000.0, -2.0, 0.5, 1.0], tmp_path / "m.onnx")
    report, _ = _convert(src)
    assert decisions(report)["add"]["precision"] == "LOW" and report.constants == []
    report, out = _convert(src, max_finite=1000.0)
    node = decisions(report)["add"]
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant")
    assert "max_finite 1000" in node["reason"] and "--max-finite" in node["reason"]
    assert "--clamp" in node["reason"] and "+-1000" in node["reason"]
    record = _record(report, "k")
    assert record["overflow"] == 1 and record["max_finite"] == 1000.0 and record["action"] == "consumer kept float32"
    assert "above max_finite 1000" in record["detail"]
    assert _stored(out, "k").dtype == np.float32  # left untouched


def test_custom_max_finite_lets_through_a_constant_inside_it(tmp_path):
    src = _add_model([999.0, -1000.0, 0.5, 1.0], tmp_path / "m.onnx")  # |x| <= 1000: inside
    report, out = _convert(src, max_finite=1000.0)
    assert decisions(report)["add"]["precision"] == "LOW" and report.constants == []
    assert _stored(out, "k").dtype == np.float16


def test_default_limit_pins_overflow_and_quotes_the_type_max(tmp_path):
    src = _add_model([7e4, 1.0], tmp_path / "m.onnx")
    report, _ = _convert(src)
    node = decisions(report)["add"]
    assert node["rule"] == "hard-constant" and "max 65504" in node["reason"] and "--max-finite" in node["reason"]
    record = _record(report, "k")
    assert OLD_KEYS | NEW_KEYS <= set(record)  # old keys kept, new ones added
    assert record["max_finite"] == 65504.0 and record["min_positive"] == 2.0**-24
    assert (record["clamped"], record["flushed"], record["raised"]) == (0, 0, 0)


def test_clamp_clamps_to_max_finite(tmp_path):
    src = _add_model([3000.0, -5000.0, 10.0, 1000.0], tmp_path / "m.onnx")
    report, out = _convert(src, max_finite=1000.0, clamp=True)
    assert decisions(report)["add"]["precision"] == "LOW"
    np.testing.assert_array_equal(_stored(out, "k").reshape(-1), np.array([1000, -1000, 10, 1000], np.float16))
    record = _record(report, "k")
    assert record["clamped"] == 2 and "2 clamped to +-1000" in record["action"]


def test_clamp_to_max_finite_in_bfloat16(tmp_path):
    src = _add_model([3e4, -2.0], tmp_path / "m.onnx")
    report, _ = _convert(src, dtype="bf16", max_finite=1e4)
    assert decisions(report)["add"]["rule"] == "hard-constant"
    report, out = _convert(src, dtype="bf16", max_finite=1e4, clamp=True)
    stored = _stored(out, "k").reshape(-1)
    assert stored.dtype == ml_dtypes.bfloat16 and float(stored[0]) == float(ml_dtypes.bfloat16(1e4))


# ----------------------------------------------------------- min_positive
def test_custom_min_positive_pins_a_small_constant_the_default_lets_through(tmp_path):
    src = _add_model([1e-5, 1.0], tmp_path / "m.onnx")  # 1e-5 is a float16 subnormal: it does not round to 0
    report, _ = _convert(src)
    assert decisions(report)["add"]["precision"] == "LOW" and report.constants == []
    report, _ = _convert(src, min_positive=1e-4)
    node = decisions(report)["add"]
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant")
    assert "below min_positive 0.0001" in node["reason"] and "--min-positive" in node["reason"]
    assert "--clamp-small flush" in node["reason"]  # the underflow advice names the real options
    record = _record(report, "k")
    assert record["underflow"] == 1 and record["min_positive"] == 1e-4


def test_custom_min_positive_lets_through_values_above_it(tmp_path):
    src = _add_model([1e-3, 1.0, 0.0, -0.0], tmp_path / "m.onnx")  # zeros are never "too small"
    report, _ = _convert(src, min_positive=1e-4)
    assert decisions(report)["add"]["precision"] == "LOW" and report.constants == []


def test_default_underflow_reason_names_the_real_option(tmp_path):
    # A divisor of 1e-9 (an Add of it would be judged by its effect and stored rounded: plan/effect.py).
    src = _add_model([1e-9, 1.0], tmp_path / "m.onnx", op="Div")
    report, _ = _convert(src)
    reason = decisions(report)["add"]["reason"]
    assert "underflows to 0 in float16" in reason and "--min-positive" in reason
    assert "use --clamp to raise such values to +-5.96e-08" in reason and "--clamp-small flush" in reason


def test_few_values_below_min_positive_in_a_large_weight_are_reported_not_pinned(tmp_path):
    values = np.linspace(0.5, 1.0, 1000).astype(np.float32)
    values[7] = 3e-5  # one value of 1000 below the custom limit: under 1%
    src = _add_model(values, tmp_path / "m.onnx")
    report, out = _convert(src, min_positive=1e-4)
    assert decisions(report)["add"]["precision"] == "LOW"
    record = _record(report, "k")
    assert record["underflow"] == 1 and "stored rounded" in record["action"] and "min_positive" in record["action"]
    assert _stored(out, "k").reshape(-1)[7] == np.float16(3e-5)  # rounded, not flushed


# ------------------------------------------------------ clamp: tiny values
@pytest.mark.parametrize("small", ["raise", "flush"])
def test_clamp_handles_tiny_conv_weights_in_memory(tmp_path, small):
    weight = _tiny_weight()
    src = _conv_model(weight, tmp_path / "conv.onnx")
    report, _ = _convert(src)
    # Without --clamp they are judged by their effect: flushed, they move no output by more than its rounding.
    assert decisions(report)["conv"]["precision"] == "LOW"
    assert "flushing them changes each output of conv" in _record(report, "w")["action"]
    report, _ = _convert(src, min_positive=1e-7)  # a limit of the user's own: judged by it, no way out but --clamp
    assert decisions(report)["conv"]["rule"] == "hard-constant"
    report, out = _convert(src, clamp=True, clamp_small=small)
    assert decisions(report)["conv"]["precision"] == "LOW"
    stored = _stored(out, "w").reshape(-1)
    original = weight.reshape(-1)
    tiny = (original != 0) & (np.abs(original) < 1e-20)
    expected = np.where(tiny, np.float32(2.0**-24 if small == "raise" else 0.0) * np.sign(original), original)
    np.testing.assert_array_equal(stored.view(np.uint16), expected.astype(np.float16).view(np.uint16))
    assert np.array_equal(np.signbit(stored[tiny]), np.signbit(original[tiny]))  # signs kept, zeros included
    record = _record(report, "w")
    assert record[{"raise": "raised", "flush": "flushed"}[small]] == int(tiny.sum()) > 0
    assert record[{"raise": "flushed", "flush": "raised"}[small]] == 0 and record["clamped"] == 0


def test_clamp_raises_to_a_custom_min_positive(tmp_path):
    src = _add_model([1e-6, -1e-6, 1.0, 0.0], tmp_path / "m.onnx")
    report, out = _convert(src, clamp=True, min_positive=1e-4)
    stored = _stored(out, "k").reshape(-1)
    assert stored[0] == np.float16(1e-4) and stored[1] == -np.float16(1e-4) and stored[3] == 0
    assert _record(report, "k")["raised"] == 2 and "raised to +-0.0001" in _record(report, "k")["action"]


def test_clamp_flush_clamp_raise_streamed_external_weight(tmp_path, monkeypatch):
    """A weight over several 1 MiB chunks in external data: clamped while it is written, chunk by chunk."""
    out_ch, in_ch = 4, (CHUNK_ELEMENTS * 5 // 2) // 9 // 4 + 1  # 2.5 chunks of 3x3 kernels
    weight = _tiny_weight((out_ch, in_ch, 3, 3), seed=3)
    flat = weight.reshape(-1)
    flat[[5, CHUNK_ELEMENTS + 11, flat.size - 2]] = [7e4, -2e5, 1e6]  # overflow in three chunks
    streamed = []
    original_tofile = chunks.CastTensor.tofile

    def counting_tofile(self, file):
        streamed.append(self.name)
        return original_tofile(self, file)

    monkeypatch.setattr(chunks.CastTensor, "tofile", counting_tofile)
    for small in ("raise", "flush"):
        folder = tmp_path / small
        folder.mkdir()
        src = _conv_model(weight, folder / "big.onnx", external=True)
        report, out = _convert(src, clamp=True, clamp_small=small, max_finite=6e4)
        assert decisions(report)["conv"]["precision"] == "LOW"
        assert (folder / "big.out.onnx.data").exists()  # written as external data
        stored = _stored(out, "w").reshape(-1)
        limits = range_limits("fp16", max_finite=6e4, clamp_small=small)
        expected = clamp_values(flat, limits).astype(np.float16)
        np.testing.assert_array_equal(stored.view(np.uint16), expected.view(np.uint16))
        assert list(stored[[5, CHUNK_ELEMENTS + 11, flat.size - 2]]) == [60000, -60000, 60000]
        tiny = (flat != 0) & (np.abs(flat) < 1e-20)
        assert np.all(stored[tiny] == (FP16_TINY if small == "raise" else 0) * np.sign(flat[tiny]))
        record = _record(report, "w")
        assert record["clamped"] == 3 and record[small + ("d" if small == "raise" else "ed")] == int(tiny.sum())
    assert streamed.count("w") == 2  # once per conversion: the streamed cast wrote it


# ------------------------------------------------------------ unit: scan/clamp
def test_scan_counts_are_exactly_the_values_the_clamp_changes():
    rng = np.random.default_rng(5)
    values = (rng.standard_normal(CHUNK_ELEMENTS + 999) * 10.0 ** rng.integers(-45, 8, CHUNK_ELEMENTS + 999))
    values = values.astype(np.float32)
    values[:4] = [np.inf, -np.inf, np.nan, -0.0]
    for limits in (range_limits("fp16"), range_limits("fp16", 1000.0, 1e-3, "flush"), range_limits("bf16", 1e30)):
        stats = range_stats(values, limits.low.key, limits=limits)
        changed = clamp_values(values, limits) != values
        changed &= ~np.isnan(values)
        assert int(changed.sum()) == stats.overflow + stats.underflow
        assert stats.limits is limits
        low = to_low(values, limits.low.key, True, limits)
        assert np.all(np.isfinite(low[4:]) | ~np.isfinite(values[4:]))  # nothing finite became inf
        assert np.isinf(low[0]) and np.isnan(low[2]) and np.signbit(low[3])  # inf, nan, -0 kept


def test_default_limits_count_what_rounding_loses():
    values = np.array([65504, 65519, 65520, 2.0**-25, 2.0**-25 * 1.01, 0.0], np.float32)
    stats = range_stats(values, "fp16")
    assert (stats.overflow, stats.underflow) == (1, 1)  # 65520 becomes inf, 2^-25 becomes 0
    exact = range_stats(values, "fp16", limits=range_limits("fp16", max_finite=65504.0, min_positive=2.0**-24))
    assert (exact.overflow, exact.underflow) == (2, 2)  # |x| > 65504, 0 < |x| < 2^-24


# --------------------------------------------------------------- validation
@pytest.mark.parametrize(
    "config,words",
    [
        (dict(max_finite=1e5), ["max_finite", "65504"]),
        (dict(dtype="bf16", max_finite=1e39), ["max_finite", "bfloat16 max"]),
        (dict(max_finite=0.0), ["max_finite", "> 0"]),
        (dict(max_finite=float("nan")), ["max_finite", "> 0"]),
        (dict(min_positive=-1e-3), ["min_positive", "> 0"]),
        (dict(min_positive=1e-9), ["min_positive", "smallest positive", "5.96e-08"]),
        (dict(min_positive=10.0, max_finite=5.0), ["min_positive", "below max_finite"]),
        (dict(min_positive=1e5), ["min_positive", "below max_finite 65504"]),
        (dict(clamp_small="flush"), ["clamp_small", "clamp"]),
        (dict(clamp=True, clamp_small="zero"), ["clamp_small", "raise or flush"]),
    ],
)
def test_bad_limits_are_usage_errors_naming_the_parameter(config, words):
    with pytest.raises(UsageError) as info:
        ampconv.Config(**config)
    message = str(info.value)
    assert all(word in message for word in words), message
    assert "--" not in message  # the library speaks of parameters, not flags


def test_good_limits_are_accepted():
    config = ampconv.Config(max_finite=65504, min_positive=2.0**-24, clamp=True, clamp_small="flush")
    assert (config.max_finite, config.min_positive, config.clamp_small) == (65504, 2.0**-24, "flush")
    assert ampconv.Config(dtype="bf16", max_finite=1e38, min_positive=1e-38).max_finite == 1e38


# ---------------------------------------------------------------------- CLI
def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize(
    "args,words",
    [
        (["--max-finite", "1e5"], ["max_finite", "65504"]),
        (["--max-finite", "-1"], ["--max-finite"]),
        (["--min-positive", "0.5", "--max-finite", "0.1"], ["min_positive", "below max_finite"]),
        (["--min-positive", "1e-9"], ["min_positive", "smallest positive"]),
        (["--clamp-small", "flush"], ["--clamp-small", "--clamp"]),
        (["--clamp", "--clamp-small", "zero"], ["--clamp-small"]),
    ],
)
def test_cli_bad_limits_exit_2_with_one_line(tmp_path, args, words):
    src = _add_model([1.0, 2.0], tmp_path / "m.onnx")
    result = _invoke("convert", src, "-o", tmp_path / "o.onnx", *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ampconv: error:"), result.stderr
    assert all(word in result.stderr for word in words), result.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_cli_max_finite_min_positive_and_clamp_small_reach_the_report(tmp_path):
    src = _add_model([3000.0, 1e-6, 1.0], tmp_path / "m.onnx")
    report_path = tmp_path / "r.json"
    result = _invoke("convert", src, "-o", tmp_path / "o.onnx", "--max-finite", "1000", "--min-positive", "1e-5",
                     "--clamp", "--clamp-small", "flush", "--report", report_path)
    assert result.exit_code == 0, result.output
    record = json.loads(report_path.read_text())["constants"][0]
    assert (record["max_finite"], record["min_positive"]) == (1000.0, 1e-5)
    assert (record["clamped"], record["flushed"], record["raised"]) == (1, 1, 0)
    stored = _stored(onnx.load(str(tmp_path / "o.onnx")), "k").reshape(-1)
    np.testing.assert_array_equal(stored, np.array([1000, 0, 1], np.float16))
    assert "clamped to +-1000" in result.stderr and "flushed to +-0" in result.stderr


def _mask_model(fill: float, path: Path) -> Path:
    """scores = x + M; y = Softmax(scores): M holds ``fill`` above the diagonal (an attention mask)."""
    mask = np.triu(np.full((3, 3), fill, np.float32), k=1)
    graph = h.make_graph(
        [h.make_node("Add", ["x", "M"], ["s"], name="add"), h.make_node("Softmax", ["s"], ["y"], name="softmax")],
        "g",
        [h.make_tensor_value_info("x", T.FLOAT, [3, 3])],
        [h.make_tensor_value_info("y", T.FLOAT, [3, 3])],
        [nh.from_array(mask, "M")],
    )
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), str(path))
    return path


def test_a_mask_fill_the_low_type_stores_is_not_rewritten_under_a_stricter_max_finite(tmp_path):
    src = _mask_model(-1e4, tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(level="O3", max_finite=5000.0))
    assert decisions(report)["add"]["precision"] == "HIGH"  # -1e4 is over the user's limit: pinned
    assert not [c for c in report.constants if "attention-mask" in c["action"]]
    stored = nh.to_array(onnx.load(str(tmp_path / "o.onnx")).graph.initializer[0])
    assert stored.min() == -1e4  # untouched, not moved to -32768


def test_a_real_mask_fill_is_still_stored_as_the_low_mask_fill(tmp_path):
    src = _mask_model(-1e9, tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(level="O3"))
    assert decisions(report)["add"]["precision"] == "LOW"
    assert [c for c in report.constants if "attention-mask" in c["action"]]


def test_clamping_never_lands_above_max_finite():
    limits = range_limits("fp16", 1000.3)
    out = to_low(np.array([5000.0, -5000.0, 1000.2], np.float32), "fp16", True, limits)
    assert float(np.abs(out.astype(np.float32)).max()) <= 1000.3
    assert float(out[0]) == 1000.0  # the largest float16 <= 1000.3 (1000.5 would be above it)
