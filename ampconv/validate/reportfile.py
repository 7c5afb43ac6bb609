"""Merge a validation result into a JSON report file, atomically."""

from __future__ import annotations

import json
import os
import tempfile

from ampconv.errors import OutputError


def merge_into_report(path: str, validation: dict) -> None:
    """Set the top-level ``validation`` key of the JSON report at ``path``.

    An existing JSON object keeps its other keys; a missing file, or one that
    is not a JSON object, is replaced by ``{"validation": ...}``. The file is
    written to a temporary name beside it and renamed, so a reader never sees
    half a report.
    """
    path = os.fspath(path)
    report = {}
    if os.path.isfile(path):
        try:
            with open(path, encoding="utf-8") as f:
                loaded = json.load(f)
            if isinstance(loaded, dict):
                report = loaded
        except (OSError, ValueError):
            report = {}
    report["validation"] = validation
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ampconv-report-", suffix=".json", dir=folder)
    except OSError as exc:
        raise OutputError(f"{path}: cannot write the report: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise OutputError(f"{path}: cannot write the report: {exc.strerror or exc}") from None
