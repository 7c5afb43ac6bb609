"""Precision policy: presets, policy files, levels (docs/precision.md sec. 1, 2, 7)."""

from __future__ import annotations

import dataclasses
import os
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple, Union

from ampconv.core.precision import Precision
from ampconv.errors import PolicyError, UsageError, named
from ampconv.policy.files import read_policy_file
from ampconv.policy.lists import (
    BLACK,
    CLASSES,
    GRAY,
    PRESETS,
    RANGE_GUARDED_PRESETS,
    UNLISTED,
    WHITE,
    preset_classes,
    preset_moved_from_black,
)
from ampconv.policy.mixlist import MixList, apply_mixlist, mixlist_origins
from ampconv.policy.names import did_you_mean, op_key, read_name
from ampconv.policy.opinfo import OpInfoFile, read_op_info
from ampconv.runtime.target import Target, as_target

LOW, HIGH, INHERIT = Precision.LOW, Precision.HIGH, Precision.INHERIT

# docs/precision.md sec. 1: what each class means at each level.
LEVEL_TABLE: Mapping[str, Mapping[str, str]] = {
    "O1": {WHITE: LOW, BLACK: HIGH, GRAY: INHERIT, UNLISTED: HIGH},
    "O2": {WHITE: LOW, BLACK: HIGH, GRAY: INHERIT, UNLISTED: LOW},
    "O3": {WHITE: LOW, BLACK: LOW, GRAY: LOW, UNLISTED: LOW},
}


