"""In-memory entry points: convert an ``onnx.ModelProto`` or an ``onnx_ir.Model``, or run as an onnx-ir pass.

The converter works on files: it streams weights, and its two judges
(onnx.checker and the onnxruntime load check) read the written file, so that
a model over 2 GB is checked like any other. Rather than keep a second
pipeline that checks less, the in-memory forms hand the model to that same
converter through a private temporary folder (removed afterwards) and read
the result back into memory. Nothing is skipped: policy, calibration data,
``tune``, the checks and their retries all run as they do for a path. The
cost is one write and one read of the model; for a model already on disk,
``ampconv.convert(path)`` avoids both, and streams weights larger than memory.

The caller's model is never modified: a new model of the same kind is returned.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import Optional, Tuple, Union

import onnx
import onnx_ir as ir
from onnx_ir.passes import FunctionalPass, PassResult

from ampconv.config import Config
from ampconv.errors import AmpconvError, UsageError
from ampconv.reading.load import copy_needs_data_file, unloaded_external_tensor
from ampconv.report import Report
from ampconv.converter import convert

# How the report and error messages name a model that has no path.
IN_MEMORY = "<in-memory model>"

AnyModel = Union[onnx.ModelProto, ir.Model]


def convert_model(model: AnyModel, config: Optional[Config] = None) -> Tuple[AnyModel, Report]:
    """Convert an in-memory model; return ``(converted, report)``, the model of the same kind as given.

    ``model`` is an ``onnx.ModelProto`` (with its weights loaded: ``onnx.load``
    does that by default) or an ``onnx_ir.Model``; it is left unchanged.
    ``config`` is a ``Config`` (default: level O2, fp16). The report's
    ``source`` is ``"<in-memory model>"`` and its ``output`` is None; every
    check that ``ampconv.convert`` runs on a file runs here too (see the
    module docstring). Raises the ``AmpconvError`` family, like ``convert``.
    """
    is_proto = _check_kind(model)
    config = config or Config()
    with tempfile.TemporaryDirectory(prefix="ampconv-") as folder:
        src, dst = Path(folder) / "model.onnx", Path(folder) / "converted.onnx"
        ir_model = ir.serde.deserialize_model(model) if is_proto else model
        external = "model.data" if copy_needs_data_file(ir_model) else None
        ir.save(ir_model, src, external_data=external)
        # ``overwrite`` only concerns the private folder; the user's files are not involved.
        try:
            report = convert(src, dst, dataclasses.replace(config, overwrite=True))
        except AmpconvError as exc:
            raise _without_paths(exc, folder) from None
        converted = _read_back(dst, is_proto)
    report.source = IN_MEMORY
    report.output = None
    return converted, report


class MixedPrecisionPass(FunctionalPass):
    """An ``onnx_ir`` pass that converts a model to mixed precision with ``config``.

    It composes in ``onnx_ir.passes.PassManager`` like any pass. Being
    functional, it returns a new model and leaves its input alone; the
    conversion's ``Report`` is kept in ``self.report`` after each call.
    """

    def __init__(self, config: Optional[Config] = None) -> None:
        super().__init__()
        self.config = config or Config()
        self.report: Optional[Report] = None

    def call(self, model: ir.Model) -> PassResult:
        """Convert ``model`` (see ``convert_model``); ``modified`` is False when nothing changed."""
        converted, self.report = convert_model(model, self.config)
        return PassResult(converted, modified=not self.report.unchanged)


def _check_kind(model) -> bool:
    """True for a ModelProto, False for an onnx_ir Model; a UsageError for anything else."""
    if isinstance(model, onnx.ModelProto):
        unloaded = unloaded_external_tensor(model)
        if unloaded is not None:
            raise UsageError(
                f"model: initializer {unloaded!r} refers to external data that is not loaded; "
                "load the model with onnx.load(path) (it loads external data), "
                "or convert the file with ampconv.convert(path)"
            )
        return True
    if isinstance(model, ir.Model):
        return False
    if isinstance(model, (str, Path)):
        raise UsageError("model: convert_model takes a model in memory; for a path use ampconv.convert(path)")
    raise UsageError(f"model: expected an onnx.ModelProto or an onnx_ir.Model, got {type(model).__name__}")


def _read_back(path: Path, as_proto: bool) -> AnyModel:
    """The converted model, every weight in memory (the folder is about to go)."""
    if as_proto:
        return onnx.load(str(path))  # loads external data too
    converted = ir.load(str(path))
    return ir.external_data.load_to_model(converted)


def _without_paths(exc: AmpconvError, folder: str) -> AmpconvError:
    """The same error with the private folder's paths replaced by ``<in-memory model>``."""
    base = Path(folder)
    for path in (base / "model.onnx", base / "converted.onnx", base):
        exc.replace_text(str(path), IN_MEMORY)
    if hasattr(exc, "detail"):
        exc.detail = exc.detail.replace(str(base), IN_MEMORY)
    return exc


__all__ = ["IN_MEMORY", "MixedPrecisionPass", "convert_model"]
