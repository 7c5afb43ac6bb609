"""ampconv: convert float32 ONNX models to float16/bfloat16 mixed precision.

Public API (the library never prints, never exits, never imports click):

- ``convert(src, dst=None, config=Config(), dry_run=False) -> Report``
- ``validate(reference, converted, options=ValidateOptions()) -> ValidationResult``
- ``load_policy(preset="default", mixlists=(), level="O2") -> Policy``
- ``Config``, ``Report`` and the ``AmpconvError`` family.
"""

from __future__ import annotations

from ampconv.config import Config
from ampconv.errors import (
    AmpconvError,
    ConversionError,
    ModelLoadError,
    OutputError,
    PolicyError,
    RuntimeMissingError,
    UsageError,
    ValidationFailed,
)

__version__ = "0.1.0"

__all__ = [
    "AmpconvError",
    "Config",
    "ConversionError",
    "ModelLoadError",
    "OutputError",
    "PolicyError",
    "Report",
    "RuntimeMissingError",
    "UsageError",
    "ValidationFailed",
    "ValidateOptions",
    "convert",
    "load_policy",
    "validate",
]


def convert(src, dst=None, config=None, *, dry_run=False):
    """Convert the model at ``src`` to mixed precision and write it to ``dst``.

    ``dst`` defaults to ``<stem>.<dtype>.onnx`` beside ``src``. With ``dry_run``
    nothing is written and the returned report holds the plan. Raises an
    ``AmpconvError`` subclass with a user-facing message on any failure, after
    removing anything partially written.
    """
    from ampconv.converter import convert as _convert

    return _convert(src, dst, config or Config(), dry_run=dry_run)


def validate(reference, converted, options=None):
    """Compare ``converted`` against the float32 ``reference`` on the same inputs.

    Returns a ``ValidationResult``; never raises on drift (check ``result.passed``).
    """
    from ampconv.validate import validate as _validate

    return _validate(reference, converted, options)


def load_policy(preset="default", mixlists=(), level="O2", block_ops=(), target=None):
    """Return the effective op lists for a preset plus policy files at a level (``target`` decides ``auto``)."""
    from ampconv.policy import load_policy as _load_policy

    return _load_policy(preset=preset, mixlists=mixlists, level=level, block_ops=block_ops, target=target)


def __getattr__(name):
    # Lazy re-exports keep `import ampconv` cheap (no onnxruntime, no onnx.defs scan).
    if name == "Report":
        from ampconv.report import Report

        return Report
    if name in ("ValidateOptions", "ValidationResult"):
        import ampconv.validate as _v

        return getattr(_v, name)
    raise AttributeError(name)
