"""Check a written model and turn a refusal into what the converter does next.

The converter writes every model into a private staging folder and calls
``check_staged`` before publishing it:

1. the full onnx.checker on the written file (``loadcheck.check_with_checker``);
2. onnxruntime on the load-check probe (``ampconv.checks.probe``) when one can be
   built, else on the whole model;
3. once both accept it, the sessions its users will build: onnxruntime at its
   default optimization level, in forked children (``ampconv.checks.users``). A
   failure there is returned (``CheckOutcome.users_failure``) for the
   converter to repair (``ampconv.pipeline.users_repair``).

The probe only ever speeds up acceptance. When it is refused, the refusal is
confirmed on the whole model before it pins a node or fails the run: if the
whole model loads, the probe was wrong (its fresh inputs are not the real
graph's) and the model is accepted; if it is refused, the whole model's words
decide, and a node they blame that the probe's rejected signature stands for
pins every node of that signature at once (a thousand bf16 MatMuls are pinned
in one round, not a thousand).

``ampconv.runtime.verdict`` reads each tool's words into accept / pin / fail.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import onnx_ir as ir

from ampconv.errors import ConversionError, ModelLoadError
from ampconv.core.graphs import all_graphs
from ampconv.runtime.loadcheck import check_with_checker, check_with_runtime, checker_error, first_line, runtime_available
from ampconv.checks.probe import Probe, build_probe, expand, signatures_of
from ampconv.checks.users import UsersFailure, check_users_session
from ampconv.reading.shapes import inferred_shapes
from ampconv.reading.sidecar import Checker
from ampconv.reading.repair import input_refusal
from ampconv.runtime.verdict import ACCEPT, PIN, Verdict, judge


@dataclasses.dataclass(frozen=True)
class CheckSettings:
    """How a written model is checked.

    ``runtime``: run onnxruntime too (else the checker alone); ``dtype``: the
    LOW type, to read a missing-kernel refusal; ``rankless``: main-graph
    inputs/outputs whose rank is not fixed (``repair.rankless_interface``);
    ``plan_again``: a refusal that blames nodes returns pins (conversion)
    rather than failing (validation judges a model, it does not re-plan it);
    ``levels``: the optimization levels of the users' sessions to check once
    the load check accepts (``usersession.users_levels``; empty: none).
    """

    runtime: bool
    dtype: str
    rankless: Sequence[str] = ()
    plan_again: bool = True
    levels: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class CheckOutcome:
    """What the checks of a written model decided: notes to report, nodes to pin and plan again, or a users' failure.

    ``users_failure``: the load check accepts the model but a session its users
    will build fails; nothing is published, and the converter repairs it.
    """

    notes: Sequence[str] = ()
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    users_failure: Optional[UsersFailure] = None


def check_staged(
    model: ir.Model,
    staged: Path,
    src: Path,
    settings: CheckSettings,
    *,
    known_pins: Mapping[str, str],
    timings: Dict[str, object],
    checker: Optional[Checker] = None,
) -> CheckOutcome:
    """Check the model ``staged`` (written from ``model``, converted from ``src``); see the module docstring.

    Returns the notes to report when the model may be published, or the new
    pins when a check blames nodes not pinned yet (``known_pins``). Raises
    ``ConversionError`` when a check fails with nothing new to pin (or, with
    ``settings.plan_again`` off, whenever it fails), and ``ModelLoadError``
    when onnxruntime refuses the input itself. ``timings`` (the report's
    ``load_check``) records how the checks ran. ``checker``, a child process
    started before the model was written, runs the full checker while this
    one builds the probe.
    """
    runtime, dtype, rankless = settings.runtime, settings.dtype, settings.rankless
    full_check = None
    if checker is not None:
        checker.submit(staged, rankless)
        full_check = functools.partial(_checker_error, checker, staged, rankless)
    signatures = signatures_of(model) if runtime and runtime_available() and not model.functions else None
    probe = build_probe(model, inferred_shapes(model), signatures) if signatures is not None else None
    timings.update(
        runtime=runtime,
        nodes=sum(len(g) for g in all_graphs(model)),
        probe_nodes=probe.nodes if probe is not None else None,
    )
    notes: List[str] = []
    try:
        note = check_with_checker(staged, source=src, timings=timings, rankless=rankless, full_check=full_check)
        notes += [note] if note else []
        if not runtime:
            return CheckOutcome(notes + ["onnxruntime load check skipped"])
        if not runtime_available():
            return CheckOutcome(notes + ["onnxruntime not installed: load check skipped"])
        if probe is None:
            check_with_runtime(staged, timings=timings)
        else:
            _check_probe(probe, staged, timings)
    except ConversionError as exc:
        error, verdict, pins = _judged(exc, model, probe, staged, dtype, timings)
    else:
        return _users_outcome(model, staged, src, settings, (timings, signatures, notes))
    if verdict is None:  # the whole model loads: the probe's refusal did not hold
        return _users_outcome(model, staged, src, settings, (timings, signatures, notes))
    if verdict.kind == ACCEPT:
        return CheckOutcome(notes + [verdict.note] if verdict.note else notes)
    if verdict.kind == PIN and settings.plan_again and not set(pins) <= set(known_pins):
        return CheckOutcome(notes, pins)
    refusal = input_refusal(src) if error.tool == ConversionError.RUNTIME else None
    if refusal is not None:
        raise ModelLoadError(f"{src}: the input model is invalid for onnxruntime: {refusal}") from None
    raise error  # nothing new to pin: planning again would give the same model


def _users_outcome(model: ir.Model, staged: Path, src: Path, settings: CheckSettings, found: tuple) -> CheckOutcome:
    """The outcome once the load check accepts: the users' sessions (``settings.levels``) decide.

    ``found``: the check's timings, the model's node signatures and the notes so far.
    """
    timings, signatures, notes = found
    if not settings.levels:
        return CheckOutcome(notes)
    failure, more = check_users_session(model, staged, settings.levels, timings, signatures, source=src)
    return CheckOutcome(notes + more, users_failure=failure)


def _checker_error(checker: Checker, staged: Path, rankless: Sequence[str]) -> Optional[Exception]:
    """The ``checker`` child's verdict on ``staged``; the checker run here when the child gives none."""
    try:
        return checker.error()
    except Checker.Unavailable:
        return checker_error(staged, full=True, rankless=rankless)


