"""Conversion options: one immutable ``Config`` for callers, split into the groups each stage reads.

``Config`` is the public, flat value (``ampconv.Config(level="O3")``). Its
fields are the options declared once in ``ampconv.options.conversion``: each
is normalized and checked by its option, then ``Config`` builds its four
option groups, each of which checks the fields that go together (the groups
live in ``ampconv.options.groups``, below every unit that reads one;
``Config`` sits above them and registers the user's rules with the planner
first):

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
from typing import Any, Callable, Optional, Tuple, Union  # noqa: F401 - the fields' annotations

from ampconv.options.conversion import CONVERSION_OPTIONS, DTYPE_ALIASES  # noqa: F401 - DTYPE_ALIASES re-exported
from ampconv.options.declared import option_record
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

# Config builds each group from its fields of the same names and keeps it as ``_<name>``.
_GROUPS = (("policy", PolicyOptions), ("plan", PlanOptions), ("write", WriteOptions), ("data", DataOptions))


@option_record(CONVERSION_OPTIONS)
class Config:
    """Everything that decides a conversion.

    Each field is an option declared once (``ampconv.options.conversion``),
    normalized and checked when the ``Config`` is made: what people type is
    accepted (one string where a list goes, ``"o2"``, ``"float16"``).
    """

    def __post_init__(self) -> None:
        if self.rules:
            from ampconv.plan.rules import register  # the rule registry: only when the user brings rules

            object.__setattr__(self, "rules", tuple(register(rule) for rule in self.rules))
        # Each group checks the fields that go together as it is made.
        for attribute, group in _GROUPS:
            made = group(**{f.name: getattr(self, f.name) for f in dataclasses.fields(group)})
            object.__setattr__(self, f"_{attribute}", made)

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

