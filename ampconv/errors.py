"""Errors ampconv raises. Each carries a one-line message a user can act on.

The CLI maps the classes to exit codes in one place (``ampconv_cli.errors``):
``UsageError`` and ``PolicyError`` -> 2, the rest -> 1. Exit code 3 (over tolerance)
is not an error: the CLI reads it from the validation result.

A message that advises setting a parameter names it with ``named()``: the
parameter travels with the error as data (``AmpconvError.parameters``), the
message reads in a Python caller's words (``overwrite=True``), and the CLI
renders the same message with its flags (``--overwrite``, ``render``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
from typing import Callable, Dict, Optional, Tuple

# A parameter inside a message: private-use characters around its JSON, never typed by anyone.
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKER = re.compile(_OPEN + "(.*?)" + _CLOSE)


@dataclasses.dataclass(frozen=True)
class Parameter:
    """A library parameter an error message names: its name, the value it advises, an entry of it."""

    name: str
    value: object = None  # None: the parameter itself (``tune``); else what to set (``overwrite=True``)
    entry: Optional[str] = None  # one entry of a list parameter (``x[0]`` of ``shapes``)
    words: str = ""  # how a Python caller reads the entry's list, if not by the name (``shapes entry``)

    def python_text(self) -> str:
        """The parameter as a Python caller writes it: ``overwrite=True``, ``input_ranges 'x'``,
        ``shapes={'batch': 8}`` (a dict value: its entries, a placeholder such as ``N`` unquoted)."""
        if isinstance(self.value, dict):
            entries = ", ".join(f"{key!r}: {value}" for key, value in self.value.items())
            text = f"{self.name}={{{entries}}}"
        else:
            text = self.name if self.value is None else f"{self.name}={self.value!r}"
        return text if self.entry is None else f"{self.words or text} {self.entry}"


# How a text that names parameters (``named``) spells them: Python words, or the command line's flags.
Speller = Callable[[Parameter], str]


def named(name: str, value: object = None, entry: Optional[str] = None, words: str = "") -> str:
    """``Parameter(name, value, entry, words)`` as a marker to put in an error message.

    A ``value`` JSON cannot hold (a path, a numpy number) travels as its text:
    building an error must never fail.
    """
    return _OPEN + json.dumps([name, value, entry, words], default=str) + _CLOSE


def spell_parameters(text: str, spell: Speller = Parameter.python_text) -> str:
    """``text`` (a warning or note that may name parameters with ``named()``) with each spelled by ``spell``.

    Python words by default (``keep_fp32 '^/head/'``); the CLI passes its
    flag speller (``--keep-fp32 '^/head/'``).
    """
    return _MARKER.sub(lambda match: spell(Parameter(*json.loads(match.group(1)))), text)


# The command-line spelling of each declared option's flag (``"shapes": "--shape"``, a toggle's both sides:
# ``"--synthetic-run/--no-synthetic-run"``), registered by the declarations (``ampconv.options``) as they are
# made, so that this module, below them, imports none of them.
FLAG_SPELLINGS: Dict[str, str] = {}


def register_flags(spellings: Dict[str, str]) -> None:
    """Record the command-line spellings of declared options (``{field: "--flag"}``) for ``command_line_text``."""
    FLAG_SPELLINGS.update(spellings)


def command_line_text(parameter: Parameter) -> str:
    """A parameter as the ``ampconv`` command line writes it: ``overwrite=True`` -> ``--overwrite``.

    A value is quoted for a POSIX shell where it needs it (``--keep-fp32 '^(a|b)$'``), so the words can be
    copied; ``False`` turns a flag off (``--no-synthetic-run``); a dict value (``shapes={'s4': 1, 'x': [1, 3]}``)
    is one flag per entry (``--shape s4:1 --shape x:1x3``).
    """
    flag, _, negative = FLAG_SPELLINGS.get(parameter.name, "--" + parameter.name.replace("_", "-")).partition("/")
    value = parameter.value
    if isinstance(value, dict):
        text = " ".join(f"{flag} {shlex.quote(f'{key}:{_dims(size)}')}" for key, size in value.items())
    elif value is False:
        text = negative or "--no-" + flag[2:]
    elif value is not None and value is not True:
        text = f"{flag} {shlex.quote(str(value))}"
    else:
        text = flag
    return text if parameter.entry is None else f"{text} {parameter.entry}"


def _dims(size) -> str:
    """A size as ``--shape`` writes it: ``8``, or ``1x3x224x224`` for a whole shape."""
    return "x".join(str(d) for d in size) if isinstance(size, (list, tuple)) else str(size)


class AmpconvError(Exception):
    """Base class: something went wrong that the user can fix or must know about.

    ``str()`` is the message in a Python caller's words; ``render`` spells
    the parameters it names (``named()``) another way.
    """

    exit_code = 1

    def __init__(self, message: str = "", *args: object) -> None:
        self.template = str(message)
        super().__init__(self.render(Parameter.python_text), *args)

    @property
    def parameters(self) -> Tuple[Parameter, ...]:
        """The parameters the message names, in order."""
        return tuple(Parameter(*json.loads(found)) for found in _MARKER.findall(self.template))

    def replace_text(self, old: str, new: str) -> "AmpconvError":
        """Replace ``old`` (a private path, say) by ``new`` in the message, keeping its parameters; returns self."""
        self.template = self.template.replace(old, new)
        self.args = (self.render(Parameter.python_text),) + self.args[1:]
        return self

    def render(self, spell: Callable[[Parameter], str]) -> str:
        """The message with each named parameter spelled by ``spell``."""
        return spell_parameters(self.template, spell)


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
        self.what = what

    def __reduce__(self):
        # Made again from what it was made of (ampconv.runtime.isolated sends exceptions across a fork, pickled).
        return (type(self), (self.what,))
