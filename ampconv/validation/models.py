"""What ``validate`` takes for a model: a path, or a model in memory (``onnx.ModelProto``, ``onnx_ir.Model``).

Validation runs files: onnxruntime's sessions, the emulated and localization
copies all start from one. A model in memory is saved to a private
temporary folder for the run (removed afterwards), as ``convert_model`` does
for a conversion; the result and any error name it ``<in-memory reference>``
or ``<in-memory converted model>``, never the private path. Anything else is
refused with ampconv's own ``UsageError``, before any work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from pathlib import Path
from typing import Iterator, Tuple

import onnx
import onnx_ir as ir

from ampconv.errors import AmpconvError, UsageError
from ampconv.reading.load import copy_needs_data_file, unloaded_external_tensor

NAMES = {"reference": "<in-memory reference>", "converted": "<in-memory converted model>"}


def _path_of(model, role: str, folder: str) -> str:
    """The file ``model`` (the ``role`` argument) is validated from: its own path, or a private copy."""
    if isinstance(model, (str, os.PathLike)):
        return os.fspath(model)
    if isinstance(model, onnx.ModelProto):
        unloaded = unloaded_external_tensor(model)
        if unloaded is not None:
            raise UsageError(f"{role}: initializer {unloaded!r} refers to external data that is not loaded; "
                             "load the model with onnx.load(path) (it loads external data), or pass its path")
        model = ir.serde.deserialize_model(model)
    if not isinstance(model, ir.Model):
        raise UsageError(f"{role}: expected a path, an onnx.ModelProto or an onnx_ir.Model, got {type(model).__name__}")
    path = Path(folder) / f"{role}.onnx"
    external = f"{role}.onnx.data" if copy_needs_data_file(model) else None
    ir.save(model, path, external_data=external)
    return str(path)


@contextlib.contextmanager
def as_files(reference, converted) -> Iterator[Tuple[str, str, dict]]:
    """``(reference path, converted path, {private path: the name shown})`` for the run; the folder of copies
    of models given in memory is removed afterwards. An error raised inside names them as shown."""
    with tempfile.TemporaryDirectory(prefix="ampconv-models-") as folder:
        paths = {role: _path_of(model, role, folder) for role, model in
                 (("reference", reference), ("converted", converted))}
        shown = {path: NAMES[role] for role, path in paths.items() if path.startswith(folder)}
        try:
            yield paths["reference"], paths["converted"], shown
        except AmpconvError as exc:
            for path, name in shown.items():
                exc.replace_text(path, name)
            raise


def named_as_shown(result, shown: dict):
    """``result`` (a ``ValidationResult``) naming models given in memory as shown (``as_files``)."""
    if not shown:
        return result
    return dataclasses.replace(result, reference=shown.get(result.reference, result.reference),
                               converted=shown.get(result.converted, result.converted))
