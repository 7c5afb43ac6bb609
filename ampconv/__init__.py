"""ampconv: convert float32 ONNX models to float16/bfloat16 mixed precision.

Public API (the library never prints, never exits, never imports click):

- ``convert(src, dst=None, config=Config(), dry_run=False) -> Report``: a file to a file
- ``convert_model(model, config=Config()) -> (converted, Report)``: an ``onnx.ModelProto``
  or ``onnx_ir.Model`` in memory, returned as the same kind
- ``MixedPrecisionPass(config)``: the same as an ``onnx_ir`` pass (``PassManager``)
- ``validate(reference, converted, options=ValidateOptions()) -> ValidationResult``
- ``load_policy(preset="default", mixlists=(), level="O2") -> Policy``
- ``Config``, ``Report`` and the ``AmpconvError`` family.
"""

from __future__ import annotations

from ampconv.core.deferred_imports import defer_all

defer_all()  # before anything imports onnx_ir (see the module)

# The imports below come after defer_all on purpose (E402).
from ampconv.config import Config  # noqa: E402
from ampconv.errors import (  # noqa: E402
    AmpconvError,
    ConversionError,
    ModelLoadError,
    OutputError,
    PolicyError,
    RuntimeMissingError,
    UsageError,
)

# ``ampconv.validate`` is the function; its implementation is the package
# ``ampconv.validation`` (a name of its own, so the two never shadow each other).
from ampconv.validation import ValidateOptions, validate  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AmpconvError",
    "Config",
    "ConversionError",
    "MixedPrecisionPass",
    "ModelLoadError",
    "OutputError",
    "PolicyError",
    "Report",
    "RuntimeMissingError",
    "UsageError",
    "ValidateOptions",
    "convert",
    "convert_model",
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


def convert_model(model, config=None):
    """Convert an ``onnx.ModelProto`` or ``onnx_ir.Model`` in memory; return ``(converted, report)``.

    The converted model is of the same kind as ``model``, which is left
    unchanged. The same checks run as for a file (``ampconv.inmemory``).
    """
    from ampconv.inmemory import convert_model as _convert_model

    return _convert_model(model, config)


def load_policy(preset="default", mixlists=(), level="O2", block_ops=(), target=None, op_info=None):
    """Return the effective op lists for a preset, an operator-info base and policy files at a level.

    ``target`` decides ``auto``; ``op_info`` is an Ascend operator-info file.
    """
    from ampconv.policy import load_policy as _load_policy

    return _load_policy(
        preset=preset, mixlists=mixlists, level=level, block_ops=block_ops, target=target, op_info=op_info
    )


def __getattr__(name):
    # Lazy re-exports keep `import ampconv` cheap (no onnxruntime, no onnx.defs scan).
    if name == "Report":
        from ampconv.report import Report

        return Report
    if name == "MixedPrecisionPass":
        from ampconv.inmemory import MixedPrecisionPass

        return MixedPrecisionPass
    if name == "ValidationResult":
        from ampconv.validation import ValidationResult

        return ValidationResult
    raise AttributeError(name)
