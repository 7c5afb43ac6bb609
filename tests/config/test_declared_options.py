"""Issue 36: each option declared once; Config, the groups, ValidateOptions and the CLI are made from it."""

from __future__ import annotations

import dataclasses

import pytest

import ampconv
from ampconv.errors import UsageError
from ampconv.options.conversion import CONVERSION_OPTIONS, OPTIONS, PRESET_NAMES
from ampconv.options.declared import Flag, Option, option_record
from ampconv.options.groups import DataOptions, PlanOptions, PolicyOptions, WriteOptions
from ampconv.policy.lists import PRESETS
from ampconv.validation.options import VALIDATION_OPTIONS


def test_config_fields_are_the_declared_options_in_order():
    assert [f.name for f in dataclasses.fields(ampconv.Config)] == [o.name for o in CONVERSION_OPTIONS]
    for option in CONVERSION_OPTIONS:
        assert f"{option.name}:" in ampconv.Config.__doc__  # the Attributes entry comes from the declaration


def test_every_group_field_is_a_config_field_and_every_config_field_has_a_group():
    grouped = [f.name for group in (PolicyOptions, PlanOptions, WriteOptions, DataOptions)
               for f in dataclasses.fields(group)]
    assert sorted(grouped) == sorted(OPTIONS)
    assert len(grouped) == len(set(grouped))


def test_validate_options_share_the_conversion_declarations():
    shared = {o.name for o in VALIDATION_OPTIONS if o is OPTIONS.get(o.name)}
    # the random inputs' options, and how outputs are judged (tune judges as validate would)
    assert shared == {"rtol", "atol", "shapes", "input_ranges", "natures", "limits", "extra_criteria", "metric"}


def test_preset_names_are_the_policy_lists():
    assert set(PRESET_NAMES) == set(PRESETS)


def test_a_check_normalizes_and_refuses_in_every_record():
    assert ampconv.Config(level="o3", dtype="bfloat16", keep_fp32="^a$").plan_options.keep_fp32 == ("^a$",)
    assert PlanOptions(dtype="float16").dtype == "fp16"  # the group checks its own field the same way
    with pytest.raises(UsageError, match="unknown level 'O9'"):
        ampconv.Config(level="O9")
    with pytest.raises(UsageError, match="unknown level"):
        PolicyOptions(level="O9")


def test_a_record_of_new_options_is_one_declaration_each():
    """Adding an option is one ``Option``: the record gets its field, default, check and docs."""

    def positive(value):
        if value <= 0:
            raise UsageError("width must be > 0")
        return value

    width = Option("width", 4, "how wide.", "int", positive, Flag(("--width",), "How wide."))

    @option_record((width,))
    class Widths:
        """A record."""

    assert Widths().width == 4 and Widths(width=2).width == 2
    assert "width: how wide." in Widths.__doc__
    with pytest.raises(UsageError, match="width must be > 0"):
        Widths(width=0)


def test_the_cli_makes_each_flag_from_its_declaration(cli_runner):
    from ampconv_cli.main import cli

    help_text = cli_runner.invoke(cli, ["convert", "--help"], terminal_width=200).output
    for option in CONVERSION_OPTIONS:
        if option.flag is not None:
            for spelling in option.flag.decls[0].split("/"):
                assert spelling in help_text, spelling
