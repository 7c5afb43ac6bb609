"""The load-check probe against a whole-model onnxruntime session, on the same converted model.

``compare(src, level, dtype, folder)`` converts ``src`` with the runtime check
off (the checker still runs), then judges the written model twice:

- **whole**: one onnxruntime session of the whole model, its refusal read by
  ``ampconv.runtime.verdict.judge`` (load / accept / pin / fail);
- **probe**: what the converter decides (``ampconv.checks.staged.check_staged``: the
  probe, and a probe refusal confirmed on the whole model), and, apart, the
  probe's own raw answer before any confirmation.

The converter's decision must equal the whole model's (``agree``). The raw
probe may refuse a model the whole session accepts (a false rejection: the
confirmation overrules it, at the cost of one whole session), but must never
accept one the whole session refuses (``false_accept``): nothing would catch it.
Used by tests/checks/test_probe_differential.py (a sample in ``make test``, the whole
corpus under the ``corpus`` marker).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Optional

import onnx_ir as ir

import ampconv
from ampconv.checks.staged import CheckSettings, check_staged
from ampconv.errors import AmpconvError, ConversionError
from ampconv.reading.load import load_model
from ampconv.runtime.loadcheck import runtime_refusal
from ampconv.checks.probe import build_probe
from ampconv.reading.shapes import inferred_shapes
from ampconv.reading.repair import rankless_interface
from ampconv.runtime.verdict import judge


def compare(src: str, level: str, dtype: str, folder: str) -> Optional[Dict[str, object]]:
    """One differential row for ``src`` converted at ``level``/``dtype``; None when the conversion itself fails."""
    dst = os.path.join(folder, f"diff.{level}.{dtype}.onnx")
    try:
        ampconv.convert(src, dst, ampconv.Config(level=level, dtype=dtype, overwrite=True, check_runtime=False))
    except AmpconvError:
        return None  # the checker refuses it: not the probe's question
    model = load_model(dst, infer_types=True)
    whole = _whole_verdict(model, dst, dtype)
    decided = _decided(model, Path(dst), Path(src), dtype)
    raw = _raw_probe(model, folder, dtype)
    return {
        "whole": whole,
        "decided": decided,
        "raw_probe": raw,
        "agree": _class(whole) == _class(decided) and set(whole[1]) <= set(decided[1]),
        "false_accept": raw is not None and _class(raw) == "accepted" and _class(whole) != "accepted",
        "false_reject": raw is not None and _class(raw) != "accepted" and _class(whole) == "accepted",
    }


def _class(verdict) -> str:
    """accepted (it loads, or its refusal is excused), pin or fail."""
    return "accepted" if verdict[0] in ("load", "accept") else verdict[0]


def _whole_verdict(model: ir.Model, path: str, dtype: str):
    """(kind, pins) of one whole-model session: kind is load, accept, pin or fail."""
    refusal = runtime_refusal(Path(path))
    if refusal is None:
        return ("load", ())
    verdict = judge(ConversionError(refusal, refusal, ConversionError.RUNTIME), model, dtype)
    return (verdict.kind, tuple(sorted(verdict.pins)))


def _decided(model: ir.Model, dst: Path, src: Path, dtype: str):
    """(kind, pins) the converter's checks decide for the written model: load (or accept), pin or fail."""
    try:
        settings = CheckSettings(runtime=True, dtype=dtype, rankless=rankless_interface(model))
        outcome = check_staged(model, dst, src, settings, known_pins={}, timings={})
    except AmpconvError:
        return ("fail", ())
    if outcome.pins:
        return ("pin", tuple(sorted(outcome.pins)))
    accepted = any("onnxruntime" in note for note in outcome.notes)
    return ("accept" if accepted else "load", ())


def _raw_probe(model: ir.Model, folder: str, dtype: str):
    """(kind, pins) of the probe alone, unconfirmed; None when the model has no probe (loaded whole)."""
    probe = build_probe(model, inferred_shapes(model))
    if probe is None:
        return None
    path = os.path.join(folder, "raw-probe.onnx")
    ir.save(probe.model, path)
    refusal = runtime_refusal(Path(path))
    if refusal is None:
        return ("load", ())
    verdict = judge(ConversionError(refusal, refusal, ConversionError.RUNTIME), probe.model, dtype)
    return (verdict.kind, tuple(sorted(verdict.pins)))
