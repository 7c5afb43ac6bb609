"""Every option of a conversion, declared once (``ampconv.options.declared.Option``).

``CONVERSION_OPTIONS`` is ``Config``'s field list, in order; the option groups
(``ampconv.options.groups``) pick theirs from ``OPTIONS``; the CLI makes its
flags from the same values (``ampconv_cli.options``). The four shared with
validation (``rtol``, ``atol``, ``shapes``, ``input_ranges``) are
``SHARED_WITH_VALIDATION``: ``ValidateOptions`` takes the same declarations.

A check here reads one value; a check that reads several lives in the record
that holds them (``groups.py``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, Mapping, Optional, Sequence

from ampconv.core.shapespec import parse_input_range, parse_shape, range_pairs, shape_pairs
from ampconv.errors import UsageError, named
from ampconv.options.declared import REPEATED, SWITCH, TOGGLE, Flag, Option, by_name, register_spellings

LEVELS = ("O0", "O1", "O2", "O3", "auto")
DTYPES = ("fp16", "bf16")
# Other spellings of the dtype keys: the ONNX names of the types, any case.
DTYPE_ALIASES = {"fp16": "fp16", "bf16": "bf16", "float16": "fp16", "bfloat16": "bf16"}
# What a node whose values do not fit the LOW type runs in (issue 32): float32 (the default), or bf16.
FALLBACK_DTYPES = ("float32", "bf16")
FALLBACK_ALIASES = {"float32": "float32", "fp32": "float32", "float": "float32", "bf16": "bf16", "bfloat16": "bf16"}
KV_CACHE = ("keep", "low")  # what kv_cache may say: leave the cache to keep_io_types, or make it LOW
TARGETS = ("cuda", "cpu")
# "A few seconds on the CPU": the default budget of the synthetic run's estimated cost (``calibration.cost``).
SYNTHETIC_BUDGET_S = 5.0
# The built-in op lists' names (``ampconv.policy.lists`` holds the lists; a test keeps the two in step).
PRESET_NAMES = ("default", "mindspore")


# ----------------------------------------------------------------- checks of one value
def _one_of(name: str, choices: Sequence[str], aliases: Optional[Mapping[str, str]] = None,
            words: Optional[str] = None, optional: bool = False) -> Callable[[Any], Any]:
    """A check: the value (through ``aliases``, any case) must be one of ``choices``."""
    aliases = aliases or {choice.lower(): choice for choice in choices}

    def check(value):
        if value is None and optional:
            return None
        value = aliases.get(str(value).lower(), value)
        if value not in choices:
            raise UsageError(f"unknown {named(name)} {value!r}: choose {words or 'one of ' + ', '.join(choices)}")
        return value

    return check


def _strings(value) -> tuple:
    """One string (or path) where a tuple goes: a tuple of strings, paths made text."""
    if isinstance(value, (str, os.PathLike)):
        value = (value,)
    return tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value)


def _path(value):
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def _regexes(value) -> tuple:
    patterns = _strings(value)
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"bad node-name regex {pattern!r}: {exc}") from None
    return patterns


def _names_or_all(value):
    return (value,) if isinstance(value, str) else value


def _rules(value) -> tuple:
    if value and not isinstance(value, (tuple, list)):
        return (value,)  # one rule where a list goes
    return tuple(value)


def _positive(name: str) -> Callable[[Any], Any]:
    def check(value):
        if value is not None and not value > 0:
            raise UsageError(f"{named(name)} must be a number > 0, got {value}")
        return value

    return check


def _tri_state(name: str) -> Callable[[Any], Any]:
    def check(value):
        if value not in (None, True, False):
            raise UsageError(f"{named(name)} must be None (within the budget), True or False, got {value!r}")
        return value

    return check


def _seconds(name: str) -> Callable[[Any], Any]:
    def check(value):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
            raise UsageError(f"{named(name)} must be a number of seconds > 0, got {value!r}")
        return value

    return check


def _fraction(value):
    if value is not None and not 0 < value <= 1:
        raise UsageError(f"{named('underflow_fraction')} must be in (0, 1], got {value}")
    return value


def _at_least_one(name: str) -> Callable[[Any], Any]:
    def check(value):
        if value < 1:
            raise UsageError(f"{named(name)} must be at least 1, got {value}")
        return value

    return check


def _opset(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise UsageError(f"{named('opset')} must be a positive integer, got {value!r}")
    return value


def _tolerance(name: str) -> Callable[[Any], Any]:
    def check(value):
        if value is not None and not value >= 0:
            raise UsageError(f"{named(name)} must be a number >= 0, got {value}")
        return value

    return check


# What the planner asks of a runtime's facts (``ampconv.runtime.facts.RuntimeFacts``, which this layer cannot import).
_RUNTIME_QUESTIONS = ("schema", "knows", "kernel_gaps", "kernel_ties", "gpu_low_kernel", "missing_low_kernel", "has_kernel", "listed_providers",
                      "provider_state")


def _runtime_facts(value):
    """A runtime's facts, or None: an object that answers the planner's questions (a ``RuntimeFacts``)."""
    if value is not None and not all(callable(getattr(value, name, None)) for name in _RUNTIME_QUESTIONS):
        # Not ``named``: a library-only option, which no flag of the CLI spells.
        raise UsageError(f"runtime must be an ampconv.runtime.facts.RuntimeFacts, got {type(value).__name__}")
    return value


def check_tolerances(rtol: float | None, atol: float | None) -> None:
    """``UsageError`` naming the parameter unless each given tolerance is a number >= 0 (validation and --tune)."""
    _tolerance("rtol")(rtol)
    _tolerance("atol")(atol)


# ----------------------------------------------------------------- the options
_POLICY = (
    Option("level", "O2", "O0 (no change), O1 (white list LOW), O2 (all LOW but black), O3 (all LOW), or "
           "``auto`` (by ``target``).", "str", _one_of("level", LEVELS),
           Flag(("--level",), "O0 no change, O1 white list LOW, O2 all LOW but the black list, O3 everything LOW, "
                "auto by --target.", choices=LEVELS, any_case=True, metavar="|".join(LEVELS), show_default=True)),
    Option("target", None, "``cuda`` or ``cpu``: the device the output is for. ``auto`` reads it for the level; "
           "the planner asks its provider's kernels (``ampconv.runtime.target``). None: ``cuda`` when the runtime "
           "lists the CUDA provider (whether or not it loads here), else ``cpu``.",
           "Optional[str]", _one_of("target", TARGETS, words="cuda or cpu", optional=True),
           Flag(("--target",), "Deployment device: --level auto reads it, the plan asks its provider's kernels "
                "(default: cuda when the installed onnxruntime lists CUDA, whether or not it loads here).",
                choices=TARGETS)),
    Option("preset", "default", "name of the built-in op lists (``default`` or ``mindspore``).", "str", None,
           Flag(("--preset",), "Built-in op lists.", choices=PRESET_NAMES, show_default=True)),
    Option("mixlists", (), "policy files (Ascend ``modify_mixlist`` JSON), applied in order; one path may be given "
           "as a string.", "Tuple[str, ...]", _strings,
           Flag(("--mixlist",), "Ascend modify_mixlist JSON; repeatable, applied left to right.", REPEATED,
                metavar="FILE")),
    Option("op_info", None, "an Ascend operator-info file (``aic-<soc>-ops-info.json``, str or PathLike) read as "
           "the base lists after the preset, before ``mixlists`` (docs/precision.md sec. 7). None: no such base.",
           "Optional[str]", _path,
           Flag(("--op-info",), "Ascend operator-info JSON (aic-<soc>-ops-info.json): precision_reduce true -> "
                "white, false -> black, absent -> gray; applied after --preset, before --mixlist.",
                metavar="FILE")),
)
_PLAN = (
    Option("dtype", "fp16", "``fp16`` or ``bf16``: the LOW type (``float16``/``bfloat16`` too).", "str",
           _one_of("dtype", DTYPES, DTYPE_ALIASES, "fp16 or bf16"),
           Flag(("--dtype",), "The low-precision type (fp16/float16 or bf16/bfloat16).",
                choices=tuple(DTYPE_ALIASES), any_case=True, metavar="fp16|bf16", show_default=True)),
    Option("keep_io_types", True, "True keeps every graph input/output float32, False converts them, a tuple "
           "names the ones to keep float32 (one name may be a string).", "Union[bool, Tuple[str, ...]]",
           _names_or_all),  # two flags build it (--keep-io-types [NAMES], --no-keep-io-types): ampconv_cli.options
    Option("kv_cache", "keep", "``keep`` (the default) leaves a decoder's KV cache inputs and outputs to "
           "``keep_io_types``; ``low`` puts every past/present pair found (``ampconv.plan.kvcache``) in the LOW "
           "type, so the cache is never cast through float32; ids, masks and positions are untouched.", "str",
           _one_of("kv_cache", KV_CACHE, words=" or ".join(KV_CACHE)),
           Flag(("--kv-cache",), "low: a decoder's KV cache inputs and outputs (past/present pairs, found by "
                "structure) in the low type, so the cache never round-trips through float32; keep: as "
                "--keep-io-types says.", choices=KV_CACHE, show_default=True)),
    Option("rules", (), "rules of your own (``ampconv.plan.rules.Rule`` with a ``decide`` function), tried for "
           "every node after the hard facts, the user's float32 overrides and the range and data guards, before "
           "``force_low`` and the level table (docs/precision.md, \"Rules of your own\"); each decision names its "
           "rule in the report.", "Tuple[object, ...]", _rules),
    Option("fallback_dtype", "float32", "what a node runs in when a guard finds its values do not fit float16 "
           "(constants, calibration data, the synthetic run, the range analysis): ``float32`` (the default) or "
           "``bf16`` (bfloat16 where its schema at the model's opset admits it, else float32); everything else "
           "stays fp16 (docs/precision.md, \"The fallback type\"). ``bf16`` needs ``dtype=\"fp16\"``.", "str",
           _one_of("fallback_dtype", FALLBACK_DTYPES, FALLBACK_ALIASES, "float32 or bf16"),
           Flag(("--fallback-dtype",), "What a node runs in when its values do not fit fp16 (constants, "
                "calibration data, the synthetic run, the range analysis): float32, or bf16 where its schema "
                "admits it (float32's range at fp16's speed); the rest stays fp16. bf16 needs --dtype fp16.",
                choices=FALLBACK_DTYPES, any_case=True, show_default=True)),
    Option("keep_fp32", (), "node-name regexes forced HIGH.", "Tuple[str, ...]", _regexes,
           Flag(("--keep-fp32",), "Keep nodes whose name matches float32; repeatable.", REPEATED,
                metavar="REGEX")),
    Option("keep_bf16", (), "node-name regexes put in the fallback type (bfloat16 where the schema admits it at "
           "the opset, else float32; rule ``user-keep-bf16``); needs ``fallback_dtype=\"bf16\"``. Localization "
           "suggests it where bfloat16's range fixes an overflow.", "Tuple[str, ...]", _regexes,
           Flag(("--keep-bf16",), "Run nodes whose name matches in bf16 (float32 where their schema refuses it); "
                "repeatable; needs --fallback-dtype bf16.", REPEATED, metavar="REGEX")),
    Option("force_low", (), "node-name regexes forced LOW (schema constraints still win).", "Tuple[str, ...]",
           _regexes,
           Flag(("--force-low",), "Force nodes whose name matches to the low type (schema limits still apply).",
                REPEATED, metavar="REGEX")),
    Option("block_ops", (), "op types forced HIGH (``OpType`` or ``domain::OpType``); an entry may be a comma "
           "list.", "Tuple[str, ...]", _strings,
           Flag(("--block-op",), "Keep this op type float32 at every level (OpType or domain::OpType).",
                REPEATED, metavar="OP")),
    Option("clamp", False, "clamp out-of-range constants instead of pinning their consumers HIGH: too large "
           "values to +-max_finite, too small ones per ``clamp_small``.", "bool", None,
           Flag(("--clamp",), "Clamp out-of-range constants to the low type's range instead of keeping their "
                "consumers float32.", SWITCH)),
    Option("max_finite", None, "a constant with a finite |x| above this keeps its consumers float32 (or, with "
           "``clamp``, is clamped to +-this). None: the LOW type's max (values that would round to inf). At most "
           "that max.", "Optional[float]", None,
           Flag(("--max-finite",), "Constants with |x| above X keep their consumers float32 (--clamp: clamped "
                "to +-X). Default: the low type's max, 65504 for fp16.", number=("float", 0, None, True),
                metavar="X")),
    Option("min_positive", None, "a constant with non-zero |x| below this (too many, or in a small constant) "
           "keeps its consumers float32. None: values that would round to 0; with ``clamp``, the LOW smallest "
           "subnormal. At least that subnormal, and below ``max_finite``.", "Optional[float]", None,
           Flag(("--min-positive",), "Non-zero constants with |x| below Y count as too small (default: those "
                "that round to 0; --clamp raises them to the smallest subnormal, 5.96e-08 for fp16).",
                number=("float", 0, None, True), metavar="Y")),
    Option("clamp_small", None, "with ``clamp``, what too small values become: ``raise`` (+-min_positive, the "
           "default; keeps an epsilon non-zero) or ``flush`` (+-0). None: ``raise``; set without ``clamp``: an "
           "error.", "Optional[str]", None,
           Flag(("--clamp-small",), "With --clamp: raise too small values to +-min positive (default) or flush "
                "them to 0.", choices=("raise", "flush"))),
    Option("runtime", None, "the facts of the runtime the output is for (an ``ampconv.runtime.facts.RuntimeFacts``: "
           "its schemas, providers and kernels). None: the installed onnxruntime's. Another runtime, or a test's "
           "stand-in, plugs in here, for this conversion alone (the plan's context carries it; nothing is switched "
           "process-wide).", "Optional[Any]", _runtime_facts),  # library-only: no flag
)
_WRITE = (
    Option("check_runtime", True, "load the result in onnxruntime (when installed) before writing: the load check, "
           "then the sessions users build at the default optimization level (``checks.users``).", "bool", None,
           Flag(("--runtime-check/--no-runtime-check",), "Load the output in onnxruntime before publishing it: the "
                "load check, then the sessions users build (--no-runtime-check skips both).", TOGGLE)),
    Option("overwrite", False, "allow replacing an existing output file (never the input).", "bool", None,
           Flag(("--overwrite",), "Replace an existing output file (never the input).", SWITCH)),
    Option("max_workers", 2, "threads used to convert/write external data.", "int", None),
    Option("opset", None, "upgrade the model to this default-domain opset with onnx's version converter before "
           "converting. None: the model is upgraded by default when its opset keeps heavy ops or Q/DQ nodes from "
           "the LOW type (bf16 Conv needs opset 22, a float16 Q/DQ scale opset 19), to the first opset that "
           "admits them; said in the report.", "Optional[int]", _opset,
           Flag(("--opset",), "Upgrade the model to default-domain opset N with onnx's version converter before "
                "converting. By default a model whose opset keeps its heavy ops or Q/DQ nodes from the LOW type is "
                "upgraded to the first opset that admits them (bf16 Conv: 22; a float16 Q/DQ scale: 19).",
                number=("int", 1, None, False), metavar="N")),
    Option("keep_opset", False, "never upgrade by default (with ``opset`` too: a usage error, the two contradict "
           "each other).", "bool", None,
           Flag(("--keep-opset",), "Never upgrade the model's opset by default (not with --opset).", SWITCH)),
    Option("annotate", False, "stamp each node's precision and rule into its ``metadata_props`` "
           "(``ampconv.precision``, ``ampconv.rule``).", "bool", None,
           Flag(("--annotate",), "Stamp each node's precision and rule into its metadata_props "
                "(ampconv.precision, ampconv.rule), visible in model viewers.", SWITCH)),
    Option("progress", None, "optional callback(bytes_done, bytes_total) while writing weights.",
           "Optional[Callable[[int, int], None]]", None, compare=False),
)
_DATA = (
    Option("calibration_data", (), "paths of calibration samples (``.npz`` files, folders of them, ONNX "
           "``test_data_set_*`` folders), or ``(\"random\",)`` for seeded random inputs. Empty: no data guards.",
           "Tuple[str, ...]", _strings,
           Flag(("--calibration-data",), "Calibration samples: FILE.npz, a folder of .npz, ONNX test_data_set_* "
                "folders (repeatable), or 'random'. Nodes whose activations overflow or underflow the low type "
                "stay float32.", REPEATED, metavar="PATH")),
    Option("calibration_samples", 8, "how many random samples ``calibration_data=(\"random\",)`` draws.", "int",
           _at_least_one("calibration_samples"),
           Flag(("--calibration-samples",), "How many samples --calibration-data random draws.",
                number=("int", 1, None, False), metavar="N", show_default=True)),
    Option("calibration_seed", 0, "the seed of the random calibration samples.", "int", None,
           Flag(("--calibration-seed",), "Seed of --calibration-data random.", number=("int", None, None, False),
                metavar="S", show_default=True)),
    Option("data_max", None, "the data guard keeps a node float32 when a value exceeds this (None: half the LOW "
           "type's largest value).", "Optional[float]", _positive("data_max"),
           Flag(("--data-max",), "Keep a node float32 when a calibration value exceeds this (default: half the "
                "low type's max, 32752 for fp16).", number=("float", 0, None, True), metavar="X")),
    Option("underflow_fraction", None, "the share of non-zero values below the LOW normal range above which a "
           "tensor feeding an error amplifier stays float32 (None: 0.5).", "Optional[float]", _fraction,
           Flag(("--underflow-fraction",), "Share of non-zero values below the low type's normal range above "
                "which a tensor feeding Log/Div/Pow/Sqrt/a normalization stays float32 (default 0.5).",
                number=("float", 0, 1, True), metavar="F")),
    Option("synthetic_run", None, "without ``calibration_data``, run the model once in float32 on one seeded random "
           "sample and keep float32 the nodes whose values overflow the LOW type there; the run also states how far "
           "each float input may grow (the report's ``envelope``) (``ampconv.calibration.synthetic``). None (the "
           "default): when its estimated cost fits ``synthetic_budget``, or a slice of it does (symbolic dimensions "
           "at 1); True: whatever the time estimate; either way only when its estimated peak memory fits the "
           "memory available (a cgroup limit included); False: the magnitude analysis alone.", "Optional[bool]", _tri_state("synthetic_run"),
           Flag(("--synthetic-run/--no-synthetic-run",), "Without --calibration-data, the model runs once in float32 "
                "on one seeded random sample (inputs in their --input-range) when its estimated cost fits "
                "--synthetic-budget: nodes whose values overflow the low type there stay float32, and the summary "
                "says how far each input may grow. --synthetic-run: run whatever the estimate, when memory allows; "
                "--no-synthetic-run: never.", TOGGLE)),
    Option("synthetic_budget", None, "CPU seconds the synthetic run may cost by its estimate (FLOPs, activation and "
           "weight bytes and nodes, at this machine's measured rates; ``ampconv.calibration.cost``). None (the "
           "default): 5 s, and a run estimated over half a second must spend at least as long computing as "
           "onnxruntime spends setting its nodes up; a number: that budget alone.", "Optional[float]",
           _seconds("synthetic_budget"),
           Flag(("--synthetic-budget",), f"CPU seconds the synthetic run may cost by its estimate (FLOPs, bytes and "
                f"nodes at this machine's measured rates). Default {SYNTHETIC_BUDGET_S:g}, and a run over half a "
                "second must compute at least as long as onnxruntime sets its nodes up.",
                number=("float", 0, None, True), metavar="SECONDS")),
    Option("release", True, "with evidence (``calibration_data`` or the synthetic run), try each float32 island "
           "back in LOW under emulation on that evidence and keep LOW whatever does not move the outputs beyond the "
           "floor (``ampconv.calibration.release``; a bounded number of evaluations). False: the plan as the guards "
           "made it.", "bool", None,
           Flag(("--release/--no-release",), "With evidence (--calibration-data or the synthetic run): try each "
                "float32 island back in the low type under emulation and keep it low where the outputs stay within "
                "the floor (a bounded number of evaluations).", TOGGLE, show_default=True)),
    Option("tune", False, "after the data guards, validate on the calibration samples and keep float32 the fewest "
           "nodes that make the check pass (the release step then runs after it).", "bool", None,
           Flag(("--tune",), "With --calibration-data: validate on the samples and keep float32 the fewest nodes "
                "that make it pass (tolerance: --rtol/--atol, else the default criteria).", SWITCH)),
)
# Shared with validation (``ampconv.validation.options``): one declaration, one flag, two records.
SHARED_WITH_VALIDATION = (
    Option("rtol", None, "the relative tolerance of the strict elementwise rule |conv-ref| <= atol + rtol*|ref| "
           "(validation; ``tune`` in a conversion). None: the default criteria for the LOW type (or, with "
           "``atol``, the LOW type's default rtol).", "Optional[float]", _tolerance("rtol"),
           Flag(("--rtol",), "Relative tolerance of the strict elementwise rule |conv-ref| <= atol + rtol*|ref| "
                "(the other defaults per dtype: fp16 1e-2, bf16 5e-2). Without --rtol/--atol the default criteria "
                "judge each output: no new NaN/Inf, argmax on clear rows, cosine, p99/max error against the "
                "output's scale (docs/validation.md).", number=("float", 0, None, False), metavar="R")),
    Option("atol", None, "the absolute tolerance of the strict elementwise rule (see ``rtol``).", "Optional[float]",
           _tolerance("atol"),
           Flag(("--atol",), "Absolute tolerance: switches to the strict elementwise rule (see --rtol; default per "
                "dtype: fp16 1e-2, bf16 5e-2).", number=("float", 0, None, False), metavar="A")),
    Option("shapes", (), "``(name, dims)`` pairs or a dict ``{\"batch\": 2}``: the shape of a random input, the "
           "value of a dimension symbol, or the size of one axis (``x[2]``). A conversion uses them for random "
           "calibration inputs and the report's GPU figures (cast traffic per inference; unbound dims count 1).",
           "Tuple[Tuple[str, Tuple[int, ...]], ...]", shape_pairs,
           Flag(("--shape",), "Shape of a random input (x:1x3x224x224), value of a dimension symbol (batch:1), or "
                "size of one axis of an input (x[2]:48, axis from 0; x[-1]:192 counts from the end). Dimensions "
                "left unset (-1, unnamed '?', or a symbol not given) are 1, with a note. Repeatable.", REPEATED,
                metavar="NAME:DIMS", parse=parse_shape)),
    Option("input_ranges", (), "``(name, (low, high))`` pairs or a dict ``{\"audio\": (-32768, 32767)}``: the value "
           "range of a random input (floats uniform in [low, high), integers in [low, high]). In a conversion: of "
           "``calibration_data=(\"random\",)`` or of the synthetic run, whose nodes extrapolated past the LOW range "
           "at the range's largest magnitude run in the fallback type (rule ``data-envelope``).",
           "Tuple[Tuple[str, Tuple[float, float]], ...]", range_pairs,
           Flag(("--input-range",), "Value range of a random input (audio:-32768,32767, image:0,255): floats "
                "uniform in [LOW, HIGH), integers in [LOW, HIGH]; equal ends hold it constant (sr:16000,16000). "
                "Default: floats N(0, 1), integers small indices. Repeatable; not with --inputs.", REPEATED,
                metavar="NAME:LOW,HIGH", parse=parse_input_range)),
)

# How a validation judges its outputs, and ``tune``, which judges candidates as validate would: declared
# here once for Config and ValidateOptions alike. The forms they take (limit triples, a loaded metric) are
# validation's to know: ``ampconv.validation.options`` registers each one's check and parser
# (``register_judging``) as it is imported, which ``import ampconv`` always does.
_JUDGING: Dict[str, tuple] = {}


def register_judging(name: str, check: Callable[[Any], Any], parse: Optional[Callable[[str], Any]] = None) -> None:
    """Give the judging option ``name`` its check (value -> the value kept) and its flag's parser."""
    _JUDGING[name] = (check, parse)


