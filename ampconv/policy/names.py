"""Op names people write that onnx.defs does not know: a hint at the name they meant."""

from __future__ import annotations

import difflib

from ampconv.schema import default_domain_ops, is_known_op


def is_known(op: str) -> bool:
    """Whether ``op`` (``Op`` or ``domain::Op``) names an op of the installed onnx."""
    domain, name = op.split("::", 1) if "::" in op else ("", op)
    return is_known_op(domain, name)


def did_you_mean(op: str) -> str:
    """`` (did you mean 'X'?)`` for an unknown default-domain op, or an empty string."""
    if "::" in op:
        return ""
    known = sorted(default_domain_ops())
    by_case = [name for name in known if name.lower() == op.lower()]
    close = by_case or difflib.get_close_matches(op, known, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_op_warning(where: str, op: str) -> str:
    """The warning for an op type onnx.defs does not know; it will match no node."""
    return f"{where}: op {op!r} is unknown to onnx.defs and matches no node{did_you_mean(op)}"


__all__ = ["did_you_mean", "is_known", "unknown_op_warning"]
