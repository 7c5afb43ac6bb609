"""The benchmark harness runs end to end on tiny sizes.

Timings are recorded but never asserted here (CI machines are noisy); the
non-timing properties are: WHITE ops LOW, weights <= 52%, Casts <= baseline.
"""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import run_all


def _is_timing(check_id: str) -> bool:
    return "_seconds" in check_id or check_id.startswith(("chain_time_ratio", "whole_process_", "startup_"))


def test_run_all_records_results_and_failures(tmp_path):
    good = tmp_path / "bench_good.py"
    good.write_text("def main(out_dir):\n    return {'checks': [{'id': 'x', 'description': 'x', 'value': 1,"
                    " 'target': '< 2', 'passed': True}], 'metrics': {'m': 1.5}, 'errors': []}\n")
    bad = tmp_path / "bench_bad.py"
    bad.write_text("def main(out_dir):\n    raise RuntimeError('boom')\n")
    out = tmp_path / "results"
    entries = {p.stem: run_all.run_bench(p, out, timeout_s=60) for p in (good, bad)}
    assert entries["bench_good"]["status"] == "ok"
    assert entries["bench_bad"]["status"] == "failed" and "boom" in entries["bench_bad"]["error"]
    summary = {"started": "now", "seconds": 1.0, "machine": {"cpu_count": 2}, "benches": entries}
    text = run_all.render_markdown(summary)
    assert "| bench_good | ok |" in text and "| bench_bad | failed |" in text and "boom" in text


def test_discover_finds_bench_convert():
    assert "bench_convert" in [p.stem for p in run_all.discover()]
    assert [p.stem for p in run_all.discover(["convert"])] == ["bench_convert"]


@pytest.fixture(scope="module")
def convert_result(tmp_path_factory):
    pytest.importorskip("ampconv.converter", reason="converter not written yet")
    pytest.importorskip("onnxconverter_common")
    pytest.importorskip("onnxruntime")
    from bench import bench_convert

    out = tmp_path_factory.mktemp("bench")
    result = bench_convert.main(out, chain_sizes=(200, 400), repeats=1, baseline_timeout_s=120)
    assert json.loads((out / "convert.json").read_text()) == result
    return result


def test_convert_bench_structure(convert_result):
    assert convert_result["errors"] == [], convert_result["errors"]
    ids = {c["id"] for c in convert_result["checks"]}
    assert {"chain_200_seconds", "chain_400_seconds", "chain_time_ratio",
            "chain_time_ratio_without_runtime_check"} <= ids
    for check in convert_result["checks"]:
        assert set(check) >= {"id", "description", "value", "target", "passed"}


# Check id -> reason, for findings reported to the lead and not fixed yet
# (xfail, non-strict so the fix does not break CI). Empty: all fixed.
KNOWN_FAILURES: dict[str, str] = {}


def _non_timing_ids():
    from bench import bench_convert

    ids = ["chain_200_white_low"]
    for name in bench_convert.WEIGHT_SAMPLES:
        ids += [f"{name}_O2_white_low", f"{name}_O2_weight_ratio", f"{name}_O2_loads"]
    for name in bench_convert.CAST_SAMPLES:
        for label in ("O3", "O3_clamp"):
            ids += [f"{name}_{label}_casts", f"{name}_{label}_loads"]
    return ids


@pytest.mark.parametrize("check_id", [
    pytest.param(i, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[i], strict=False))
    if i in KNOWN_FAILURES else i
    for i in _non_timing_ids()
])
def test_convert_bench_non_timing_check(convert_result, check_id):
    checks = {c["id"]: c for c in convert_result["checks"]}
    assert check_id in checks, sorted(checks)
    assert checks[check_id]["passed"], json.dumps(checks[check_id], indent=1)


def test_timing_checks_are_recorded(convert_result):
    """Timings are not asserted here (CI is noisy), but every one of them is measured and recorded."""
    recorded = {c["id"] for c in convert_result["checks"]}
    assert {"whole_process_chain_200", "whole_process_chain_400", "startup__version", "startup__help"} <= recorded
    for check in convert_result["checks"]:
        if check["id"].startswith("whole_process_"):
            assert check["value"] > 0 and "onnxconverter-common" in check["note"]


def test_every_non_timing_check_is_covered(convert_result):
    recorded = {c["id"] for c in convert_result["checks"] if not _is_timing(c["id"])}
    assert recorded == set(_non_timing_ids())