def _judged(name: str) -> Callable[[Any], Any]:
    def check(value):
        entry = _JUDGING.get(name)
        return value if entry is None else entry[0](value)

    return check


def _parsed(name: str) -> Callable[[str], Any]:
    def parse(text: str):
        return _JUDGING[name][1](text)

    return parse


JUDGING = (
    Option("natures", (), "``(output, kind)`` pairs, or a dict ``{\"det_boxes\": \"boxes\"}``: how an output is "
           "judged, in place of what the graph says (``values`` judged on its RMS with no argmax read; "
           "``probability`` on [0, 1]; ``boxes``/``scores``/``labels`` one set of detections, matched as a set).",
           "Tuple[Tuple[str, str], ...]", _judged("natures"),
           Flag(("--nature",), "How to judge an output, in place of what the graph says (values, probability, "
                "boxes, scores, labels): boxes/scores/labels make outputs one detection set, matched as a set; "
                "probability judges on [0, 1]; values on the output's RMS with no argmax read. Repeatable "
                "(docs/validation.md).", REPEATED, metavar="OUTPUT=KIND", parse=_parsed("natures"))),
    Option("extra_criteria", (), "``criteria.Criterion`` objects judging outputs beside the built-in criteria "
           "(default mode): a task's own figure, e.g. a PSNR of at least 30 dB on a decoded image.", "tuple",
           _judged("extra_criteria")),
    Option("limits", (), "``(output, key, threshold)`` triples, or a dict ``{\"logits\": {\"cosine\": 0.999}}``: "
           "a built-in threshold for one output (``criteria.LIMIT_KEYS``: cosine, p99, max, label), default mode.",
           "Tuple[Tuple[str, str, float], ...]", _judged("limits"),
           Flag(("--limit",), "A default-criteria threshold for one output: cosine, p99, max or label "
                "(logits:cosine=0.999, heat:p99=0.05). Repeatable (docs/validation.md).", REPEATED,
                metavar="OUTPUT:CRITERION=VALUE", parse=_parsed("limits"))),
    Option("metric", None, "the user's own measure of success, which decides the verdict when given "
           "(``validation.metric``): a function ``(reference, converted) -> bool | (bool, words)`` called once per "
           "sample with dicts output name -> array, or ``\"MODULE:FUNCTION\"`` imported from the working directory "
           "or ``PYTHONPATH``. It passes when it holds on every sample; the per-output figures are still measured.",
           "object", _judged("metric"),
           Flag(("--metric",), "Your own measure of success, which decides the verdict: FUNCTION(reference, "
                "converted) from MODULE (working directory or PYTHONPATH), called per sample with dicts output "
                "name -> array, returns a bool or (bool, words). Exit 0 when it holds on every sample, 3 when "
                "not; the table still shows each output's figures (docs/validation.md, 'Your own metric').",
                metavar="MODULE:FUNCTION")),
)

# Config's fields, in order.
CONVERSION_OPTIONS = _POLICY + _PLAN + _WRITE + _DATA + SHARED_WITH_VALIDATION + JUDGING
OPTIONS: Dict[str, Option] = by_name(CONVERSION_OPTIONS)
register_spellings(CONVERSION_OPTIONS)
