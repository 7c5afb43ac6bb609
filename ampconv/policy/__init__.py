"""Precision policy: presets, policy files, levels (docs/precision.md sec. 1, 2, 7)."""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

from ampconv.errors import PolicyError, UsageError
from ampconv.policy.names import is_known, unknown_op_warning
from ampconv.policy.lists import BLACK, CLASSES, GRAY, PRESETS, UNLISTED, WHITE, preset_classes
from ampconv.policy.mixlist import MixList, apply_mixlist, op_key, read_mixlist

LOW, HIGH, INHERIT = "LOW", "HIGH", "INHERIT"

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


def resolve_level(level: str, target: Optional[str]) -> Tuple[str, Optional[str], str]:
    """Turn ``auto`` into a concrete level for ``target``; returns (level, note, target)."""
    if target is None:
        target = detect_target()
    if level != "auto":
        return level, None, target
    if target == "cuda":
        return "O2", "level auto: target cuda -> O2", target
    return (
        "O0",
        "level auto: target cpu -> O0 (onnxruntime's CPU provider has few float16 kernels and "
        "no bfloat16 arithmetic, so a CPU deployment gains nothing); use --level O2 to convert anyway",
        target,
    )


def detect_target() -> str:
    """``cuda`` when the installed onnxruntime offers the CUDA provider, else ``cpu``."""
    try:
        import onnxruntime
    except ImportError:
        return "cpu"
    return "cuda" if "CUDAExecutionProvider" in onnxruntime.get_available_providers() else "cpu"


def load_policy(
    preset: str = "default",
    mixlists: Iterable[str] = (),
    level: str = "O2",
    block_ops: Iterable[str] = (),
    target: Optional[str] = None,
) -> Policy:
    """Build the effective policy: preset, then policy files left to right; ``block_ops`` recorded.

    ``block_ops`` stay out of the list classes: the planner keeps them float32
    at every level, O3 included (rule ``user-block-op``), the one place that
    reads them.
    """
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}: choose one of {', '.join(sorted(PRESETS))}")
    resolved, note, _ = resolve_level(level, target)
    classes = preset_classes(preset)
    warnings = []
    sources = [f"preset {preset}"]
    for path in mixlists:
        mixlist: MixList = read_mixlist(path)
        classes = apply_mixlist(classes, mixlist)
        warnings.extend(mixlist.warnings)
        sources.append(str(path))
    # --block-op MatMul,Softmax: an entry may be a comma list.
    blocked = frozenset(op_key(op.strip()) for entry in block_ops for op in entry.split(",") if op.strip())
    # Only the default domain can be judged: contrib and custom ops are unknown to onnx.defs.
    warnings += [unknown_op_warning("--block-op", op) for op in sorted(blocked) if "::" not in op and not is_known(op)]
    return Policy(
        preset=preset,
        level=resolved,
        classes=classes,
        sources=tuple(sources),
        warnings=tuple(warnings),
        level_note=note,
        blocked=blocked,
    )


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
