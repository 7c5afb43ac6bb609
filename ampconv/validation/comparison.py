"""The sample loop of ``validate``: both models run on each sample as it streams in, verdicts fold as they come.

Nothing here grows with the number of samples, so ``--samples 100000000``
runs in the memory of one sample (docs/validation.md, "Many samples"):

- each output keeps the worst metrics folded so far: ``metrics.worst`` of
  ``[worst so far, this sample]`` equals ``metrics.worst`` of every sample
  (maxima, minima, sums, size-weighted means, and the verdict of the worst
  sample, the first one on ties);
- the per-sample metrics and sample sources of the report are the first
  ``KEPT_SAMPLES``; the count is kept apart;
- a bounded output keeps the span its reference used (the weak-check hint);
- the first failing sample and its reference outputs are kept for
  localization.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np

from ampconv.validation import criteria as judge_rules
from ampconv.validation import detections
from ampconv.validation.metric import MetricTally
from ampconv.numerics import metrics
from ampconv.validation.result import OutputResult

# Per-sample metrics and sample sources the result lists (the verdict folds every sample).
KEPT_SAMPLES = 100


@dataclasses.dataclass
class _Tally:
    """One output's running verdict."""

    worst: metrics.Metrics | None = None
    kept: list = dataclasses.field(default_factory=list)
    error: str | None = None
    span: tuple[float, float] | None = None
    shape: tuple[int, ...] = ()
    exact: bool = False
    in_set: bool = False

    def add(self, measured: metrics.Metrics) -> None:
        self.worst = measured if self.worst is None else metrics.worst([self.worst, measured])
        if len(self.kept) < KEPT_SAMPLES:
            self.kept.append(measured)

    def result(self, name: str) -> OutputResult:
        if self.error or self.worst is None:
            return OutputResult(name, self.shape, tuple(self.kept), None, False, self.exact, self.error or "no sample",
                                self.in_set)
        return OutputResult(name, self.shape, tuple(self.kept), self.worst, self.worst.passed, self.exact,
                            in_set=self.in_set)


@dataclasses.dataclass(frozen=True)
class Compared:
    """What the sample loop found.

    ``count`` samples were compared; ``sources`` names the first
    ``KEPT_SAMPLES``; ``first_failed`` is ``(index, sample, reference
    outputs)`` of the first sample on which some output failed (None when all
    passed); ``spans`` maps each bounded output to the (min, max) its reference
    took over all samples. With the user's metric, ``metric`` is its verdict
    (``validation.metric.MetricVerdict``) and ``first_failed`` the first sample
    it failed on.
    """

    outputs: tuple[OutputResult, ...]
    count: int
    sources: tuple[str, ...]
    first_failed: tuple[int, dict, dict] | None
    spans: dict
    metric: object = None


@dataclasses.dataclass(frozen=True)
class Judging:
    """How each output is judged: its criteria, the LOW type, and the natures of the reference's outputs;
    and how the whole sample is: the user's metric (``validation.metric.TaskMetric``; None: none given)."""

    criteria: object
    dtype: str
    natures: dict
    metric: object = None


def compare(
    samples: Iterable[tuple[str, dict]],
    run_reference: Callable[[dict], dict],
    run_converted: Callable[[dict], dict],
    out_names: list[str],
    judging: Judging,
    progress: Callable[[int], None] | None = None,
    run_floor: Callable[[dict], dict] | None = None,
) -> Compared:
    """Run both models on every ``(source, sample)`` as it arrives and fold each output's verdict.

    ``run_reference(sample)`` and ``run_converted(sample)`` return outputs by
    name. An output that cannot be compared on some sample (a shape mismatch)
    records that sample's error and fails; the others go on. ``progress(done)``
    is called after each sample. ``run_floor(sample)``: the floor model's
    outputs (``validation.floor``), which each float output's error is judged
    against too.
    """
    tallies = {name: _Tally() for name in out_names}
    task = MetricTally(judging.metric) if judging.metric is not None else None
    sources: list[str] = []
    first_failed = None
    count = 0
    for index, (source, sample) in enumerate(samples):
        ref_out = run_reference(sample)
        conv_out = run_converted(sample)
        floor_out = run_floor(sample) if run_floor is not None else None
        failed = False
        for name in out_names:
            failed |= _judge_output(tallies[name], name, index, (ref_out, conv_out, floor_out), judging)
        if task is not None:  # the user's metric decides: localization reads the first sample it fails on
            failed = task.add(index, read_only(ref_out), read_only(conv_out))
        if failed and first_failed is None:
            first_failed = (index, sample, ref_out)
        if len(sources) < KEPT_SAMPLES:
            sources.append(source)
        count += 1
        if progress is not None:
            progress(count)
    outputs = tuple(tallies[name].result(name) for name in out_names)
    spans = {name: t.span for name, t in tallies.items() if t.span is not None}
    return Compared(outputs, count, tuple(sources), first_failed, spans, task.verdict() if task else None)


