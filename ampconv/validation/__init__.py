"""Numerical-drift validation: compare a converted model with its float32 reference.

Modules, data first and renderers last: ``options`` (what to do), ``inputs``
(samples), ``floor`` (the float32 model on its data rounded to the LOW type:
the error no conversion avoids), ``criteria`` (the verdict, ``Criterion``),
``natures`` (what each output is, from the graph), ``detections`` (detection
sets matched as sets), ``comparison`` (the sample loop), ``decode`` (a greedy
decode of both models), ``metric`` (the user's own measure, which decides
when given), ``localize`` (first diverging node), ``advice`` (the fix it
found, in words), ``result`` (data), ``models`` (a model given in memory,
run from a private copy), ``core`` (``validate``), ``render``
(text/markdown/json). Loading,
emulation, runners and metrics are ``ampconv.numerics``'.

This package is light to import (no numpy, onnx or onnxruntime): ``import
ampconv`` imports it (``ampconv.validate`` is the function it exports),
so ``validate`` imports ``core`` when called and the result classes load on
first use.
"""

from __future__ import annotations

from ampconv.core.shapespec import parse_shape
from ampconv.validation.options import DEFAULT_TOLERANCES, ValidateOptions

__all__ = [
    "DEFAULT_TOLERANCES",
    "Localization",
    "OutputResult",
    "ValidateOptions",
    "ValidationResult",
    "check_inputs",
    "parse_shape",
    "validate",
]

_RESULT_CLASSES = ("Localization", "OutputResult", "ValidationResult")


def validate(reference, converted, options: ValidateOptions | None = None):
    """Compare ``converted`` with the float32 ``reference`` on the same inputs; returns a ``ValidationResult``.

    Never raises on drift (read ``result.passed``). Raises ``UsageError`` for
    bad inputs or options, ``ModelLoadError`` for unreadable models,
    ``RuntimeMissingError`` without onnxruntime, and ``AmpconvError`` when a
    model cannot be run.
    """
    from ampconv.validation.core import validate as _validate

    return _validate(reference, converted, options)


def check_inputs(reference, options: ValidateOptions) -> None:
    """Raise ``UsageError`` for inputs ``validate(reference, ..., options)`` would refuse, without running a model."""
    from ampconv.validation.core import check_inputs as _check

    _check(reference, options)


def __getattr__(name: str):
    # The result classes import numpy (through metrics): load them on first use.
    if name in _RESULT_CLASSES:
        from ampconv.validation import result

        return getattr(result, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_RESULT_CLASSES))