def _check_probe(probe: Probe, staged: Path, timings: Dict[str, object]) -> None:
    """onnxruntime on the probe, written beside the staged model in a folder of its own (removed after)."""
    folder = staged.parent / ".probe"
    folder.mkdir()
    try:
        path = folder / "probe.onnx"
        ir.save(probe.model, str(path))
        check_with_runtime(path, timings=timings)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _judged(exc: ConversionError, model: ir.Model, probe: Optional[Probe], staged: Path, dtype: str, timings):
    """(the error that stands, its verdict, the pins): a probe's refusal is confirmed on the whole model first.

    The verdict is None when the whole model loads although the probe was refused.
    """
    if exc.tool != ConversionError.RUNTIME or probe is None:
        verdict = judge(exc, model, dtype)
        return exc, verdict, dict(verdict.pins)
    on_probe = judge(exc, probe.model, dtype)
    if on_probe.kind == ACCEPT:
        return exc, on_probe, {}
    timings["probe_refusal"] = first_line(exc)
    try:
        check_with_runtime(staged, timings=timings, key="confirm_seconds")
    except ConversionError as whole:
        verdict = judge(whole, model, dtype)
        pins = dict(verdict.pins)
        signature_pins = expand(dict(on_probe.pins), probe) if on_probe.kind == PIN else {}
        if set(pins) & set(signature_pins):  # the whole model confirms the signature's rejection
            pins = {**signature_pins, **pins}
        timings["probe_confirmed"] = True
        return whole, Verdict(verdict.kind, verdict.note, pins), pins
    timings["probe_confirmed"] = False
    return exc, None, {}


__all__ = ["CheckOutcome", "CheckSettings", "check_staged"]
