"""What a validation run is asked to do (one immutable value) and how outputs are judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from ampconv.errors import UsageError, named
from ampconv.options.groups import check_tolerances
from ampconv.core.shapespec import range_pairs, shape_pairs
from ampconv.validation.metric import metric_of
from ampconv.validation.nature_kinds import NATURE_OVERRIDES
from ampconv.validation.criteria import (
    ELEMENTWISE_TOLERANCES,
    LIMIT_KEYS,
    Criteria,
    default_criteria,
    strict_criteria,
)

BACKENDS = ("auto", "native", "emulate")


# Elementwise (rtol, atol) per LOW type, for strict mode when only one of the
# two is given (and for localization); the default mode judges by
# ``criteria.default_criteria``. The name predates the default criteria.
DEFAULT_TOLERANCES: Mapping[str, tuple[float, float]] = ELEMENTWISE_TOLERANCES


@dataclasses.dataclass(frozen=True)
class ValidateOptions:
    """Everything that decides a validation run.

    Attributes:
        inputs: ``.npz`` files, folders of ``.npz``, or ONNX test-data folders
            (a model folder holding ``test_data_set_*`` or one such set). Empty:
            seeded random inputs from the declared input types.
        rtol, atol: giving either switches to the strict elementwise rule
            ``|conv - ref| <= atol + rtol*|ref|``, the other taken from
            ``DEFAULT_TOLERANCES`` for the LOW type found in the converted
            model (bf16 if any bfloat16 tensor). Both None: the default
            criteria for that type (``criteria.default_criteria``).
        backend: ``auto`` (native when onnxruntime has CUDA, else emulate),
            ``native`` (run the converted model as is) or ``emulate`` (float32
            compute rounded to the LOW type after every LOW tensor).
        samples, seed: how many random samples to draw, and the seed.
        shapes: ``(name, dims)`` pairs fixing dimensions of random inputs;
            ``name`` is an input name (whole shape), a dimension symbol (one
            value) or ``"input[axis]"`` (one axis of one input, one value).
            Dimensions left unset (-1, unnamed, or a symbol not given) are 1, with a note.
        localize: on failure, name the first node whose output drifts.
        input_ranges: ``(name, (low, high))`` pairs, or a dict ``{"audio":
            (-32768, 32767)}``: random values of input ``name`` are drawn
            uniformly from ``[low, high)`` (integer inputs: integers in
            ``[low, high]``) instead of N(0, 1) or small indices. Only for
            random inputs: with ``inputs`` it is an error.
        decisions: optional ``node_name -> {"precision", "rule"}`` from the
            converter, used to explain the localized node.
        show_progress: a hint for front ends (the library never draws); the
            CLI draws a progress bar through ``progress`` when this is set.
        progress: optional ``callback(done, total)`` called after each sample.
        floor: in default mode, also run the floor model (``validate.floor``:
            the float32 model on its inputs and weights rounded to the LOW
            type) and judge each output's error against that unavoidable
            error too: a failure within ``criteria.FLOOR_FACTOR`` times it passes.
        natures: ``(output, kind)`` pairs, or a dict ``{"det_boxes": "boxes"}``:
            how an output is judged, in place of what the graph says
            (``natures.OVERRIDES``: ``values`` judged on its RMS with no
            argmax read; ``probability`` on [0, 1]; ``boxes``/``scores``/
            ``labels`` one set of detections, matched as a set).
        extra_criteria: ``criteria.Criterion`` objects judging outputs
            beside the built-in criteria (default mode): a task's own figure,
            e.g. a PSNR of at least 30 dB on a decoded image.
        limits: ``(output, key, threshold)`` triples, or a dict ``{"logits":
            {"cosine": 0.999}}``: a built-in threshold for one output
            (``criteria.LIMIT_KEYS``: cosine, p99, max, label), default mode.
        metric: the user's own measure of success, which decides the verdict
            when given (``validate.metric``): a function ``(reference,
            converted) -> bool | (bool, words)`` called once per sample with
            dicts output name -> array, or ``"MODULE:FUNCTION"`` imported from
            the working directory or ``PYTHONPATH``. The result passes when it
            holds on every sample; the per-output figures are still measured.
    """

    inputs: tuple[str, ...] = ()
    rtol: float | None = None
    atol: float | None = None
    backend: str = "auto"
    samples: int = 1
    seed: int = 0
    shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    localize: bool = False
    decisions: Mapping[str, Mapping[str, str]] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )
    show_progress: bool = False
    progress: Callable[[int, int], None] | None = dataclasses.field(
        default=None, compare=False, repr=False
    )
    input_ranges: tuple[tuple[str, tuple[float, float]], ...] = ()
    floor: bool = True
    natures: tuple[tuple[str, str], ...] = ()
    extra_criteria: tuple = ()
    limits: tuple[tuple[str, str, float], ...] = ()
    metric: object = None  # a validate.metric.TaskMetric once made

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UsageError(f"unknown backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.samples < 1:
            raise UsageError(f"samples must be at least 1, got {self.samples}")
        check_tolerances(self.rtol, self.atol)
        if isinstance(self.inputs, str):
            object.__setattr__(self, "inputs", (self.inputs,))
        object.__setattr__(self, "shapes", shape_pairs(self.shapes))
        object.__setattr__(self, "input_ranges", range_pairs(self.input_ranges))
        object.__setattr__(self, "natures", nature_pairs(self.natures))
        object.__setattr__(self, "limits", limit_triples(self.limits))
        object.__setattr__(self, "extra_criteria", tuple(self.extra_criteria))
        object.__setattr__(self, "metric", metric_of(self.metric))
        if self.inputs and self.input_ranges:
            raise UsageError(f"{named('input_ranges')} sets the range of random inputs; with {named('inputs')} it does nothing")

    @property
    def strict(self) -> bool:
        """Whether outputs are judged by the elementwise rule (``rtol`` or ``atol`` given)."""
        return self.rtol is not None or self.atol is not None

    def criteria(self, dtype: str) -> tuple[Criteria, str]:
        """(how outputs are judged, where that came from) for the detected LOW type.

        Strict when ``rtol`` or ``atol`` is given (``"given"``, or ``"given,
        rest default for fp16"`` when one is); else the default criteria
        (``"default for fp16"``).
        """
        if not self.strict:
            chosen = dataclasses.replace(default_criteria(dtype), extra=self.extra_criteria, limits=self.limits)
            return chosen, f"default for {dtype}"
        rtol, atol, source = self.tolerances(dtype)
        return strict_criteria(rtol, atol), source

    def tolerances(self, dtype: str) -> tuple[float, float, str]:
        """(rtol, atol, where they came from) of the elementwise rule for the detected LOW type."""
        d_rtol, d_atol = DEFAULT_TOLERANCES[dtype]
        rtol = d_rtol if self.rtol is None else self.rtol
        atol = d_atol if self.atol is None else self.atol
        if self.rtol is None and self.atol is None:
            source = f"default for {dtype}"
        elif self.rtol is not None and self.atol is not None:
            source = "given"
        else:
            source = f"given, rest default for {dtype}"
        return rtol, atol, source


def nature_pairs(natures) -> tuple[tuple[str, str], ...]:
    """``natures`` as ``(output, kind)`` pairs from a dict or pairs; ``UsageError`` for an unknown kind."""
    items = natures.items() if isinstance(natures, Mapping) else natures
    pairs = []
    for item in items:
        try:
            name, kind = item
        except (TypeError, ValueError):
            raise UsageError(f"bad {named('natures')} entry {item!r}: expected (output, kind)") from None
        if kind not in NATURE_OVERRIDES:
            raise UsageError(f"{named('natures', entry=repr(name))}: unknown nature {kind!r}; choose one of "
                             f"{', '.join(NATURE_OVERRIDES)}")
        pairs.append((str(name), str(kind)))
    return tuple(pairs)


def limit_triples(limits) -> tuple[tuple[str, str, float], ...]:
    """``limits`` as ``(output, key, threshold)`` triples, from a dict of dicts or triples.

    ``UsageError`` for a key that names no built-in threshold or a threshold
    that is not a number >= 0.
    """
    if isinstance(limits, Mapping):
        limits = [(output, key, value) for output, keys in limits.items() for key, value in keys.items()]
    triples = []
    for item in limits:
        try:
            output, key, value = item
            value = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"bad {named('limits')} entry {item!r}: expected (output, criterion, threshold)") from None
        if key not in LIMIT_KEYS:
            raise UsageError(f"{named('limits', entry=repr(output))}: unknown criterion {key!r}; choose one of "
                             f"{', '.join(LIMIT_KEYS)}")
        if not value >= 0:
            raise UsageError(f"{named('limits', entry=repr(output))}: {key} must be a number >= 0, got {value:g}")
        triples.append((str(output), str(key), value))
    return tuple(triples)


def parse_limit(text: str) -> tuple[str, str, float]:
    """Parse one ``OUTPUT:KEY=VALUE`` (e.g. ``logits:cosine=0.999``); ``UsageError`` otherwise."""
    output, sep, rest = text.rpartition(":")
    key, eq, value = rest.partition("=")
    if not sep or not output or not eq:
        raise UsageError(f"bad limit {text!r}: expected OUTPUT:CRITERION=VALUE, e.g. logits:cosine=0.999")
    try:
        number = float(value)
    except ValueError:
        raise UsageError(f"bad limit {text!r}: VALUE must be a number, e.g. logits:p99=0.05") from None
    return limit_triples([(output, key, number)])[0]


def parse_nature(text: str) -> tuple[str, str]:
    """Parse one ``NAME=KIND`` (e.g. ``det_boxes=boxes``) into ``(name, kind)``; ``UsageError`` otherwise."""
    name, sep, kind = text.rpartition("=")
    if not sep or not name or not kind:
        raise UsageError(f"bad output nature {text!r}: expected NAME=KIND, e.g. boxes=boxes or heat=probability")
    return nature_pairs([(name, kind)])[0]
