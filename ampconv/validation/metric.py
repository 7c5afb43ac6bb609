"""The user's own measure of success (``--metric MODULE:FUNCTION``): when given, it decides the verdict.

Users judge a converted model by their task: top-1 on their labels, the
detections they keep, the tokens a decode writes. ``FUNCTION(reference,
converted)`` is called once per sample with two dicts, output name -> array
(the float32 reference's outputs and the converted model's, as the backend ran
it), and returns a bool, or ``(bool, words)``: whether the task holds on that
sample, and what it saw in words. ``validate`` then passes when it holds on
every sample (the per-output figures are still measured and shown), and
``--tune`` keeps float32 the fewest nodes that make it hold on every
calibration sample (docs/validation.md, "Your own metric").

Everything the user's code does wrong is one line naming it: a module that
does not import, a missing function, an exception inside it, a return that is
no bool (``MetricError``: a ``UsageError`` before anything runs, an
``AmpconvError`` while it runs).

Light to import (``import ampconv`` loads it): no numpy.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Callable, Mapping

from ampconv.errors import AmpconvError, UsageError, named

# The words a metric's verdict quotes are cut to this many characters (a metric may say a lot).
WORDS_MAX = 200


class MetricError(AmpconvError):
    """The user's metric raised, or returned something that is no verdict, while judging a sample."""


@dataclasses.dataclass(frozen=True)
class TaskMetric:
    """The user's metric: the function and its name (``module:function``), as the words quote it."""

    name: str
    function: Callable = dataclasses.field(compare=False, repr=False)

    def judge(self, reference: Mapping, converted: Mapping, sample: int) -> MetricCheck:
        """The metric on one sample's outputs (dicts, output name -> array); ``MetricError`` naming it otherwise."""
        try:
            returned = self.function(dict(reference), dict(converted))
        except Exception as exc:  # noqa: BLE001 - the user's code: any exception is one line naming it
            words = " ".join(str(exc).split())
            raise MetricError(f"metric {self.name} raised {type(exc).__name__} on sample {sample}"
                              f"{f': {words}' if words else ''}") from None
        return _verdict_of(returned, self.name, sample)


@dataclasses.dataclass(frozen=True)
class MetricCheck:
    """The metric's verdict on one sample: whether the task holds, and its words (None: it gave none)."""

    held: bool
    words: str | None = None


def _verdict_of(returned, name: str, sample: int) -> MetricCheck:
    """A metric's return as a ``MetricCheck``: a bool, or ``(bool, words)``; ``MetricError`` for anything else."""
    held, words = returned, None
    if isinstance(returned, (tuple, list)) and len(returned) == 2:
        held, words = returned
    if not _is_bool(held):
        shown = repr(returned)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise MetricError(f"metric {name} returned {shown} ({type(returned).__name__}) on sample {sample}: "
                          "expected a bool, or (bool, words)")
    text = None if words is None else " ".join(str(words).split())
    if text is not None and len(text) > WORDS_MAX:
        text = text[:WORDS_MAX - 3] + "..."
    return MetricCheck(bool(held), text)


