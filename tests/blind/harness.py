"""Run one blind case through ampconv both ways and judge the results with ``judge.py``.

(a) with data: the case's samples written as ``.npz`` files (one per sample, keys = input
    names) and given as ``Config(calibration_data=(folder,))``; held when the converted
    model is accurate in true fp16 and ``excess = |float32 nodes - |needed|| <= max(2, 10% of
    the model's nodes)``.
(b) defaults: ``ampconv convert SRC -o DST --report r.json`` (the CLI, in a child process);
    held when the converted model is accurate on the samples, or when the report told the
    user: a ``warnings`` entry, or an ``envelope`` entry ``{"input", "holds_to", "limited_by"}``
    whose ``holds_to`` is below the samples' ``max_abs_input`` for that input.

ampconv is used only through its public entry points (``ampconv.convert``, the CLI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

import judge

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def excess_limit(nodes: int) -> float:
    return max(2.0, 0.1 * nodes)


def write_samples(samples: list, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i, sample in enumerate(samples):
        np.savez(folder / f"sample_{i:02d}.npz", **sample)
    return folder


def convert_with_data(src: Path, dst: Path, calib: Path) -> None:
    import ampconv

    ampconv.convert(str(src), str(dst), ampconv.Config(calibration_data=(str(calib),), overwrite=True))


def convert_default_cli(src: Path, dst: Path, report: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    done = subprocess.run(
        [sys.executable, "-m", "ampconv", "convert", str(src), "-o", str(dst), "--report", str(report), "--overwrite", "-q"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ampconv convert exited {done.returncode}: {(done.stderr or done.stdout).strip()[-500:]}")


def _judge_converted(path: Path, samples: list, reference: list, tolerance: judge.Tolerance, needed) -> dict:
    converted = onnx.load(str(path))
    fp32 = judge.float32_nodes(converted)
    accuracy = judge.check_accuracy(reference, judge.run(judge.emulate_converted(converted), samples), tolerance)
    return {
        "fp32_nodes": fp32, "fp32_count": len(fp32), "excess": abs(len(fp32) - len(needed)),
        "extra": sorted(set(fp32) - set(needed)), "missing": sorted(set(needed) - set(fp32)),
        "accurate": accuracy.ok, "accuracy": str(accuracy),
    }


def with_data(case, model: onnx.ModelProto, samples: list, reference: list, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    src, dst = work / "model.onnx", work / "with_data.onnx"
    onnx.save(model, str(src))
    calib = write_samples(samples, work / "calibration")
    try:
        convert_with_data(src, dst, calib)
    except Exception as error:  # noqa: BLE001 - a failed conversion is a result, not a crash of the harness
        return {"error": f"{type(error).__name__}: {error}", "accurate": False, "excess_ok": False, "held": False}
    result = _judge_converted(dst, samples, reference, case.tolerance, case.needed)
    result["excess_limit"] = excess_limit(len(model.graph.node))
    result["excess_ok"] = result["excess"] <= result["excess_limit"]
    result["held"] = result["accurate"] and result["excess_ok"]
    return result


def without_data(case, model: onnx.ModelProto, samples: list, reference: list, work: Path) -> dict:
    work.mkdir(parents=True, exist_ok=True)
    src, dst, report_path = work / "model.onnx", work / "default.onnx", work / "r.json"
    onnx.save(model, str(src))
    try:
        convert_default_cli(src, dst, report_path)
    except Exception as error:  # noqa: BLE001
        return {"error": f"{type(error).__name__}: {error}", "accurate": False, "told": False, "held": False}
    report = json.loads(report_path.read_text())
    result = _judge_converted(dst, samples, reference, case.tolerance, case.needed)
    told, how = judge.told_user(report, case.max_abs_input())
    result.update({
        "told": told, "told_how": how, "warnings": list(report.get("warnings") or []),
        "envelope": report.get("envelope"), "report_keys": sorted(report),
        "held": result["accurate"] or told,
    })
    return result


def evaluate(case, work: Path, soundness: bool = True, ways=("with_data", "without_data")) -> dict:
    """Everything the table shows for one case; ``work`` is a fresh folder for its files."""
    work.mkdir(parents=True, exist_ok=True)
    model, samples = case.build(), case.samples(0)
    reference = judge.run(model, samples)
    row = {
        "case": case.name, "class": case.klass, "nodes": len(model.graph.node), "needed": sorted(case.needed),
        "hazard": case.hazard, "why": case.why, "tolerance": case.tolerance.describe(),
        "max_abs_input": case.max_abs_input(),
    }
    if soundness:
        row["soundness"] = judge.soundness(model, samples, case.needed, case.tolerance)
    if "with_data" in ways:
        row["with_data"] = with_data(case, model, samples, reference, work / "a")
    if "without_data" in ways:
        row["without_data"] = without_data(case, model, samples, reference, work / "b")
    return row