def read_only(outputs: dict) -> dict:
    """``outputs`` with each array a read-only view: the user's metric cannot change what the verdict reads."""
    views = {}
    for name, array in outputs.items():
        view = np.asarray(array).view()
        view.flags.writeable = False
        views[name] = view
    return views


def judge_output(name: str, ref_out: dict, conv_out: dict, judging: Judging,
                 floor_out: dict | None = None) -> metrics.Metrics:
    """Judge output ``name`` of one sample as ``validate`` does: a token sequence as sequences, any other
    output by the criteria on the scale it lives on, against the floor model's error when ``floor_out``
    holds it. Raises ValueError when the shapes differ.

    ``--tune`` judges its candidates with this too, so it pins nothing for a model the verdict passes.
    """
    reference = ref_out[name]
    nature = judging.natures.get(name)
    if in_detection_set(nature, judging):
        members = {n: other for n, other in judging.natures.items()
                   if other.kind == "detections" and other.group == nature.group}
        return detections.judge_detections(members, ref_out, conv_out, judging.criteria, floor_out)[name]
    steps = sequence_axis(reference, nature)
    if steps is not None:
        ref_rows, conv_rows = (np.moveaxis(np.asarray(a), steps, -1) for a in (reference, conv_out[name]))
        return judge_rules.judge_sequence(ref_rows, conv_rows, scores_of(ref_out, name), judging.dtype)
    # Integer and bool outputs are judged exact by judge itself.
    floor = floor_out.get(name) if floor_out is not None else None
    return judge_rules.judge(reference, conv_out[name], judging.criteria, nature, floor, name)


def in_detection_set(nature, judging: Judging) -> bool:
    """Whether an output of this ``nature`` is judged as a member of a detection set (default mode only)."""
    return nature is not None and nature.kind == "detections" and judging.criteria.mode == judge_rules.DEFAULT


def _judge_output(tally: _Tally, name: str, index: int, outputs: tuple, judging: Judging) -> bool:
    """Judge one output on one sample into ``tally``; True when it failed there.

    ``outputs``: the reference's, the converted model's and the floor model's (or None) outputs.
    """
    ref_out, conv_out, floor_out = outputs
    reference = ref_out[name]
    tally.shape = tuple(np.asarray(reference).shape)
    nature = judging.natures.get(name)
    # A member of a detection set is judged as the set (default mode), never by exact match of its own values.
    tally.in_set = in_detection_set(nature, judging)
    tally.exact = not is_float(reference) and not tally.in_set
    if nature is not None and nature.kind == "bounded":
        tally.span = _span(reference, tally.span)
    if tally.error:
        return False
    try:
        measured = judge_output(name, ref_out, conv_out, judging, floor_out)
    except ValueError as exc:
        tally.error = f"sample {index}: {exc}"
        return True
    tally.add(measured)
    return not measured.passed


def _span(array, seen):
    """(min, max) of the finite values of ``array``, merged with ``seen``."""
    values = np.asarray(array, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return seen
    low, high = float(values.min()), float(values.max())
    return (low, high) if seen is None else (min(seen[0], low), max(seen[1], high))


def is_float(array) -> bool:
    """Whether ``array`` holds floats (float16/32/64 or bfloat16)."""
    return metrics.is_float_dtype(np.asarray(array).dtype)


def sequence_axis(array, nature) -> int | None:
    """The step axis of an integer output read as token sequences: a Loop/Scan's stack axis, else the last of
    an output of rank 2 or more; None for any other output."""
    array = np.asarray(array)
    if is_float(array) or array.dtype == np.bool_ or array.ndim == 0:
        return None
    if nature is not None and nature.kind == "sequence":
        return nature.axis
    return -1 if array.ndim >= 2 and array.shape[-1] > 1 else None


def scores_of(outputs: dict, name: str):
    """A float output holding per-step scores for the sequences ``name``: its shape is theirs plus a vocabulary axis."""
    shape = np.asarray(outputs[name]).shape
    for other, array in outputs.items():
        array = np.asarray(array)
        if other != name and is_float(array) and array.ndim == len(shape) + 1 and array.shape[:-1] == shape:
            return array
    return None