@dataclasses.dataclass(frozen=True)
class Policy:
    """Effective op classes for one conversion. Immutable."""

    preset: str
    level: str
    classes: Mapping[str, str]
    sources: Tuple[str, ...] = ()
    warnings: Tuple[str, ...] = ()
    level_note: Optional[str] = None
    # Op keys kept float32 at every level, O3 included (--block-op). Not a list
    # class: a class means different things at different levels, a block does not.
    blocked: FrozenSet[str] = frozenset()
    # Facts worth a line in the report: framework names read as ONNX ops, an
    # operator-info file recognized among the mixlists, records matching nothing.
    notes: Tuple[str, ...] = ()
    # Op key -> where its class came from, for every op a policy file set
    # (``op-info FILE: 'Conv2D' flag true``, ``FILE: white-list.to-add as 'MatMulV2'``).
    origins: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Operator-info file -> its op names with no ONNX counterpart (sorted).
    unmatched: Mapping[str, Tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # Whether the range guards (ampconv.plan.evidence) may keep a gray op float32 on evidence
    # found on the model: the default preset's; MindSpore's lists are reproduced exactly.
    range_guards: bool = False
    requested_level: str = ""  # the level asked for (``auto`` resolves to ``level``)
    # The deployment target (cpu or cuda; detected when not given): which onnxruntime
    # sessions the written model is checked in (``ampconv.runtime.usersession.users_levels``).
    target: str = "cpu"

    def class_of(self, domain: str, op_type: str) -> str:
        """The list class of an op (``domain`` empty for the default domain)."""
        key = op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"
        return self.classes.get(key, UNLISTED)

    def rule(self, op_class: str) -> str:
        """LOW, HIGH or INHERIT for a class at this policy's level (O1-O3)."""
        return LEVEL_TABLE[self.level][op_class]

    def lists(self) -> Dict[str, Tuple[str, ...]]:
        """The effective lists, sorted (UNLISTED is implicit: every other op)."""
        out: Dict[str, list] = {c: [] for c in (WHITE, BLACK, GRAY)}
        for op, cls in self.classes.items():
            if cls in out:
                out[cls].append(op)
        return {c: tuple(sorted(v)) for c, v in out.items()}


def resolve_level(level: str, target: Union[Target, str, None]) -> Tuple[str, Optional[str], str]:
    """Turn ``auto`` into a concrete level for ``target``; returns (level, note, target name).

    ``target``: a ``Target``, a name (``cuda``/``cpu``), or None (chosen from
    the installed onnxruntime's listed providers). The note says why the
    target when the user did not name it (``Target.level_reason``).
    """
    target = as_target(target)
    if level != "auto":
        return level, None, target.name
    if target.name == "cuda":
        return "O2", f"level auto: target cuda{target.level_reason()} -> O2", target.name
    return (
        "O0",
        f"level auto: target cpu{target.level_reason()} -> O0 (onnxruntime's CPU provider has few float16 kernels "
        "and no bfloat16 arithmetic, so a CPU deployment gains nothing); use --level O2 to convert anyway",
        target.name,
    )


def load_policy(
    preset: str = "default",
    mixlists: Iterable[str] = (),
    level: str = "O2",
    block_ops: Iterable[str] = (),
    target: Union[Target, str, None] = None,
    op_info: Optional[Union[str, os.PathLike]] = None,
) -> Policy:
    """Build the effective policy: preset, operator-info base, policy files left to right; ``block_ops`` recorded.

    ``op_info`` is an Ascend operator-info file; a file in ``mixlists`` with
    that shape is read as one too (with a note). Operator-info files replace
    the preset's class of the ops they name, in order (``op_info`` first), and
    the ``modify_mixlist`` files then apply on top, left to right
    (docs/precision.md sec. 7).

    ``block_ops`` stay out of the list classes: the planner keeps them float32
    at every level, O3 included (rule ``user-block-op``), the one place that
    reads them.
    """
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}: choose one of {', '.join(sorted(PRESETS))}")
    resolved, note, target = resolve_level(level, target)
    # Every file is read and validated before any is applied.
    bases: List[OpInfoFile] = [read_op_info(os.fspath(op_info))] if op_info is not None else []
    files: List[MixList] = []
    notes: List[str] = []
    for path in mixlists:
        read = read_policy_file(path)
        if isinstance(read, OpInfoFile):
            notes.append(
                f"{path}: read as an Ascend operator-info file (op records, not to-add/to-remove lists): "
                "applied as a base, after the preset and before the modify_mixlist files"
            )
            bases.append(read)
        else:
            files.append(read)
    classes = preset_classes(preset)
    sources = [f"preset {preset}"]
    warnings: List[str] = []
    origins: Dict[str, str] = {}
    unmatched: Dict[str, Tuple[str, ...]] = {}
    for base in bases:
        classes.update(base.classes)
        origins.update({op: f"op-info {base.path}: {why}" for op, why in base.origins.items()})
        notes.extend(base.notes)
        unmatched[base.path] = base.unmatched
        sources.append(f"op-info {base.path}")
    for mixlist in files:
        classes, applied_notes = apply_mixlist(classes, mixlist, preset_moved_from_black(preset))
        origins.update(mixlist_origins(mixlist))
        warnings.extend(mixlist.warnings)
        notes.extend(mixlist.notes + tuple(applied_notes))
        sources.append(mixlist.path)
    blocked, block_warnings, block_notes = _read_block_ops(block_ops)
    return Policy(
        preset=preset,
        level=resolved,
        classes=classes,
        sources=tuple(sources),
        warnings=tuple(warnings + block_warnings),
        level_note=note,
        blocked=blocked,
        notes=tuple(dict.fromkeys(notes + block_notes)),
        origins=origins,
        unmatched=unmatched,
        range_guards=preset in RANGE_GUARDED_PRESETS,
        requested_level=level,
        target=target,
    )


def _read_block_ops(block_ops: Iterable[str]) -> Tuple[FrozenSet[str], List[str], List[str]]:
    """The blocked op keys, warnings for unknown names, notes for translated framework names."""
    blocked = set()
    warnings, notes = [], []
    # --block-op MatMul,Softmax: an entry may be a comma list.
    for op in sorted({op.strip() for entry in block_ops for op in entry.split(",") if op.strip()}):
        reading = read_name(op)
        if reading.framework is not None:
            notes.append(f"{named('block_ops')}: {reading.framework.describe()}")
        # Only the default domain can be judged: contrib and custom ops are unknown to onnx.defs.
        # An unknown default-domain op can match no valid node: blocking it would silently do nothing.
        elif "::" not in op_key(op) and not reading.known:
            raise UsageError(f"{named('block_ops', op_key(op))}: op type unknown to onnx.defs{did_you_mean(op_key(op))}")
        blocked.update(reading.ops)
    return frozenset(blocked), warnings, notes


__all__ = [
    "BLACK",
    "CLASSES",
    "GRAY",
    "HIGH",
    "INHERIT",
    "LOW",
    "Policy",
    "PolicyError",
    "UNLISTED",
    "WHITE",
    "load_policy",
    "resolve_level",
]
