"""Seeded fuzzing of the CLI with malformed models, policy files and --inputs (scripts/fuzz.py).

CI runs a bounded sample (150 cases of one seed, a few seconds on 2 cores);
``python scripts/fuzz.py --cases 1000 --seed S`` runs more. Every case must
end in exit 0 with a model that passes onnx.checker, or in exit 1/2 (3 for
validate over tolerance) with exactly one ``ampconv: error:`` line on stderr:
never a traceback, never a file left behind on error, never a changed input.
A failure prints the summary with a one-line repro per case; replay one with
``python scripts/fuzz.py --seed S --case N -v --keep /tmp/caseN``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.fuzz

_SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "fuzz.py"
_spec = importlib.util.spec_from_file_location("ampconv_fuzz", _SCRIPT)
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["ampconv_fuzz"] = fuzz
_spec.loader.exec_module(fuzz)

SAMPLE, SEED = 150, 2024


def test_cases_are_deterministic():
    for index in (0, 7, 42):
        a, b = fuzz.make_case(SEED, index), fuzz.make_case(SEED, index)
        assert (a.command, a.description, a.args, a.files) == (b.command, b.description, b.args, b.files)


@pytest.mark.parametrize("base", sorted(fuzz.BASES))
def test_unmutated_bases_convert(base):
    """The harness is not vacuous: every base model converts and the judge calls it ok."""
    data, side = fuzz.base_files(base)
    case = fuzz.Case(SEED, -1, "convert", base, "unmutated", {fuzz.MODEL: data, **dict(side)},
                     ["convert", "{dir}/" + fuzz.MODEL, "-o", "{dir}/" + fuzz.OUTPUT, "--report", "{dir}/" + fuzz.REPORT],
                     (fuzz.OUTPUT, fuzz.OUTPUT + ".data", fuzz.REPORT))
    outcome = fuzz.run_case(case)
    assert outcome.status == "ok", (outcome.status, outcome.exit_code, outcome.detail)


def test_a_clean_error_is_judged_clean():
    case = fuzz.Case(SEED, -1, "convert", "-", "not a model", {fuzz.MODEL: b"not a model at all"},
                     ["convert", "{dir}/" + fuzz.MODEL, "-o", "{dir}/" + fuzz.OUTPUT], (fuzz.OUTPUT,))
    outcome = fuzz.run_case(case)
    assert outcome.status == "error" and outcome.exit_code == 1, (outcome.status, outcome.detail)


def test_fuzz_sample_has_no_failures():
    outcomes = fuzz.run_fuzz(SAMPLE, SEED)
    summary = fuzz.render_summary(outcomes)
    statuses = {o.status for o in outcomes}
    assert {"ok", "error"} <= statuses, summary  # the sample exercises both ends
    if any(o.failed for o in outcomes):
        pytest.fail("\n" + summary, pytrace=False)


# Cases that once ended in a traceback (seed, case), each a distinct cause: a policy
# JSON nested too deeply, a lone surrogate op name, a non-UTF-8 op type, graph name
# and external-data location, a truncated weight and a dim of 2**40 in a converted
# model given to validate, nodes out of order and a sparse initializer under
# validate, a negative dimension of an external tensor.
REGRESSIONS = [(0, 14), (0, 248), (0, 262), (0, 771), (1, 226), (1, 251), (1, 280), (1, 2512), (2, 0)]


@pytest.mark.parametrize("seed,index", REGRESSIONS)
def test_former_tracebacks_stay_clean(seed, index):
    outcome = fuzz.run_case(fuzz.make_case(seed, index))
    assert not outcome.failed, (outcome.status, outcome.exit_code, outcome.detail)
