"""Config is split into the option groups each stage reads; each group checks its own fields once."""

from __future__ import annotations

import dataclasses

import pytest

import ampconv
from ampconv.config import Config, DataOptions, PlanOptions, PolicyOptions, WriteOptions
from ampconv.errors import Parameter, UsageError
from ampconv.plan.context import PlanContext

GROUPS = (PolicyOptions, PlanOptions, WriteOptions, DataOptions)


def _names(cls) -> set:
    return {field.name for field in dataclasses.fields(cls)}


def test_the_groups_partition_configs_fields():
    seen = [name for group in GROUPS for name in _names(group)]
    assert len(seen) == len(set(seen)), "a field in two groups"
    assert set(seen) == _names(Config)


def test_config_hands_each_group_its_normalized_fields():
    config = Config(level="o3", dtype="float16", keep_fp32="^a", calibration_data="random",
                    shapes={"batch": 2}, input_ranges={"x": (0, 1)}, overwrite=True)
    assert config.policy_options == PolicyOptions(level="O3")
    assert config.plan_options == PlanOptions(dtype="fp16", keep_fp32=("^a",))
    assert config.write_options.overwrite is True
    assert config.data_options.shapes == (("batch", (2,)),) == config.shapes
    # replace() builds the groups again.
    assert dataclasses.replace(config, dtype="bf16").plan_options.dtype == "bf16"


def test_the_planner_reads_only_its_own_options():
    assert "config" not in _names(PlanContext)
    assert {f.type for f in dataclasses.fields(PlanContext) if f.name == "options"} == {"PlanOptions"}
    # The write and data options are not the planner's to read.
    assert not _names(PlanOptions) & (_names(WriteOptions) | _names(DataOptions))


@pytest.mark.parametrize("group, fields, parameter", [
    (PolicyOptions, {"level": "O4"}, "level"),
    (PlanOptions, {"dtype": "fp8"}, "dtype"),
    (PlanOptions, {"clamp_small": "flush"}, "clamp_small"),
    (PlanOptions, {"data_max": 0.0}, "data_max"),
    (WriteOptions, {"opset": 0}, "opset"),
    (DataOptions, {"tune": True}, "tune"),
    (DataOptions, {"calibration_samples": 0, "calibration_data": ("random",)}, "calibration_samples"),
])
def test_each_group_refuses_its_bad_fields_naming_the_parameter(group, fields, parameter):
    with pytest.raises(UsageError) as caught:
        group(**fields)
    assert caught.value.parameters[0] == Parameter(parameter)
    # The same refusal through Config, the public value.
    with pytest.raises(UsageError) as again:
        ampconv.Config(**fields)
    assert str(again.value) == str(caught.value)


def test_good_fields_pass_every_group():
    for group in GROUPS:
        assert group() == group()  # the defaults are valid
    assert DataOptions(calibration_data=("random",), input_ranges={"x": (0, 1)}).input_ranges == (("x", (0.0, 1.0)),)
