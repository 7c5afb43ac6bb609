"""The release step's price and gain (issue 37): seconds and float32 nodes with the release on against off.

``python bench/bench_release.py --out DIR`` (``run_all.py --only release`` calls ``main``).

Each model is converted twice in this process, ``Config(release=True)`` (the
default) and ``release=False``, best of ``REPEATS`` wall seconds each, and
the report read: float32 nodes, the release section's evaluations and seconds.

- the sample models (``sample_models/build.py``) with defaults: their evidence
  is the synthetic run where it runs;
- the data models (``tests/data_models.py``) with 8 of their calibration
  samples;
- the blind spellings (``tests/blind``) with their own samples;
- the chain of ``bench/bench_convert.py`` (4,000 nodes): no evidence-driven
  float32, so nothing may run: no release section, and the added seconds
  within noise.

Checks: the chain runs no release (section None); every release stays within
its time budget (``release.SECONDS`` plus one evaluation) and its evaluation
budget. The whole-process ratio against onnxconverter-common is
``bench_convert.py``'s (section 4).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
for extra in (ROOT, ROOT / "tests", ROOT / "tests" / "blind"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

REPEATS = 3
CHAIN_NODES = 4000
DATA_SAMPLES = 8


def _convert(src, calibration, release: bool):
    """(best wall seconds of ``REPEATS``, the last report) of converting ``src`` with the release on or off."""
    import ampconv

    best, report = float("inf"), None
    for _ in range(REPEATS):
        start = time.perf_counter()
        report = ampconv.convert(src, pathlib.Path(src).with_suffix(".out.onnx"), ampconv.Config(
            overwrite=True, release=release, calibration_data=(str(calibration),) if calibration else ()))
        best = min(best, time.perf_counter() - start)
    return best, report


def measure(name: str, src, calibration=None) -> dict:
    """One model's figures, release on against off."""
    on, with_release = _convert(src, calibration, True)
    off, without = _convert(src, calibration, False)
    section = with_release.release or {}
    return {
        "model": name, "evidence": "calibration data" if calibration else
        ("synthetic run" if (with_release.calibration or {}).get("synthetic") else "none"),
        "seconds_on": round(on, 3), "seconds_off": round(off, 3), "added_s": round(on - off, 3),
        "float32_on": with_release.count("HIGH"), "float32_off": without.count("HIGH"),
        "nodes": len(with_release.nodes), "islands": section.get("islands", 0), "lowered": section.get("lowered", 0),
        "evaluations": section.get("evaluations", 0), "budget": section.get("budget", 0),
        "release_s": section.get("seconds", 0.0), "ran": bool(section),
    }


def models(work: pathlib.Path):
    """(name, source, calibration folder or None) of every model measured, built into ``work``."""
    from bench.models import build_chain, build_samples
    import data_models as dm
    import spellings

    found = []
    chain = work / f"chain_{CHAIN_NODES}.onnx"
    onnx.save(build_chain(CHAIN_NODES), str(chain))
    found.append((f"chain_{CHAIN_NODES}", chain, None))
    for name, path in sorted(build_samples(work / "samples").items()):
        found.append((f"sample:{name}", path, None))
    for name in dm.MODELS:
        src = work / f"{name}.onnx"
        onnx.save(dm.MODELS[name].build(), str(src))
        folder = work / f"{name}_calib"
        dm.write_calibration(name, folder, DATA_SAMPLES)
        found.append((f"data:{name}", src, folder))
    for case in spellings.CASES:
        src = work / f"blind_{case.name}.onnx"
        onnx.save(case.build(), str(src))
        folder = work / f"blind_{case.name}_calib"
        folder.mkdir(exist_ok=True)
        for index, sample in enumerate(case.samples(0)):
            np.savez(folder / f"sample_{index:02d}.npz", **sample)
        found.append((f"blind:{case.name}", src, folder))
    return found


def checks(rows) -> list:
    """The chain runs nothing; every release stays within its budgets."""
    from ampconv.calibration.release import SECONDS

    found = []
    chain = next(row for row in rows if row["model"].startswith("chain_"))
    found.append({"id": "chain_runs_no_release", "value": chain["ran"], "target": "False",
                  "passed": not chain["ran"], "note": f"added {chain['added_s']} s"})
    for row in rows:
        if not row["ran"]:
            continue
        slowest = row["release_s"] / max(row["evaluations"], 1)
        within = row["evaluations"] <= row["budget"] and row["release_s"] <= SECONDS + slowest + 1.0
        found.append({"id": f"budget_{row['model']}", "value": f"{row['evaluations']}/{row['budget']} evaluations, "
                      f"{row['release_s']} s", "target": f"<= budget, <= {SECONDS:g} s + one evaluation",
                      "passed": within, "note": ""})
    return found


def render_markdown(result: dict) -> str:
    """The table and the checks as markdown."""
    rows = result["metrics"]["models"]
    lines = ["# The release step: release on against off (best of %d)" % REPEATS, "",
             "| model | evidence | nodes | float32 off -> on | islands | lowered | evaluations (budget) | "
             "release s | convert s off -> on | added s |", "|---|---|---:|---|---:|---:|---|---:|---|---:|"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['evidence']} | {r['nodes']} | {r['float32_off']} -> {r['float32_on']} | "
                     f"{r['islands']} | {r['lowered']} | {r['evaluations']} ({r['budget']}) | {r['release_s']} | "
                     f"{r['seconds_off']} -> {r['seconds_on']} | {r['added_s']} |")
    added = [r["added_s"] for r in rows if r["ran"]]
    lines += ["", f"Models where the release ran: {len(added)} of {len(rows)}; added seconds: median "
              f"{sorted(added)[len(added) // 2] if added else 0}, max {max(added) if added else 0}.", "",
              "| check | value | target | passed |", "|---|---|---|---|"]
    lines += [f"| {c['id']} | {c['value']} | {c['target']} | {'yes' if c['passed'] else 'NO'} |"
              for c in result["checks"]]
    return "\n".join(lines) + "\n"


def main(out_dir) -> dict:
    """Measure every model; write ``release.json`` and ``release.md`` into ``out_dir``."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="ampconv-bench-release-"))
    result: dict = {"name": "release", "checks": [], "errors": [], "metrics": {"models": []}}
    for name, src, calibration in models(work):
        print(f"[release] {name} ...", flush=True)
        try:
            result["metrics"]["models"].append(measure(name, src, calibration))
        except Exception as exc:  # noqa: BLE001 -- record, do not hide, a crash
            result["errors"].append({"section": name, "error": f"{type(exc).__name__}: {exc}"})
    result["checks"] = checks(result["metrics"]["models"])
    (out / "release.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "release.md").write_text(render_markdown(result))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    print(render_markdown(main(parser.parse_args().out)))
