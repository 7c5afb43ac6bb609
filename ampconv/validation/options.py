"""What a validation run is asked to do (one immutable value) and how outputs are judged."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ampconv.errors import UsageError, named
from ampconv.options.conversion import JUDGING, SHARED_WITH_VALIDATION, register_judging
from ampconv.validation.metric import metric_of
from ampconv.options.declared import REPEATED, TOGGLE, Flag, Option, by_name, option_record, pick, register_spellings
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


def _inputs(value) -> tuple:
    return (value,) if isinstance(value, str) else tuple(value)


def _backend(value):
    if value not in BACKENDS:
        raise UsageError(f"unknown {named('backend')} {value!r}: choose one of {', '.join(BACKENDS)}")
    return value


def _samples(value):
    if value < 1:
        raise UsageError(f"{named('samples')} must be at least 1, got {value}")
    return value


# The options of a validation run, declared once (``ampconv.options.declared``): ``ValidateOptions``'
# fields and the CLI's flags. rtol, atol, shapes and input_ranges are the conversion's declarations.
_OWN = by_name((
    Option("inputs", (), "``.npz`` files, folders of ``.npz``, or ONNX test-data folders (a model folder holding "
           "``test_data_set_*`` or one such set). Empty: seeded random inputs from the declared input types.",
           "tuple[str, ...]", _inputs,
           Flag(("--inputs",), "Input sample(s): FILE.npz, a folder of .npz, or ONNX test-data folder(s) "
                "(test_data_set_*/input_*.pb). Repeatable. Default: seeded random data.", REPEATED, metavar="PATH")),
    Option("backend", "auto", "``auto`` (native when onnxruntime has CUDA, else emulate), ``native`` (run the "
           "converted model as is) or ``emulate`` (float32 compute rounded to the LOW type after every LOW "
           "tensor).", "str", _backend,
           Flag(("--backend",), "native: run the converted model as is (CUDA if available); emulate: float32 "
                "compute rounded to fp16/bf16 after every LOW tensor (faithful on a CPU); auto: native on CUDA, "
                "else emulate.", choices=BACKENDS, show_default=True)),
    Option("samples", 1, "how many random samples to draw.", "int", _samples,
           Flag(("--samples",), "Number of random samples (without --inputs).", number=("int", 1, None, False),
                metavar="N", show_default=True)),
    Option("seed", 0, "the seed of the random samples.", "int", None,
           Flag(("--seed",), "Seed for random inputs.", number=("int", None, None, False), metavar="S",
                show_default=True)),
    Option("localize", False, "on failure, name the first node whose output drifts.", "bool", None,
           Flag(("--localize/--no-localize",), "On failure, name the first node whose output drifts.", TOGGLE,
                show_default=True)),
    Option("decisions", None, "optional ``node_name -> {\"precision\", \"rule\"}`` from the converter, used to "
           "explain the localized node.", "Mapping[str, Mapping[str, str]] | None", None, compare=False),
    Option("show_progress", False, "a hint for front ends (the library never draws); the CLI draws a progress bar "
           "through ``progress`` when this is set.", "bool", None),
    Option("progress", None, "optional ``callback(done, total)`` called after each sample.",
           "Callable[[int, int], None] | None", None, compare=False),
    Option("floor", True, "in default mode, also run the floor model (``validation.floor``: the float32 model on "
           "its inputs and weights rounded to the LOW type) and judge each output's error against that "
           "unavoidable error too: a failure within ``criteria.FLOOR_FACTOR`` times it passes.", "bool", None),
))
SHARED = {option.name: option for option in SHARED_WITH_VALIDATION + JUDGING}
VALIDATION_OPTIONS = pick({**_OWN, **SHARED}, "inputs", "rtol", "atol", "backend", "samples", "seed", "shapes",
                          "localize", "decisions", "show_progress", "progress", "input_ranges", "floor", "natures",
                          "extra_criteria", "limits", "metric")
register_spellings(VALIDATION_OPTIONS)


@option_record(VALIDATION_OPTIONS)
class ValidateOptions:
    """Everything that decides a validation run.

    Giving ``rtol`` or ``atol`` switches to the strict elementwise rule
    ``|conv - ref| <= atol + rtol*|ref|``, the other taken from
    ``DEFAULT_TOLERANCES`` for the LOW type found in the converted model (bf16
    if any bfloat16 tensor). Both None: the default criteria for that type
    (``criteria.default_criteria``). ``shapes`` and ``input_ranges`` shape
    the random inputs only: with ``inputs``, ``input_ranges`` is an error.
    """

    def __post_init__(self) -> None:
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


# The forms the judging options take (declared in ``ampconv.options.conversion``, read by Config and here).
register_judging("natures", nature_pairs, parse_nature)
register_judging("limits", limit_triples, parse_limit)
register_judging("extra_criteria", tuple)
register_judging("metric", metric_of)
