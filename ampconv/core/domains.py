"""The default ONNX domain, named one way: ``""`` and ``"ai.onnx"`` are the same domain.

``is_default`` is the one test of a node's domain; ``op_label`` the one way
reasons, reports and policies name an op (``Op``, or ``domain::Op`` outside
the default domain). No imports: every layer may use it.
"""

from __future__ import annotations

DEFAULT_DOMAINS = ("", "ai.onnx")


def normalize_domain(domain: str) -> str:
    """``ai.onnx`` and the empty string name the same (default) domain: both become ``""``."""
    return "" if domain in DEFAULT_DOMAINS else domain


def is_default(node) -> bool:
    """Whether ``node`` (anything with a ``domain``: an IR node, a NodeProto) is in the default domain."""
    return (node.domain or "") in DEFAULT_DOMAINS


def op_label(node) -> str:
    """``Op`` for the default domain, ``domain::Op`` otherwise (how policies, reasons and reports name ops)."""
    return node.op_type if is_default(node) else f"{node.domain}::{node.op_type}"


__all__ = ["DEFAULT_DOMAINS", "is_default", "normalize_domain", "op_label"]
