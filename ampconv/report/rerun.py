"""The command the report page offers to copy: the user's own run, repeated whole with the fix.

A fix is only worth copying if the copy repeats the check it was checked
against: the same model, policy and options, the same validation inputs,
tolerance and report. The CLI keeps the command line as typed in the report
(``command``; ``validate --report`` adds its validation options as
``validation.command_options``), and these functions add to it what the fix
needs: the fix's options (``advice.fix_options``), ``--overwrite`` (the run
replaces its own output and report) and the validation. A report without a
recorded command (made by the library) gets the command rebuilt from what it
holds, with a placeholder for the samples, and says so (``complete`` False).
"""

from __future__ import annotations

import shlex
from typing import Any, Dict, List, Optional, Tuple

from ampconv.errors import Parameter, command_line_text
from ampconv.validation.advice import fix_options

# Where a placeholder stands for what only the user knows (their samples).
YOUR_SAMPLES = "YOUR_SAMPLES/"


def quoted(words: List[str]) -> str:
    """``words`` quoted for a POSIX shell (a placeholder ending in ``/`` stays readable)."""
    return " ".join(w if w == YOUR_SAMPLES else shlex.quote(w) for w in words)


def _recorded(report: Dict[str, Any]) -> Optional[List[str]]:
    """The ``convert`` command as typed, when the report recorded one."""
    command = report.get("command")
    if isinstance(command, list) and command[:2] == ["ampconv", "convert"] and all(isinstance(w, str) for w in command):
        return list(command)
    return None


def _validation_words(report: Dict[str, Any], words: List[str]) -> List[str]:
    """What repeats the validation: nothing when ``words`` validate already, else the options ``validate``
    recorded (``--validate`` first)."""
    if "--validate" in words:
        return []
    validation = report.get("validation") if isinstance(report.get("validation"), dict) else {}
    recorded = validation.get("command_options")
    return ["--validate", *(recorded if isinstance(recorded, list) else [])]


def _rebuilt(report: Dict[str, Any]) -> List[str]:
    """A ``convert`` command from what a report without a recorded one holds (the samples a placeholder)."""
    validation = report.get("validation") if isinstance(report.get("validation"), dict) else {}
    words = ["ampconv", "convert", str(report.get("source") or "MODEL.onnx"),
             "-o", str(report.get("output") or "OUT.onnx"), "--validate", "--localize"]
    if not validation.get("random_inputs", True):
        words += ["--inputs", YOUR_SAMPLES]
    if validation.get("tolerance_source") == "given":
        words += ["--rtol", f"{validation.get('rtol'):g}", "--atol", f"{validation.get('atol'):g}"]
    return words


def _base(report: Dict[str, Any]) -> Tuple[List[str], bool]:
    """(the run's command with its validation and ``--overwrite``, whether it was recorded whole)."""
    words = _recorded(report)
    complete = words is not None
    if words is None:
        words = _rebuilt(report)
    words = words + _validation_words(report, words)
    if "--overwrite" not in words:
        words.append("--overwrite")
    return words, complete


def fix_command(report: Dict[str, Any], loc: Dict[str, Any]) -> Tuple[str, bool]:
    """(the command that repeats the run with the localization's fix, whether it is the recorded run whole)."""
    words, complete = _base(report)
    options = fix_options(loc)
    if options:
        for name, value in options:
            words += shlex.split(command_line_text(Parameter(name, value)))
    else:  # a report from before the options were recorded: the command line's own words
        words += shlex.split(str((loc.get("fix") or {}).get("suggestion") or (loc.get("cause") or {}).get("suggestion")))
    return quoted(words), complete


def search_command(report: Dict[str, Any]) -> Tuple[str, bool]:
    """(the run repeated with ``--tune`` on its validation samples as calibration data, whether recorded whole)."""
    words, complete = _base(report)
    samples = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--inputs"]
    samples += [w.split("=", 1)[1] for w in words if w.startswith("--inputs=")]
    for path in samples or [YOUR_SAMPLES]:
        words += ["--calibration-data", path]
    if not samples:
        words += ["--inputs", YOUR_SAMPLES]
    return quoted(words + ["--tune"]), complete and bool(samples)
