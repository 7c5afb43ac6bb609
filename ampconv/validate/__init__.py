"""Numerical-drift validation: compare a converted model with its float32 reference.

Modules, data first and renderers last: ``options`` (what to do), ``inputs``
(samples), ``modelio`` (loading and derived copies), ``emulate`` (float32 copy
that rounds like fp16/bf16), ``runners`` (onnxruntime), ``metrics`` (pass rule),
``localize`` (first diverging node), ``result`` (data), ``core`` (``validate``),
``render`` (text/markdown/json).
"""

from __future__ import annotations

from ampconv.validate.core import validate
from ampconv.validate.options import DEFAULT_TOLERANCES, ValidateOptions, parse_shape
from ampconv.validate.result import Localization, OutputResult, ValidationResult

__all__ = [
    "DEFAULT_TOLERANCES",
    "Localization",
    "OutputResult",
    "ValidateOptions",
    "ValidationResult",
    "parse_shape",
    "validate",
]
