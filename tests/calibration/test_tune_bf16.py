"""``--tune`` under ``fallback_dtype="bf16"`` (issue 32): a margin node the search keeps runs bf16 first, float32
when validation fails with it in bf16.

A node the overflow guard keeps only by its margin (values over half the fp16
max, within it) stays under its ``data-overflow`` rule when the search keeps
it, and that rule's float32 becomes bf16 under the fallback. bf16 has fewer
bits than fp16: where that loses what the outputs need, the search runs again
with the kept margin nodes pinned float32 (``data-tune``).
"""

from __future__ import annotations

import numpy as np

import ampconv
from data_models import MARGIN_SCALE, MARGIN_SUB  # x = 4e4 + a signal of +-10; y = Mul(x, 1e-4)
from helpers import decisions, model_from_text, save



def _tune(tmp_path, text, spread, **config):
    src = save(model_from_text(text), tmp_path / "m.onnx")
    folder = tmp_path / "cal"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        np.savez(folder / f"s{i}.npz", x=(40000.0 + rng.uniform(-1.0, 1.0, (1, 64)) * spread).astype(np.float32))
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(
        calibration_data=(str(folder),), overwrite=True, tune=True, rtol=1e-2, atol=1e-2, level="O3", **config))
    return report, decisions(report)


def test_bf16_first_then_float32_for_a_margin_node_bf16_cannot_hold(tmp_path):
    report, nodes = _tune(tmp_path, MARGIN_SUB, 10.0, fallback_dtype="bf16")
    assert nodes["Sub_1"]["precision"] == "HIGH" and nodes["Sub_1"]["rule"] == "data-tune"
    assert "in bf16 (the fallback type) validation fails" in nodes["Sub_1"]["reason"]
    tune = report.tune
    assert tune["passed"] and tune["evaluations"] <= tune["budget"]
    assert any("searched again with them float32" in note for note in tune["notes"])
    # The bf16 search came first: its trials (the margin node kept, hence bf16) failed before float32 passed.
    trials = tune["trials"]
    assert not trials[1]["passed"] and trials[1]["pinned"] == 1 and trials[-1]["passed"]


def test_without_the_fallback_the_search_runs_once(tmp_path):
    """Negative: fallback_dtype float32 keeps today's search (the kept margin node float32 by its guard)."""
    report, nodes = _tune(tmp_path, MARGIN_SUB, 10.0)
    assert nodes["Sub_1"]["precision"] == "HIGH" and nodes["Sub_1"]["rule"] == "data-overflow"
    assert not any("searched again" in note for note in report.tune["notes"])


def test_a_margin_node_that_passes_lowered_is_lowered_under_the_fallback_too(tmp_path):
    """Negative: where validation passes with the margin node fp16, one evaluation, no second search."""
    report, nodes = _tune(tmp_path, MARGIN_SCALE, 1e4, fallback_dtype="bf16")
    assert nodes["Mul_1"]["precision"] == "LOW"
    assert report.tune["evaluations"] == 1 and not any("searched again" in n for n in report.tune["notes"])
