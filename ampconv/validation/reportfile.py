"""Merge a validation result into a JSON report file, atomically and only into a report."""

from __future__ import annotations

import os

from ampconv.errors import OutputError, named
from ampconv.writing.outputs import read_report, write_json_atomic


def merge_into_report(path: str, validation: dict, overwrite: bool = False) -> None:
    """Set the top-level ``validation`` key of the ampconv report at ``path``.

    An existing ampconv report (``ampconv.writing.outputs.is_report``) keeps its other
    keys; a missing file becomes ``{"validation": ...}``. Any other existing
    file (not JSON, or JSON that is not an ampconv report) raises
    ``OutputError`` unless ``overwrite``, which replaces it. The write is
    atomic and keeps the file's mode (``ampconv.writing.outputs.write_json_atomic``).

    Callers check the path against the run's inputs first
    (``ampconv.writing.outputs.check_report_path``); this only guards the merge.
    """
    path = os.fspath(path)
    report: dict = {}
    if os.path.lexists(path):
        if os.path.isdir(path):
            raise OutputError(f"{path}: cannot write the report: is a directory")
        existing = read_report(path)
        if existing is not None:
            report = existing
        elif not overwrite:
            raise OutputError(
                f"{path}: exists and is not an ampconv JSON report, so the validation result "
                f"cannot be merged into it; pass {named('overwrite', True)} to replace it"
            )
    report["validation"] = validation
    write_json_atomic(path, report)

