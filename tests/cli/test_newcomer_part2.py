"""Issue 40, "a newcomer's first hour, part 2": each item as a test that failed before the fix.

1. the FAIL page's advice is one fix, checked on what the verdict was judged on, copied whole;
2. a typo in a policy file's op name is an error with "did you mean", nothing written;
3. every unset dimension in one message, with the relations the graph gives;
5. the library's words (protos accepted, no CLI flags in ``print(result)``);
6. small words; 9. no overflow warning from a double constant's range scan.
(Item 4, the README walk-through twice: ``test_newcomer_readme.py``; items 7 and 8, the option table and
the page in a browser: ``test_newcomer_help.py`` and ``tests/report/test_html_report.py``.)
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import ampconv
from ampconv.policy import load_policy
from ampconv.tensors.low_range import range_stats
from ampconv_cli.main import cli


# --- item 9: no "overflow encountered in cast" from a double constant's range scan ----------------------------


def test_a_double_constant_beyond_float32_is_scanned_without_a_warning_and_counted():
    array = np.array([1e-300, 3.0, 1e300, -1e300, 0.1, -0.0, 7e4, 1e-9, 65504.0, np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = range_stats(array, "fp16")
    # 1e300, -1e300 and 7e4 overflow float16 (the infinity was one already); 1e-300 and 1e-9 round to 0.
    assert stats.overflow == 3 and stats.underflow == 2
    assert stats.example_overflow == pytest.approx(float(np.finfo(np.float32).max))
    assert stats.max_abs == pytest.approx(float(np.finfo(np.float32).max))


# --- item 2: a typo in a policy file's op name is refused, with "did you mean", and nothing is written --------


def _run(runner, *args):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _one_line_error(result, code, *fragments):
    assert result.exit_code == code, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ampconv: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_a_misspelt_op_in_a_mixlist_is_a_one_line_error_and_nothing_is_written(cli_runner, tmp_path, mlp_path):
    policy = tmp_path / "mix.json"
    policy.write_text(json.dumps({"black-list": {"to-add": ["Erff"]}}))
    before = sorted(p.name for p in tmp_path.iterdir())
    result = _run(cli_runner, "convert", mlp_path, "--mixlist", policy, "-o", tmp_path / "o.onnx",
                  "--report", tmp_path / "r.json")
    _one_line_error(result, 2, f"{policy}: black-list.to-add: op 'Erff' is unknown to onnx.defs",
                    "did you mean 'Erf'?")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # The library raises the same, before any work.
    with pytest.raises(ampconv.PolicyError, match="did you mean 'Erf'"):
        load_policy(mixlists=[policy])


def test_a_known_framework_name_in_a_mixlist_is_no_typo(tmp_path):
    policy = tmp_path / "mix.json"
    policy.write_text(json.dumps({"white-list": {"to-add": ["MatMulV2"]}, "black-list": {"to-add": ["TransData"]}}))
    read = load_policy(mixlists=[policy])
    assert read.classes["MatMul"] == "WHITE" and read.warnings == ()


def test_an_other_domain_op_in_a_mixlist_is_taken_as_written(tmp_path):
    policy = tmp_path / "mix.json"
    policy.write_text(json.dumps({"black-list": {"to-add": ["com.example::MyOp", "com.microsoft::FusedMatMul"]}}))
    assert load_policy(mixlists=[policy]).warnings == ()


def test_an_op_info_file_keeps_its_many_names_without_an_onnx_op(tmp_path):
    """Operator-info files are written by Ascend's toolkit and list hundreds of Ascend-only ops: no typo there."""
    info = tmp_path / "aic-ops-info.json"
    info.write_text(json.dumps({"Erff": {"precision_reduce": {"flag": "false"}},
                                "MatMulV2": {"precision_reduce": {"flag": "true"}}}))
    read = load_policy(op_info=info)
    assert read.classes["MatMul"] == "WHITE" and any("name no ONNX op" in note for note in read.notes)
