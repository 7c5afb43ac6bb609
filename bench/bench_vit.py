"""A ViT-S-class model with decomposed LayerNorms (issue 37): ampconv's casts against onnxruntime's float16 tool's.

``python bench/bench_vit.py --out DIR`` (or through ``bench/run_all.py``)
builds the ViT-S/16 of ``bench/vit_model.py`` (224x224, 22M parameters, 84 MiB
of float32 weights, every LayerNorm written as the legacy torch exporter
writes it, GELU through Erf, attention by MatMul/Softmax; seeded random
weights with a trained model's scales) and converts it:

- ``ampconv``: ``ampconv.convert`` with the defaults (the synthetic float32
  run is budgeted by its estimated cost: it fits), timed end to end;
- ``ampconv, no run``: ``synthetic_run=False``, what the run is measured against;
- ``ORT tool``: ``onnxruntime.transformers.float16.convert_float_to_float16(
  model, keep_io_types=True)`` in a child process.

Checks: the synthetic run is made; ampconv's Casts are at most
``max(1.25x, +2)`` of the ORT tool's (issue 37's target, ``bench.figures``
counts them, and the bytes they move); the converted model passes emulated
fp16 validation on a seeded ImageNet-normalized image. Metrics: the run's
seconds (its own, the estimate, and what it adds to the conversion), the
envelope the run gives, cast traffic. Results: ``bench_vit.json`` and
``bench_vit.md`` in the output folder.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np
import onnx

from bench import figures
from bench.bench_deploy import run_tool_child
from bench.vit_model import INPUT, VitSpec, build_vit, pixel_sample

CASTS_FACTOR, CASTS_SLACK = 1.25, 2
TOOL_TIMEOUT_S = 600.0


def _check(checks: list, check_id: str, description: str, value, target: str, passed: bool, unit: str = "",
           note: str = "") -> None:
    checks.append({"id": check_id, "description": description, "value": value, "unit": unit, "target": target,
                   "passed": bool(passed), "note": note})


def _convert(src: pathlib.Path, dst: pathlib.Path, **config):
    import ampconv

    start = time.perf_counter()
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True, **config))
    return report, round(time.perf_counter() - start, 2)


def main(out_dir, depth: int = 12) -> dict:
    """Build, convert, count and validate; write bench_vit.json and bench_vit.md into ``out_dir``."""
    import ampconv
    from ampconv.validation.options import ValidateOptions

    out = pathlib.Path(out_dir)
    work = out / "tmp"
    work.mkdir(parents=True, exist_ok=True)
    checks, errors, metrics = [], [], {}
    spec = VitSpec(depth=depth)
    src = work / "vit_s16.onnx"
    onnx.save(build_vit(spec), src)
    metrics["model"] = {"depth": depth, "nodes": len(onnx.load(src, load_external_data=False).graph.node),
                        "file_mib": round(src.stat().st_size / 2**20, 1)}
    ours, theirs = work / "vit_s16.ampconv.onnx", work / "vit_s16.ort.onnx"
    _convert(src, work / "vit_s16.warm.onnx", synthetic_run=False)  # imports and page cache: not the run's
    _plain, plain_seconds = _convert(src, work / "vit_s16.norun.onnx", synthetic_run=False)
    report, seconds = _convert(src, ours)
    calibration = report.calibration or {}
    made = bool(calibration.get("synthetic"))
    _check(checks, "vit_synthetic_run_made", "the synthetic float32 run is made by default (its estimate fits the "
           "budget)", made, "yes", made, note=(calibration.get("notes") or [""])[0][:300])
    metrics["ampconv"] = {"seconds": seconds, "seconds_without_run": plain_seconds,
                          "run_adds_s": round(seconds - plain_seconds, 2), "run_s": calibration.get("seconds"),
                          "float32_nodes": report.count("HIGH"), "envelope": report.envelope}
    tool = run_tool_child("ort", src, theirs, TOOL_TIMEOUT_S)
    metrics["ort_tool"] = tool
    if tool["status"] != "ok":
        errors.append({"section": "ORT tool", "error": tool.get("error", "")})
    else:
        mine, peer = figures.deploy_figures(str(ours)), figures.deploy_figures(str(theirs))
        limit = max(CASTS_FACTOR * peer.casts, peer.casts + CASTS_SLACK)
        _check(checks, "vit_casts_vs_ort_tool", "ampconv's Casts vs onnxruntime's float16 tool's (keep_io_types)",
               mine.casts, f"<= max({CASTS_FACTOR}x, +{CASTS_SLACK}) = {limit:g}", mine.casts <= limit,
               note=f"ORT tool {peer.casts}; cast traffic {mine.cast_traffic_bytes / 1e6:.2f} MB vs "
                    f"{peer.cast_traffic_bytes / 1e6:.2f} MB per inference")
        metrics["figures"] = {"ampconv": _figures(mine), "ort_tool": _figures(peer)}
    npz = work / "pixels.npz"
    np.savez(npz, **{INPUT: pixel_sample(spec)})
    verdict = ampconv.validate(src, ours, ValidateOptions(backend="emulate", inputs=(str(npz),)))
    _check(checks, "vit_emulated_fp16", "the converted ViT passes emulated fp16 validation on a normalized image",
           verdict.passed, "passes", verdict.passed)
    result = {"checks": checks, "metrics": metrics, "errors": errors}
    (out / "bench_vit.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "bench_vit.md").write_text(render_markdown(result))
    return result


def _figures(found) -> dict:
    return {"casts": found.casts, "cast_traffic_mb": round(found.cast_traffic_bytes / 1e6, 3),
            "heavy_low": f"{found.heavy_low}/{found.heavy_nodes}", "weight_mib": round(found.weight_bytes / 2**20, 1)}


def render_markdown(result: dict) -> str:
    """The checks and the run's seconds as tables for people."""
    m = result["metrics"]
    amp = m.get("ampconv", {})
    lines = ["# bench_vit", "", f"ViT-S/16, {m['model']['nodes']} nodes, {m['model']['file_mib']} MiB.", "",
             "| check | value | target | result | note |", "|---|---|---|---|---|"]
    for c in result["checks"]:
        lines.append(f"| {c['description']} | {c['value']} | {c['target']} | {'PASS' if c['passed'] else '**FAIL**'} "
                     f"| {c['note']} |")
    lines += ["", f"- conversion {amp.get('seconds')} s with the synthetic run, {amp.get('seconds_without_run')} s "
              f"without (the run adds {amp.get('run_adds_s')} s; its own pass {amp.get('run_s')} s)",
              f"- envelope: {json.dumps(amp.get('envelope'))}", f"- figures: {json.dumps(m.get('figures'))}"]
    lines += [f"- error in {e['section']}: {e['error']}" for e in result["errors"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--depth", type=int, default=12)
    args = parser.parse_args()
    print(json.dumps(main(args.out, args.depth)["checks"], indent=2))
