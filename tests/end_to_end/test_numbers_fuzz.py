"""The spelling generator (scripts/fuzz_spellings.py, issue 29) on a bounded sample: every spelling that
overflows float16 under emulation at O3 converts accurate by default; every one that does not stays LOW (but for
the statistics ``range-statistics`` keeps float32 by policy). ``make fuzz`` runs 300 cases."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "fuzz_spellings.py"
_spec = importlib.util.spec_from_file_location("fuzz_spellings", _SCRIPT)
spellings = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = spellings  # its dataclasses look their module up there
_spec.loader.exec_module(spellings)

SAMPLE, SEED = 16, 29


def test_cases_are_deterministic_and_vary():
    drawn = [spellings.draw(SEED, i) for i in range(40)]
    assert drawn == [spellings.draw(SEED, i) for i in range(40)]
    for field in ("mean", "square", "root", "kind", "width"):
        assert len({getattr(s, field) for s in drawn}) > 1, field
    assert {s.overflow_drawn for s in drawn} == {True, False}


def test_the_spelling_sample_holds():
    outcomes = [spellings.run_case(SEED, i) for i in range(SAMPLE)]
    text = spellings.summary(outcomes, SEED)
    assert {o.overflows for o in outcomes} == {True, False}, text  # the sample exercises both labels
    if not all(o.passed for o in outcomes):
        pytest.fail("\n" + text, pytrace=False)
