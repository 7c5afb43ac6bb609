"""Check a written model the way its users will load it: onnxruntime's default session, not the load check's.

The load check (``ampconv.checks.staged``) builds its sessions at
ORT_DISABLE_ALL, to keep weights out of memory. Users build theirs at the
default, ORT_ENABLE_ALL, whose optimizers can refuse a model or crash on it
(``ampconv.runtime.usersession``). ``check_users_session`` builds, at each of
the users' levels, a session of each users'-session probe
(``ampconv.checks.neighborhoods``) or of the whole model, each in a forked
child. A probe's failure is confirmed on the whole model before it stands
(a probe only ever speeds up acceptance) when the model's weights are small
enough to fold whole; the failure then names the nodes the repair may keep
float32 (``ampconv.pipeline.users_repair``).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple

import onnx_ir as ir

from ampconv.checks.neighborhoods import UsersProbe, save_users_probe, users_probes
from ampconv.reading.load import weight_bytes
from ampconv.runtime.usersession import LOADS, UNCHECKED, SessionVerdict, session_verdict


@dataclasses.dataclass(frozen=True)
class UsersFailure:
    """A session users will build that fails, and where to look for the nodes to blame.

    ``nodes``: the names of the failing probe's nodes (every node's, when the
    whole model was loaded); ``members``: per such node, the model's nodes of
    its class, which a culprit stands for (``neighborhoods.UsersProbe.members``).
    """

    verdict: SessionVerdict
    nodes: Tuple[str, ...]
    members: Mapping[str, Sequence[str]]
    whole: bool


def check_users_session(
    model: ir.Model, staged: Path, levels: Sequence[str], timings: Dict[str, object],
    signatures: Optional[Sequence[Optional[Hashable]]] = None, source: Optional[Path] = None,
) -> Tuple[Optional[UsersFailure], List[str]]:
    """Sessions of the written model ``staged`` (from ``model``) at ``levels``: (the first failure or None, notes).

    A failure the input model ``source`` shows at the same level is the
    input's, not the conversion's: a note, not a failure. ``timings`` (the
    report's ``load_check``) records the levels, the probes and the seconds
    taken (``users_seconds``).
    """
    start = time.perf_counter()
    probes = users_probes(model, signatures)
    timings.update(users_levels=list(levels), users_probes=len(probes) if probes is not None else 0,
                   users_probe_nodes=sum(p.nodes for p in probes) if probes is not None else None,
                   users_weights_fed=sum(p.fed for p in probes) if probes is not None else 0)
    paths: List[Path] = []
    try:
        paths = [save_users_probe(probe, staged, k) for k, probe in enumerate(probes or ())]
        failure, notes = _first_failure(model, staged, levels, list(zip(paths, probes or ())), timings)
        if failure is not None and source is not None:
            failure, notes = _unless_the_input_fails(failure, notes, Path(source))
    finally:
        for path in paths:
            path.unlink(missing_ok=True)
    timings["users_seconds"] = round(time.perf_counter() - start, 3)
    return failure, notes


# A probe's failure is confirmed on the whole model when its weights are at most this: folded at
# ORT_ENABLE_ALL, a session holds about four times them. Past it, the probe's failure stands.
CONFIRM_WEIGHT_BYTES = 256 * 1024**2


def _first_failure(model, staged: Path, levels: Sequence[str], probes: List[Tuple[Path, UsersProbe]], timings):
    """The first failing session, level by level.

    A probe's failure stands once the whole model fails too; a whole model
    over ``CONFIRM_WEIGHT_BYTES`` of weights is not loaded to confirm it (its
    session would cost what the probes save): the probe's failure stands.
    """
    notes: List[str] = []
    for level in levels:
        if not probes:
            verdict = session_verdict(staged, level)
            if verdict.failed:
                return _whole_failure(model, verdict), notes
            notes += _unchecked_note(verdict)
            continue
        for path, probe in probes:
            verdict = session_verdict(path, level)
            notes += _unchecked_note(verdict)
            if not verdict.failed:
                continue
            timings["users_probe_refusal"] = verdict.summary()
            confirm = weight_bytes(model) <= CONFIRM_WEIGHT_BYTES  # read only on a failure: it walks every node
            whole = session_verdict(staged, level) if confirm else SessionVerdict(level, UNCHECKED, "too big to load")
            timings["users_probe_confirmed"] = whole.kind != LOADS if confirm else None
            if whole.kind == LOADS:
                break  # the probe's cut edges made it fail; the model users load does not
            if whole.failed:  # the whole model's own words (a crash stays a crash)
                verdict = whole
            return UsersFailure(verdict, tuple(probe.members), probe.members, whole=False), notes
    return None, notes


def _unless_the_input_fails(failure: UsersFailure, notes: List[str], source: Path):
    """``(failure, notes)``, or no failure and a note when the input model fails at that level too."""
    level = failure.verdict.level
    if not session_verdict(source, level).failed:
        return failure, notes
    return None, notes + [f"{failure.verdict.summary()}, and on the input model too: not the conversion's doing "
                          "(the converted model is written as it is)"]


def _whole_failure(model: ir.Model, verdict: SessionVerdict) -> UsersFailure:
    names = tuple(node.name for node in model.graph)
    return UsersFailure(verdict, names, {name: (name,) for name in names}, whole=True)


def _unchecked_note(verdict: SessionVerdict) -> List[str]:
    if verdict.kind != UNCHECKED:
        return []
    return [f"{verdict.summary()}: the model was checked at ORT_DISABLE_ALL only"]


__all__ = ["CONFIRM_WEIGHT_BYTES", "UsersFailure", "check_users_session"]
