"""The option groups each stage reads, split from ``Config`` (``ampconv.config``).

- ``PolicyOptions``: which op lists and level (``ampconv.policy.load_policy``);
- ``PlanOptions``: what the planner reads (the LOW type, the user's overrides,
  the thresholds of the range and data guards); the planner sees nothing else;
- ``WriteOptions``: opset upgrade, writing, checks, annotation, progress;
- ``DataOptions``: calibration data, random-input shapes and ranges, ``tune``.

Each group checks its own fields once when it is made. This module sits below
every unit that reads a group (the planner, calibration, the converter), so it
imports none of them; ``Config`` registers the user's rules (``ampconv.plan.rules``)
before it builds ``PlanOptions``. Light: ``import ampconv`` loads it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Tuple, Union

from ampconv.errors import UsageError, named
from ampconv.core.shapespec import range_pairs, shape_pairs

LEVELS = ("O0", "O1", "O2", "O3", "auto")
DTYPES = ("fp16", "bf16")
# What a node whose values do not fit the LOW type runs in (issue 32): float32 (the default), or bf16.
FALLBACK_DTYPES = ("float32", "bf16")
FALLBACK_ALIASES = {"float32": "float32", "fp32": "float32", "float": "float32", "bf16": "bf16", "bfloat16": "bf16"}
KV_CACHE = ("keep", "low")  # what kv_cache may say: leave the cache to keep_io_types, or make it LOW
TARGETS = ("cuda", "cpu")
# "A few seconds on the CPU": the default budget of the synthetic run's estimated cost (``calibration.cost``).
SYNTHETIC_BUDGET_S = 5.0


@dataclasses.dataclass(frozen=True)
class PolicyOptions:
    """Which op lists decide, at which level (``Config``'s fields of the same names)."""

    level: str = "O2"
    target: Optional[str] = None
    preset: str = "default"
    mixlists: Tuple[str, ...] = ()
    op_info: Optional[str] = None
    block_ops: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise UsageError(f"unknown {named('level')} {self.level!r}: choose one of {', '.join(LEVELS)}")
        if self.target is not None and self.target not in TARGETS:
            raise UsageError(f"unknown {named('target')} {self.target!r}: choose cuda or cpu")


@dataclasses.dataclass(frozen=True)
class PlanOptions:
    """What the planner reads besides the policy and the model (``Config``'s fields of the same names)."""

    dtype: str = "fp16"
    keep_io_types: Union[bool, Tuple[str, ...]] = True
    keep_fp32: Tuple[str, ...] = ()
    keep_bf16: Tuple[str, ...] = ()
    force_low: Tuple[str, ...] = ()
    clamp: bool = False
    max_finite: Optional[float] = None
    min_positive: Optional[float] = None
    clamp_small: Optional[str] = None
    data_max: Optional[float] = None
    underflow_fraction: Optional[float] = None
    kv_cache: str = "keep"
    rules: Tuple[object, ...] = ()
    fallback_dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise UsageError(f"unknown {named('dtype')} {self.dtype!r}: choose fp16 or bf16")
        _check_fallback(self.dtype, self.fallback_dtype)
        if self.keep_bf16 and self.fallback_dtype != "bf16":
            raise UsageError(f"{named('keep_bf16')} puts nodes in the fallback type; it needs "
                             f"{named('fallback_dtype', 'bf16')} (with {named('dtype', 'fp16')})")
        if self.kv_cache not in KV_CACHE:
            raise UsageError(f"unknown {named('kv_cache')} {self.kv_cache!r}: choose {' or '.join(KV_CACHE)}")
        for pattern in self.keep_fp32 + self.keep_bf16 + self.force_low:
            _check_regex(pattern)
        if self.clamp_small is not None and not self.clamp:
            raise UsageError(f"{named('clamp_small')} sets what {named('clamp')} does to tiny values; "
                             "without it it does nothing")
        if self.max_finite is not None or self.min_positive is not None or self.clamp_small is not None:
            from ampconv.core.lowtypes import check_limits  # numpy: only when limits are given

            check_limits(self.dtype, self.max_finite, self.min_positive, self.clamp_small)
        if self.data_max is not None and not self.data_max > 0:
            raise UsageError(f"{named('data_max')} must be a number > 0, got {self.data_max}")
        if self.underflow_fraction is not None and not 0 < self.underflow_fraction <= 1:
            raise UsageError(f"{named('underflow_fraction')} must be in (0, 1], got {self.underflow_fraction}")


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    """How the converted model is made and written (``Config``'s fields of the same names)."""

    check_runtime: bool = True
    overwrite: bool = False
    max_workers: int = 2
    opset: Optional[int] = None
    keep_opset: bool = False
    annotate: bool = False
    progress: Optional[Callable[[int, int], None]] = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.opset is not None and (isinstance(self.opset, bool) or not isinstance(self.opset, int)
                                       or self.opset < 1):
            raise UsageError(f"{named('opset')} must be a positive integer, got {self.opset!r}")
        if self.keep_opset and self.opset is not None:
            raise UsageError(f"{named('keep_opset')} and {named('opset', self.opset)} contradict each other: "
                             "the first keeps the model's opset, the second upgrades it; pass one")


@dataclasses.dataclass(frozen=True)
class DataOptions:
    """Calibration data, the random inputs' shapes and ranges, and the accuracy search (``Config``'s fields)."""

    calibration_data: Tuple[str, ...] = ()
    calibration_samples: int = 8
    calibration_seed: int = 0
    shapes: Tuple[Tuple[str, Tuple[int, ...]], ...] = ()
    input_ranges: Tuple[Tuple[str, Tuple[float, float]], ...] = ()
    tune: bool = False
    rtol: Optional[float] = None
    atol: Optional[float] = None
    synthetic_run: Optional[bool] = None  # None: within ``synthetic_budget``; True: whenever memory allows
    synthetic_budget: Optional[float] = None  # None: SYNTHETIC_BUDGET_S, with the set-up rule

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", shape_pairs(self.shapes))
        object.__setattr__(self, "input_ranges", range_pairs(self.input_ranges))
        if self.input_ranges and self.calibration_data and tuple(self.calibration_data) != ("random",):
            raise UsageError(f"{named('input_ranges')} sets the range of random inputs ({named('calibration_data', 'random')} "
                             "or the synthetic run); with sample files it does nothing")
        if self.input_ranges and not self.calibration_data and self.synthetic_run is False:
            raise UsageError(f"{named('input_ranges')} sets the range of the synthetic run's inputs, which "
                             f"{named('synthetic_run', False)} turns off; drop one, or give "
                             f"{named('calibration_data', 'random')}")
        if self.synthetic_run not in (None, True, False):
            raise UsageError(f"{named('synthetic_run')} must be None (within the budget), True or False, "
                             f"got {self.synthetic_run!r}")
        if self.synthetic_budget is not None and (
                isinstance(self.synthetic_budget, bool) or not isinstance(self.synthetic_budget, (int, float))
                or not self.synthetic_budget > 0):
            raise UsageError(f"{named('synthetic_budget')} must be a number of seconds > 0, got {self.synthetic_budget!r}")
        if self.tune and not self.calibration_data:
            raise UsageError(f"{named('tune')} needs {named('calibration_data')}")
        if not self.tune and (self.rtol is not None or self.atol is not None):
            raise UsageError(f"{named('rtol')}/{named('atol')} set the tolerance of {named('tune')}; "
                             "without it they do nothing")
        if "random" in self.calibration_data and len(self.calibration_data) > 1:
            raise UsageError(f"{named('calibration_data')} 'random' cannot be mixed with sample paths")
        if self.calibration_samples < 1:
            raise UsageError(f"{named('calibration_samples')} must be at least 1, got {self.calibration_samples}")
        check_tolerances(self.rtol, self.atol)


def check_tolerances(rtol: float | None, atol: float | None) -> None:
    """``UsageError`` naming the parameter unless each given tolerance is a number >= 0 (validation and --tune)."""
    for label, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not value >= 0:
            raise UsageError(f"{named(label)} must be a number >= 0, got {value}")


def _check_fallback(dtype: str, fallback_dtype: str) -> None:
    """Refuse a fallback type that is unknown, or that cannot change anything under ``dtype``."""
    if fallback_dtype not in FALLBACK_DTYPES:
        raise UsageError(f"unknown {named('fallback_dtype')} {fallback_dtype!r}: choose float32 or bf16")
    if fallback_dtype == "bf16" and dtype == "bf16":
        raise UsageError(f"{named('fallback_dtype', 'bf16')} with {named('dtype', 'bf16')} does nothing: bf16 "
                         f"already has float32's range; use it with {named('dtype', 'fp16')}")


def _check_regex(pattern: str) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"bad node-name regex {pattern!r}: {exc}") from None
