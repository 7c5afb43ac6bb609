"""Repair a model whose users' session fails: find the nodes to keep float32, by bisection, and say why.

The load check accepted the model at ORT_DISABLE_ALL; a session at the
users' level (ORT_ENABLE_ALL) crashes or refuses it
(``ampconv.checks.users``). Whatever onnxruntime's optimizer trips on, it
trips on LOW nodes: the same graph in float32 loads. So the nodes to blame are
among the LOW (and fallback-type) nodes of the failing probe, and
``users_pins`` finds them with ``ampconv.checks.bisect``: each question plans
the model again from the input with a candidate set pinned (rule
``runtime-pin``, exactly as the published model will be planned), rebuilds
the failing probe's nodes (with the casts the pins brought) and builds a
session of it, at the failing level, in a forked child. A culprit stands for
every node of its class (``UsersFailure.members``). The converter then plans
again with the pins, and checks the result as usual.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, FrozenSet, List, Mapping, Optional

import onnx_ir as ir

from ampconv.checks.bisect import Culprits, culprits
from ampconv.checks.neighborhoods import probe_of
from ampconv.checks.users import UsersFailure
from ampconv.core.graphs import fixed_graph_list
from ampconv.core.heavy_ops import is_heavy_op
from ampconv.core.lowtypes import low_type
from ampconv.core.precision import Precision
from ampconv.pipeline.stages import rewrite
from ampconv.plan import Plan
from ampconv.runtime.loadcheck import UNOPTIMIZED
from ampconv.runtime.schema import normalize_domain
from ampconv.runtime.usersession import DEFAULT_LEVEL, session_verdict
from ampconv.writing.outputs import staging_dir
from ampconv.writing.writer import INLINE_TENSOR_MAX_BYTES, write_model

# Sessions the bisection may build before it settles for a larger, known-good set of pins.
MAX_SESSIONS = 48


@dataclasses.dataclass(frozen=True)
class UsersRepair:
    """The pins that make the users' session load, and the report's note saying what and why."""

    pins: Mapping[str, str]
    note: str


def users_pins(request, fresh: Callable[[], ir.Model], pins: Mapping[str, str], data, plan: Optional[Plan],
               failure: UsersFailure) -> Optional[UsersRepair]:
    """The repair of ``failure`` (a users' session of the model planned with ``pins`` fails); None when none is found.

    ``request``, ``fresh`` and ``data`` are the converter's (``stages.Request``,
    a fresh copy of the input, ``stages.DataFindings``); ``plan`` is the
    failing attempt's, whose LOW and fallback nodes in the failing probe are
    the candidates.
    """
    candidates = _candidates(plan, failure)
    if not candidates:
        return None
    level = failure.verdict.level
    reason = (f"{failure.verdict.summary()} with this node in {low_type(request.plan_options.dtype).name} "
              f"(it loads at {UNOPTIMIZED}): kept float32 so that the session users build loads")
    dry = dataclasses.replace(request, dry_run=True)
    with staging_dir(request.dst) as folder:

        def fails(extra: FrozenSet[str]) -> bool:
            model = fresh()
            with fixed_graph_list(model):
                done = rewrite(dry, model, {**pins, **{name: reason for name in extra}}, data)
            path = _write_region(done, failure, folder)
            if path is None:
                return True
            return session_verdict(path, level).failed

        found = culprits(candidates, fails, MAX_SESSIONS)
    if found is None:
        return None
    new = {member: reason for name in sorted(found.nodes) for member in failure.members.get(name, (name,))}
    return UsersRepair(new, _note(failure, found, new, len(candidates)))


def _candidates(plan: Optional[Plan], failure: UsersFailure) -> List[str]:
    """The failing probe's nodes that the plan put in LOW or the fallback type: light ops first, last node first.

    The bisection keeps the shortest prefix that makes the session load, so
    the order is a preference. Light ops first: a float32 Transpose costs a
    cast, a float32 MatMul the speed the conversion is for. Last node first: a
    pinned node takes the gray nodes that follow it to float32 with it, so
    searching from the front would blame the producer of the node to blame.
    """
    if plan is None:
        return []
    heavy = {}
    for node, node_plan in plan.nodes.items():
        if node.name and node_plan.decision.precision in (Precision.LOW, Precision.FALLBACK):
            heavy[node.name] = is_heavy_op(node.op_type, normalize_domain(node.domain))
    named = [name for name in reversed(failure.nodes) if name in heavy]
    return [name for name in named if not heavy[name]] + [name for name in named if heavy[name]]


def _write_region(done, failure: UsersFailure, folder: Path) -> Optional[Path]:
    """Write what is to be loaded: the failing probe's nodes (and the casts next to them), or the whole model."""
    path = folder / "bisect.onnx"
    for stale in (path, path.with_name(path.name + ".data")):
        stale.unlink(missing_ok=True)
    if failure.whole:
        write_model(done.model, path, external=done.external)
        return path
    model = probe_of(_region(done.model, set(failure.nodes)), done.model)
    if model is None:
        return None
    ir.save(model, str(path), external_data=path.name + ".data", size_threshold_bytes=INLINE_TENSOR_MAX_BYTES)
    return path


def _region(model: ir.Model, names) -> List[ir.Node]:
    """The main-graph nodes named in ``names``, with the Cast and Constant nodes next to them, in graph order."""
    inside = {node for node in model.graph if node.name in names}
    for node in model.graph:
        if node in inside or node.op_type not in ("Cast", "Constant"):
            continue
        producers = {v.producer() for v in node.inputs if v is not None}
        readers = {use.node for v in node.outputs for use in v.uses()}
        if (producers | readers) & inside:
            inside.add(node)
    return [node for node in model.graph if node in inside]


def _note(failure: UsersFailure, found: Culprits, new: Mapping[str, str], candidates: int) -> str:
    """The report's note: what failed, what was kept float32, and how it was found."""
    names = sorted(new)
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    how = f"found by bisection over {candidates} converted node(s) in {found.checks} session(s)"
    if not found.complete:
        how += f" (stopped at {MAX_SESSIONS}: the set is larger than needed)"
    level = "onnxruntime's default" if failure.verdict.level == DEFAULT_LEVEL else "the --target's"
    return (f"{failure.verdict.summary()} ({level} optimization level); it loads at {UNOPTIMIZED}. "
            f"Kept {len(names)} node(s) float32 (rule runtime-pin) so that it loads: {shown}; {how}")


__all__ = ["MAX_SESSIONS", "UsersRepair", "users_pins"]
