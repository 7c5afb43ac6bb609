"""Conversion options: one immutable ``Config`` for callers, split into the groups each stage reads.

``Config`` is the public, flat value (``ampconv.Config(level="O3")``). It
normalizes what people type, then builds its four option groups, each of
which checks its own fields once when it is made (the groups live in
``ampconv.options.groups``, below every unit that reads one; ``Config`` sits
above them and registers the user's rules with the planner first):

- ``PolicyOptions``: which op lists and level (``ampconv.policy.load_policy``);
- ``PlanOptions``: what the planner reads (the LOW type, the user's overrides,
  the thresholds of the range and data guards); the planner sees nothing else;
- ``WriteOptions``: opset upgrade, writing, checks, annotation, progress;
- ``DataOptions``: calibration data, random-input shapes and ranges, ``tune``.

A check that fails names the parameter as data (``ampconv.errors.named``), so
the CLI says the same thing with its flag.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Tuple, Union

from ampconv.options.groups import (  # noqa: F401 - the groups and their words, re-exported: Config's parts
    DTYPES,
    FALLBACK_ALIASES,
    FALLBACK_DTYPES,
    KV_CACHE,
    LEVELS,
    SYNTHETIC_BUDGET_S,
    TARGETS,
    DataOptions,
    PlanOptions,
    PolicyOptions,
    WriteOptions,
)

# Other spellings of the dtype keys: the ONNX names of the types, any case.
DTYPE_ALIASES = {"fp16": "fp16", "bf16": "bf16", "float16": "fp16", "bfloat16": "bf16"}
_LEVEL_NAMES = {level.lower(): level for level in LEVELS}


# Config builds each group from its fields of the same names and keeps it as ``_<name>``.
_GROUPS = (("policy", PolicyOptions), ("plan", PlanOptions), ("write", WriteOptions), ("data", DataOptions))


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that decides a conversion.

    Attributes:
        level: O0 (no change), O1 (white list LOW), O2 (all LOW but black),
            O3 (all LOW), or ``auto`` (by ``target``).
        dtype: ``fp16`` or ``bf16``: the LOW type.
        target: ``cuda`` or ``cpu``; only ``auto`` reads it. None: from the
            installed onnxruntime.
        preset: name of the built-in op lists (``default`` or ``mindspore``).
        mixlists: policy files (Ascend ``modify_mixlist`` JSON), applied in order.
            A single path may be given as a string; so may one pattern for
            ``keep_fp32``/``keep_bf16``/``force_low`` and one name for ``keep_io_types``.
        op_info: an Ascend operator-info file (``aic-<soc>-ops-info.json``, str
            or PathLike) read as the base lists after the preset, before
            ``mixlists`` (docs/precision.md sec. 7). None: no such base.
        keep_io_types: True keeps every graph input/output float32, False
            converts them, a tuple names the ones to keep float32.
        rules: rules of your own (``ampconv.plan.rules.Rule`` with a ``decide``
            function), tried for every node after the hard facts, the user's
            float32 overrides and the range and data guards, before
            ``force_low`` and the level table (docs/precision.md, "Rules of
            your own"); each decision names its rule in the report.
        fallback_dtype: what a node runs in when a guard finds its values do
            not fit float16 (constants, calibration data, the synthetic run,
            the range analysis): ``float32`` (the default) or ``bf16``
            (bfloat16 where its schema at the model's opset admits it, else
            float32); everything else stays fp16 (docs/precision.md, "The
            fallback type"). ``bf16`` needs ``dtype="fp16"``.
        kv_cache: ``keep`` (the default) leaves a decoder's KV cache inputs and
            outputs to ``keep_io_types``; ``low`` puts every past/present pair
            found (``ampconv.plan.kvcache``) in the LOW type, so the cache is
            never cast through float32; ids, masks and positions are untouched.
        keep_fp32: node-name regexes forced HIGH.
        keep_bf16: node-name regexes put in the fallback type (bfloat16 where
            the schema admits it at the opset, else float32; rule
            ``user-keep-bf16``); needs ``fallback_dtype="bf16"``. Localization
            suggests it where bfloat16's range fixes an overflow.
        force_low: node-name regexes forced LOW (schema constraints still win).
        block_ops: op types forced HIGH (``OpType`` or ``domain::OpType``); an
            entry may be a comma list.
        clamp: clamp out-of-range constants instead of pinning their consumers HIGH:
            too large values to +-max_finite, too small ones per ``clamp_small``.
        max_finite: a constant with a finite |x| above this keeps its consumers
            float32 (or, with ``clamp``, is clamped to +-this). None: the LOW
            type's max (values that would round to inf). At most that max.
        min_positive: a constant with non-zero |x| below this (too many, or in
            a small constant) keeps its consumers float32. None: values that
            would round to 0; with ``clamp``, the LOW smallest subnormal.
            At least that subnormal, and below ``max_finite``.
        clamp_small: with ``clamp``, what too small values become: ``raise``
            (+-min_positive, the default; keeps an epsilon non-zero) or
            ``flush`` (+-0). None: ``raise``; set without ``clamp``: an error.
        check_runtime: load the result in onnxruntime (when installed) before writing.
        overwrite: allow replacing an existing output file (never the input).
        max_workers: threads used to convert/write external data.
        calibration_data: paths of calibration samples (``.npz`` files,
            folders of them, ONNX ``test_data_set_*`` folders), or
            ``("random",)`` for seeded random inputs. Empty: no data guards.
        calibration_samples, calibration_seed: how many random samples, and the seed.
        shapes: ``(name, dims)`` pairs fixing symbolic dimensions: of random
            calibration inputs, and of the report's GPU figures (cast traffic
            per inference; unbound dims count 1) (the forms of ``ValidateOptions.shapes``; a dict
            ``{"batch": 2}`` too).
        input_ranges: ``(name, (low, high))`` pairs or a dict ``{"audio":
            (-32768, 32767)}``: the value range of random calibration inputs
            (``ValidateOptions.input_ranges``) and of the synthetic run's; the
            nodes whose values the run extrapolates past the LOW range at the
            range's largest magnitude run in the fallback type (rule
            ``data-envelope``). Needs ``calibration_data=("random",)`` or the
            synthetic run (no ``calibration_data``).
        data_max: the data guard keeps a node float32 when a value exceeds
            this (None: half the LOW type's largest value).
        underflow_fraction: the share of non-zero values below the LOW normal
            range above which a tensor feeding an error amplifier stays float32
            (None: 0.5).
        synthetic_run: without ``calibration_data``, run the model once in
            float32 on one seeded random sample and keep float32 the nodes
            whose values overflow the LOW type there; the run also states how
            far each float input may grow (the report's ``envelope``)
            (``ampconv.calibration.synthetic``). None (the default): when its
            estimated cost fits ``synthetic_budget``, or a slice of it does
            (symbolic dimensions at 1); True: whenever its estimated peak
            memory fits the memory available; False: the magnitude analysis alone.
        synthetic_budget: CPU seconds the synthetic run may cost by its
            estimate (FLOPs, activation and weight bytes and nodes, at this
            machine's measured rates; ``ampconv.calibration.cost``). None (the
            default): 5 s, and a run estimated over half a second must spend
            at least as long computing as onnxruntime spends setting its
            nodes up; a number: that budget alone.
        tune: after the data guards, validate on the calibration samples and
            keep float32 the fewest nodes that make the check pass.
        rtol, atol: the strict elementwise tolerance for ``tune`` (None: the
            validator's default criteria for the LOW type).
        opset: upgrade the model to this default-domain opset with onnx's
            version converter before converting. None: the model is upgraded
            by default when its opset keeps heavy ops or Q/DQ nodes from the
            LOW type (bf16 Conv needs opset 22, a float16 Q/DQ scale opset 19),
            to the first opset that admits them; said in the report.
        keep_opset: never upgrade by default (with ``opset`` too: a usage
            error, the two contradict each other).
        annotate: stamp each node's precision and rule into its
            ``metadata_props`` (``ampconv.core.precision``, ``ampconv.rule``).
        progress: optional callback(bytes_done, bytes_total) while writing weights.
    """

    level: str = "O2"
    dtype: str = "fp16"
    target: Optional[str] = None
    preset: str = "default"
    mixlists: Tuple[str, ...] = ()
    op_info: Optional[str] = None
    keep_io_types: Union[bool, Tuple[str, ...]] = True
    kv_cache: str = "keep"
    rules: Tuple[object, ...] = ()
    fallback_dtype: str = "float32"
    keep_fp32: Tuple[str, ...] = ()
    keep_bf16: Tuple[str, ...] = ()
    force_low: Tuple[str, ...] = ()
    block_ops: Tuple[str, ...] = ()
    clamp: bool = False
    max_finite: Optional[float] = None
    min_positive: Optional[float] = None
    clamp_small: Optional[str] = None
    check_runtime: bool = True
    overwrite: bool = False
    max_workers: int = 2
    calibration_data: Tuple[str, ...] = ()
    calibration_samples: int = 8
    calibration_seed: int = 0
    shapes: Tuple[Tuple[str, Tuple[int, ...]], ...] = ()
    input_ranges: Tuple[Tuple[str, Tuple[float, float]], ...] = ()
    data_max: Optional[float] = None
    underflow_fraction: Optional[float] = None
    tune: bool = False
    rtol: Optional[float] = None
    atol: Optional[float] = None
    synthetic_run: Optional[bool] = None
    synthetic_budget: Optional[float] = None  # None: SYNTHETIC_BUDGET_S, with the set-up rule
    opset: Optional[int] = None
    keep_opset: bool = False
    annotate: bool = False
    progress: Optional[Callable[[int, int], None]] = dataclasses.field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        # Accept what people type: one string where a list goes, "o2", "float16".
        if self.rules and not isinstance(self.rules, (tuple, list)):
            object.__setattr__(self, "rules", (self.rules,))  # one rule where a list goes
        for name in ("mixlists", "keep_fp32", "keep_bf16", "force_low", "block_ops", "calibration_data"):
            value = getattr(self, name)
            if isinstance(value, (str, os.PathLike)):
                value = (value,)
            object.__setattr__(self, name, tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value))
        if isinstance(self.op_info, os.PathLike):
            object.__setattr__(self, "op_info", os.fspath(self.op_info))
        if isinstance(self.keep_io_types, str):
            object.__setattr__(self, "keep_io_types", (self.keep_io_types,))
        object.__setattr__(self, "level", _LEVEL_NAMES.get(str(self.level).lower(), self.level))
        object.__setattr__(self, "dtype", DTYPE_ALIASES.get(str(self.dtype).lower(), self.dtype))
        fallback = FALLBACK_ALIASES.get(str(self.fallback_dtype).lower(), self.fallback_dtype)
        object.__setattr__(self, "fallback_dtype", fallback)
        if self.rules:
            from ampconv.plan.rules import register  # the rule registry: only when the user brings rules

            object.__setattr__(self, "rules", tuple(register(rule) for rule in self.rules))
        # Each group checks its own fields as it is made; shapes and ranges come back normalized.
        for attribute, group in _GROUPS:
            made = group(**{f.name: getattr(self, f.name) for f in dataclasses.fields(group)})
            object.__setattr__(self, f"_{attribute}", made)
        object.__setattr__(self, "shapes", self._data.shapes)
        object.__setattr__(self, "input_ranges", self._data.input_ranges)

    @property
    def policy_options(self) -> PolicyOptions:
        """The options ``load_policy`` reads."""
        return self._policy

    @property
    def plan_options(self) -> PlanOptions:
        """The options the planner reads."""
        return self._plan

    @property
    def write_options(self) -> WriteOptions:
        """The options of writing and checking the converted model."""
        return self._write

    @property
    def data_options(self) -> DataOptions:
        """The options of calibration data and the accuracy search."""
        return self._data
