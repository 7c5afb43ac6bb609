"""Errors ampconv raises. Each carries a one-line message a user can act on.

The CLI maps the classes to exit codes in one place (``ampconv_cli.errors``):
``UsageError`` and ``PolicyError`` -> 2, the rest -> 1. Exit code 3 (over tolerance)
is not an error: the CLI reads it from the validation result.
"""

from __future__ import annotations


class AmpconvError(Exception):
    """Base class: something went wrong that the user can fix or must know about."""

    exit_code = 1


class UsageError(AmpconvError):
    """Bad options or arguments (unknown level, bad regex, unknown --keep-io-types name...)."""

    exit_code = 2


class PolicyError(UsageError):
    """A mixlist/policy file is malformed or contradicts itself."""


class ModelLoadError(AmpconvError):
    """The input model cannot be read: missing, not ONNX, corrupt, bad external data."""


class UnsupportedModelError(AmpconvError):
    """The model uses something ampconv cannot convert safely (reported, not raised, when possible)."""


class ConversionError(AmpconvError):
    """The converted model failed a check (onnx.checker, onnxruntime load); nothing was written.

    ``detail`` keeps the checking tool's whole message (the one-line message
    keeps its first line): the converter reads the blamed node from it.
    ``tool`` names the judge that refused the model (``CHECKER`` or
    ``RUNTIME``), or is empty for ampconv's own checks.
    """

    CHECKER = "onnx.checker"
    RUNTIME = "onnxruntime"

    def __init__(self, message: str, detail: str = "", tool: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message
        self.tool = tool


class OutputError(AmpconvError):
    """The output cannot be written (folder missing or read-only, disk full, same as input)."""


class RuntimeMissingError(AmpconvError):
    """onnxruntime is needed (validation) but not installed."""

    def __init__(self, what: str = "validation") -> None:
        super().__init__(
            f"{what} needs onnxruntime: pip install 'ampconv[cpu]' (or 'ampconv[gpu]' for onnxruntime-gpu)"
        )