def _is_bool(value) -> bool:
    """A Python bool or a numpy bool (``np.all(...)`` returns one); not an int, a float or an array."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy" and type(value).__name__ in ("bool_", "bool"))


def metric_of(value) -> TaskMetric | None:
    """``value`` as a ``TaskMetric``: None, a ``TaskMetric``, a callable, or ``"MODULE:FUNCTION"``.

    ``UsageError`` naming the parameter for a spec that is not ``MODULE:FUNCTION``,
    a module that does not import, a function it lacks, or a value that is
    not callable.
    """
    if value is None or isinstance(value, TaskMetric):
        return value
    if isinstance(value, str):
        return load_metric(value)
    if not callable(value):
        raise UsageError(f"{named('metric')} must be a function (reference, converted) -> bool or "
                         f"(bool, words), or 'MODULE:FUNCTION'; got {type(value).__name__}")
    return TaskMetric(_name_of(value), value)


def load_metric(spec: str) -> TaskMetric:
    """Import ``FUNCTION`` from ``MODULE`` (``"MODULE:FUNCTION"``), the working directory first, then ``sys.path``.

    The module stays imported (``sys.modules``), so a forked child (the CLI's
    validation, ``ampconv.runtime.isolated``) finds the same function.
    """
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise UsageError(f"{named('metric', spec)}: expected MODULE:FUNCTION, e.g. mymetrics:top1_agrees "
                         "(a module in the working directory or on PYTHONPATH)")
    module = _import(module_name, spec)
    function = getattr(module, function_name, None)
    if function is None:
        raise UsageError(f"{named('metric', spec)}: module {module_name!r} ({_origin(module)}) has no "
                         f"function {function_name!r}")
    if not callable(function):
        raise UsageError(f"{named('metric', spec)}: {function_name!r} in module {module_name!r} is a "
                         f"{type(function).__name__}, not a function")
    return TaskMetric(spec, function)


def _import(module_name: str, spec: str):
    """The module, imported with the working directory on the path; ``UsageError`` naming it when it fails."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(f"{named('metric', spec)}: no module {module_name!r} in the working directory "
                             f"({here}) or on PYTHONPATH") from None
        raise UsageError(f"{named('metric', spec)}: module {module_name!r} does not import: "
                         f"{type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module: a SyntaxError or its own error, in one line
        words = " ".join(str(exc).split())
        raise UsageError(f"{named('metric', spec)}: module {module_name!r} does not import: "
                         f"{type(exc).__name__}: {words}") from None
    finally:
        if added and here in sys.path:
            sys.path.remove(here)


def _origin(module) -> str:
    return getattr(module, "__file__", None) or "built in"


def _name_of(function: Callable) -> str:
    """``module:qualname`` of a function a library caller passes (the qualname alone when it has no
    module, as code run by ``exec``; the repr of a callable object)."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if module and qualname:
        return f"{module}:{qualname}"
    return qualname or repr(function)


@dataclasses.dataclass(frozen=True)
class MetricVerdict:
    """The metric over every sample: how many it held on, and the words of the sample that decides.

    ``sample`` and ``words``: the first sample it failed on, or, when it held
    on all, the first sample (a pass quotes what the metric saw there).
    """

    name: str
    samples: int
    failed: int
    sample: int | None
    words: str | None

    @property
    def passed(self) -> bool:
        """The metric held on every sample."""
        return self.failed == 0 and self.samples > 0

    def summary(self) -> str:
        """``metric mymetrics:top1 holds on 8/8 sample(s) (sample 0: "64 of 64 agree")``."""
        quoted = f' (sample {self.sample}: "{self.words}")' if self.words else ""
        if self.passed:
            return f"metric {self.name} holds on {self.samples}/{self.samples} sample(s){quoted}"
        return f"metric {self.name} fails on {self.failed} of {self.samples} sample(s){quoted}"

    def to_dict(self) -> dict:
        """JSON-able (the validation report's ``metric`` entry)."""
        return {**dataclasses.asdict(self), "passed": self.passed, "summary": self.summary()}


@dataclasses.dataclass
class MetricTally:
    """The metric's running verdict over the samples of one validation (nothing grows with their number)."""

    metric: TaskMetric
    samples: int = 0
    failed: int = 0
    sample: int | None = None
    words: str | None = None

    def add(self, index: int, reference: Mapping, converted: Mapping) -> bool:
        """Judge sample ``index``; True when the metric failed there."""
        check = self.metric.judge(reference, converted, index)
        self.samples += 1
        if not check.held:
            self.failed += 1
            if self.failed == 1:
                self.sample, self.words = index, check.words
        elif self.samples == 1:
            self.sample, self.words = index, check.words
        return not check.held

    def verdict(self) -> MetricVerdict:
        """What the samples so far say."""
        return MetricVerdict(self.metric.name, self.samples, self.failed, self.sample, self.words)


__all__ = ["MetricCheck", "MetricError", "MetricTally", "MetricVerdict", "TaskMetric", "load_metric", "metric_of"]
