"""The option groups each stage reads, split from ``Config`` (``ampconv.config``).

- ``PolicyOptions``: which op lists and level (``ampconv.policy.load_policy``);
- ``PlanOptions``: what the planner reads (the LOW type, the user's overrides,
  the thresholds of the range and data guards); the planner sees nothing else;
- ``WriteOptions``: opset upgrade, writing, checks, annotation, progress;
- ``DataOptions``: calibration data, random-input shapes and ranges, ``tune``.

Each group is an ``option_record`` of the options it carries (declared once,
in ``ampconv.options.conversion``): every field is checked by its option when
the group is made, and the group's own ``__post_init__`` holds the checks that
read several fields. This module sits below every unit that reads a group (the
planner, calibration, the converter), so it imports none of them; ``Config``
registers the user's rules (``ampconv.plan.rules``) before it builds
``PlanOptions``. Light: ``import ampconv`` loads it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Union  # noqa: F401 - the records' field annotations

from ampconv.errors import UsageError, named
from ampconv.options.conversion import (  # noqa: F401 - the words of the options, re-exported
    DTYPES,
    FALLBACK_ALIASES,
    FALLBACK_DTYPES,
    KV_CACHE,
    LEVELS,
    OPTIONS,
    SYNTHETIC_BUDGET_S,
    TARGETS,
    check_tolerances,
)
from ampconv.options.declared import option_record, pick

POLICY_FIELDS = ("level", "target", "preset", "mixlists", "op_info", "block_ops")
PLAN_FIELDS = ("dtype", "keep_io_types", "keep_fp32", "keep_bf16", "force_low", "clamp", "max_finite", "min_positive",
               "clamp_small", "data_max", "underflow_fraction", "kv_cache", "rules", "fallback_dtype", "runtime")
WRITE_FIELDS = ("check_runtime", "overwrite", "max_workers", "opset", "keep_opset", "annotate", "progress")
DATA_FIELDS = ("calibration_data", "calibration_samples", "calibration_seed", "shapes", "input_ranges", "tune", "rtol",
               "atol", "synthetic_run", "synthetic_budget", "release", "metric", "limits", "extra_criteria", "natures")


@option_record(pick(OPTIONS, *POLICY_FIELDS))
class PolicyOptions:
    """Which op lists decide, at which level (``Config``'s fields of the same names)."""


@option_record(pick(OPTIONS, *PLAN_FIELDS))
class PlanOptions:
    """What the planner reads besides the policy and the model (``Config``'s fields of the same names)."""

    def __post_init__(self) -> None:
        if self.fallback_dtype == "bf16" and self.dtype == "bf16":
            raise UsageError(f"{named('fallback_dtype', 'bf16')} with {named('dtype', 'bf16')} does nothing: bf16 "
                             f"already has float32's range; use it with {named('dtype', 'fp16')}")
        if self.keep_bf16 and self.fallback_dtype != "bf16":
            raise UsageError(f"{named('keep_bf16')} puts nodes in the fallback type; it needs "
                             f"{named('fallback_dtype', 'bf16')} (with {named('dtype', 'fp16')})")
        if self.clamp_small is not None and not self.clamp:
            raise UsageError(f"{named('clamp_small')} sets what {named('clamp')} does to tiny values; "
                             "without it it does nothing")
        if self.max_finite is not None or self.min_positive is not None or self.clamp_small is not None:
            from ampconv.core.lowtypes import check_limits  # numpy: only when limits are given

            check_limits(self.dtype, self.max_finite, self.min_positive, self.clamp_small)

    @property
    def fallback(self):
        """The fallback type's record (``ampconv.core.lowtypes.LowType``), or None: float32 is the fallback."""
        if self.fallback_dtype == "float32":
            return None
        from ampconv.core.lowtypes import low_type  # numpy: only when a fallback type is asked for

        return low_type(self.fallback_dtype)


@option_record(pick(OPTIONS, *WRITE_FIELDS))
class WriteOptions:
    """How the converted model is made and written (``Config``'s fields of the same names)."""

    def __post_init__(self) -> None:
        if self.keep_opset and self.opset is not None:
            raise UsageError(f"{named('keep_opset')} and {named('opset', self.opset)} contradict each other: "
                             "the first keeps the model's opset, the second upgrades it; pass one")


@option_record(pick(OPTIONS, *DATA_FIELDS))
class DataOptions:
    """Calibration data, the random inputs' shapes and ranges, the accuracy search and the release step
    (``Config``'s fields)."""

    def __post_init__(self) -> None:
        if self.input_ranges and self.calibration_data and tuple(self.calibration_data) != ("random",):
            raise UsageError(f"{named('input_ranges')} sets the range of random inputs ({named('calibration_data', 'random')} "
                             "or the synthetic run); with sample files it does nothing")
        if self.input_ranges and not self.calibration_data and self.synthetic_run is False:
            raise UsageError(f"{named('input_ranges')} sets the range of the synthetic run's inputs, which "
                             f"{named('synthetic_run', False)} turns off; drop one, or give "
                             f"{named('calibration_data', 'random')}")
        if self.tune and not self.calibration_data:
            raise UsageError(f"{named('tune')} needs {named('calibration_data')}")
        if not self.tune and (self.rtol is not None or self.atol is not None):
            raise UsageError(f"{named('rtol')}/{named('atol')} set the tolerance of {named('tune')}; "
                             "without it they do nothing")
        for name in ("metric", "limits", "extra_criteria", "natures"):  # how tune judges, as validate would
            if not self.tune and getattr(self, name):
                raise UsageError(f"{named(name)} sets how {named('tune')} judges its candidates; "
                                 "without it it does nothing")
        if "random" in self.calibration_data and len(self.calibration_data) > 1:
            raise UsageError(f"{named('calibration_data')} 'random' cannot be mixed with sample paths")
