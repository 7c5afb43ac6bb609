"""Numerical-drift validation: compare a converted model with its float32 reference.

Modules, data first and renderers last: ``options`` (what to do), ``inputs``
(samples), ``modelio`` (loading and derived copies), ``emulate`` (float32 copy
that rounds like fp16/bf16), ``runners`` (onnxruntime), ``metrics`` (pass rule),
``localize`` (first diverging node), ``result`` (data), ``core`` (``validate``),
``render`` (text/markdown/json).
"""

from __future__ import annotations

import sys
import types

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


class _CallableModule(types.ModuleType):
    """Keeps ``ampconv.validate(reference, converted, options)`` working.

    Importing this subpackage binds ``ampconv.validate`` to the module,
    shadowing the function of the same name in ``ampconv/__init__.py``; calling
    the module forwards to ``validate`` so both spellings keep working.
    """

    def __call__(self, reference, converted, options=None):
        return validate(reference, converted, options)


sys.modules[__name__].__class__ = _CallableModule
