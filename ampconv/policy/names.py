"""Op names people write: ONNX op types, framework names read as ONNX ops, and hints for the rest."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Optional, Tuple

from ampconv.policy.framework_names import FRAMEWORK_NAMES, FrameworkName, lookup
from ampconv.runtime.schema import default_domain_ops, is_known_op


def op_key(entry: str) -> str:
    """Normalize ``ai.onnx::Op`` and ``::Op`` to ``Op``; keep ``domain::Op``."""
    if "::" in entry:
        domain, op = entry.split("::", 1)
        return op if domain in ("", "ai.onnx") else f"{domain}::{op}"
    return entry


def is_known(op: str) -> bool:
    """Whether ``op`` (``Op`` or ``domain::Op``) names an op of the installed onnx."""
    domain, name = op.split("::", 1) if "::" in op else ("", op)
    return is_known_op(domain, name)


@dataclass(frozen=True)
class Reading:
    """What one written op name stands for."""

    written: str
    ops: Tuple[str, ...]  # the op keys it names; empty for a framework op with no ONNX counterpart
    framework: Optional[FrameworkName] = None  # set when the name was translated

    @property
    def known(self) -> bool:
        """An ONNX op of the installed onnx, or a framework name of the table."""
        return self.framework is not None or all(is_known(op) for op in self.ops)


def read_name(entry: str) -> Reading:
    """Read one written op name: an ONNX op key as it is, else a framework name through the table.

    A name the installed onnx knows is never translated. A name neither knows
    is kept as written (it matches no node; callers warn).
    """
    key = op_key(entry)
    if "::" in key or is_known(key):
        return Reading(entry, (key,))
    record = lookup(key)
    if record is not None:
        return Reading(entry, record.onnx, record)
    return Reading(entry, (key,))


def did_you_mean(op: str) -> str:
    """`` (did you mean 'X'?)`` for an unknown default-domain op, or an empty string.

    Candidates are the ONNX op types and the framework names of the table; a
    match that differs only in case comes first, ONNX names before framework ones.
    """
    if "::" in op:
        return ""
    known = sorted(default_domain_ops())
    framework = sorted(FRAMEWORK_NAMES)
    lowered = op.lower()
    by_case = [name for name in known + framework if name.lower() == lowered and name != op]
    close = by_case or difflib.get_close_matches(op, known + framework, n=1, cutoff=0.75)
    if not close:
        return ""
    record = lookup(close[0])
    if record is not None and record.onnx:
        return f" (did you mean {close[0]!r}, {record.sources[0]}'s name for ONNX {' and '.join(map(repr, record.onnx))}?)"
    return f" (did you mean {close[0]!r}?)"


def unknown_op_warning(where: str, op: str) -> str:
    """The warning for an op type onnx.defs does not know; it will match no node."""
    return f"{where}: op {op!r} is unknown to onnx.defs and matches no node{did_you_mean(op)}"


__all__ = ["Reading", "did_you_mean", "is_known", "op_key", "read_name", "unknown_op_warning"]
