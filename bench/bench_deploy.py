"""GPU deployment figures (issue 20, "Lean on the GPU"): ampconv vs onnxruntime's float16 tool.

``main(out_dir) -> dict`` (what bench/run_all.py calls) or
``python bench/bench_deploy.py --out DIR [--models bert vit]``.

For every model of the zoo (bench/deploy_models.py: BERT, GPT-2, ViT, a
Whisper encoder, MobileNetV3-small, a ConvNeXt exported at opset 14 with its
LayerNorms written out, each transformer also after onnxruntime's
transformer optimizer, and a Q/DQ int8 CNN), four conversions:

- ``ampconv fp16``: ``ampconv.convert(src, dst, Config(dtype="fp16"))`` (the defaults: O2, keep_io_types);
- ``ampconv bf16``: the same with ``dtype="bf16"``;
- ``ORT tool``: ``onnxruntime.transformers.float16.convert_float_to_float16(model, keep_io_types=True)``;
- ``onnxconverter-common``: ``onnxconverter_common.float16.convert_float_to_float16(model, keep_io_types=True)``.

The two external tools run in child processes with a time limit (a crash is
recorded, not raised). Every output gets the figures of ``bench/figures.py``
at the model's sample shapes (Casts, cast traffic, heavy nodes LOW, weight
bytes, float nodes LOW), an onnxruntime CPU load check, and a verdict of
``ampconv.validate`` under fp16/bf16 emulation (2 seeded random samples).

Checks, per model, ampconv fp16 against the ORT tool (targets of issue 20):
Casts <= max(1.25x, +2); cast traffic <= 1.25x (both free of unknown sizes);
weight bytes <= 1.02x; every heavy node the ORT tool has LOW is LOW (by node
name, else by counts per op type); ampconv passes emulated validation. For
the Q/DQ model: no DequantizeLinear -> Cast and no Cast -> QuantizeLinear edge,
output file no larger than the input. For MobileNetV3-small (opset 17) in
bf16: at least 90% of the float nodes LOW. Writes ``OUT/deploy.json`` and
``OUT/deploy.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import onnx

from bench import graphstats
from bench.deploy_models import DeployModel, build_zoo, describe

AMPCONV_FP16, AMPCONV_BF16, ORT_TOOL, OCC = "ampconv fp16", "ampconv bf16", "ORT tool", "onnxconverter-common"
VARIANTS = (AMPCONV_FP16, AMPCONV_BF16, ORT_TOOL, OCC)
SOURCE = "float32"
TOOL_TIMEOUT_S = 300.0
SAMPLES = 2
CASTS_FACTOR, CASTS_SLACK = 1.25, 2
TRAFFIC_FACTOR = 1.25
WEIGHT_FACTOR = 1.02
BF16_FLOAT_SHARE = 0.9
BF16_CNN = "mobilenet_v3_small"
_FILE_TAGS = {AMPCONV_FP16: "ampconv-fp16", AMPCONV_BF16: "ampconv-bf16", ORT_TOOL: "ort-fp16", OCC: "occ-fp16"}


# --- conversions --------------------------------------------------------------------------------


def convert_variant(variant: str, src: pathlib.Path, dst: pathlib.Path) -> dict[str, object]:
    """Write ``dst`` with one converter; ``{"status": "ok"|"failed"|"timed out", "seconds", "error"}``, never raises."""
    if variant in (AMPCONV_FP16, AMPCONV_BF16):
        import ampconv

        start = time.perf_counter()
        try:
            dtype = "fp16" if variant == AMPCONV_FP16 else "bf16"
            ampconv.convert(src, dst, ampconv.Config(dtype=dtype, overwrite=True))
        except Exception as exc:  # noqa: BLE001 -- a converter failing on a model is a result
            return {"status": "failed", "seconds": None, "error": f"{type(exc).__name__}: {exc}"[:1500]}
        return {"status": "ok", "seconds": round(time.perf_counter() - start, 3)}
    return run_tool_child("ort" if variant == ORT_TOOL else "occ", src, dst, TOOL_TIMEOUT_S)


def run_tool_child(tool: str, src: pathlib.Path, dst: pathlib.Path, timeout_s: float) -> dict[str, object]:
    """One external float16 tool in a child process (a crash or a hang must not end the bench)."""
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--tool-child", tool, str(src), str(dst)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "timed out", "seconds": None, "error": f"no result after {timeout_s:g} s"}
    if done.returncode != 0 or not dst.exists():
        return {"status": "failed", "seconds": None,
                "error": (done.stderr.strip() or f"exit {done.returncode}")[-1500:]}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def _tool_child(tool: str, src: str, dst: str) -> None:
    """Child side: convert with ``tool`` (keep_io_types=True), save, print ``{"seconds": t}``."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")  # both tools warn once per clamped value
    logging.disable(logging.WARNING)
    if tool == "ort":
        from onnxruntime.transformers.float16 import convert_float_to_float16
    else:
        from onnxconverter_common.float16 import convert_float_to_float16
    model = onnx.load(src)
    start = time.perf_counter()
    converted = convert_float_to_float16(model, keep_io_types=True)
    seconds = time.perf_counter() - start
    onnx.save(converted, dst)
    print(json.dumps({"seconds": round(seconds, 3)}))


# --- measurements of one output -----------------------------------------------------------------


def measure(model: DeployModel, path: pathlib.Path, validate: bool) -> dict[str, object]:
    """Figures, onnxruntime load check and (``validate``) the emulated verdict of one file of ``model``."""
    from bench.figures import deploy_figures

    entry: dict[str, object] = {"file": path.name, "file_bytes": file_bytes(path)}
    try:
        entry["figures"] = deploy_figures(path, model.dims, model.input_shapes).to_dict()
    except Exception as exc:  # noqa: BLE001 -- a figure that cannot be computed is reported
        entry["figures_error"] = f"{type(exc).__name__}: {exc}"[:1000]
    entry["load_error"] = graphstats.ort_load_error(path)
    entry["qdq_edges"] = qdq_cast_edges(path)
    if validate:
        entry["validation"] = emulated_verdict(model, path)
    return entry


def emulated_verdict(model: DeployModel, path: pathlib.Path) -> dict[str, object]:
    """``ampconv.validate`` under emulation on seeded random inputs: passed, decided_by, worst cosine."""
    import ampconv
    from ampconv.validation import ValidateOptions

    options = ValidateOptions(backend="emulate", samples=SAMPLES, seed=0, shapes=dict(model.dims),
                              input_ranges=dict(model.input_ranges))
    start = time.perf_counter()
    try:
        result = ampconv.validate(model.path, path, options)
    except Exception as exc:  # noqa: BLE001 -- an output the validator cannot run is a result
        return {"passed": False, "error": f"{type(exc).__name__}: {exc}"[:1000]}
    worst = min(result.outputs, key=lambda o: _cosine_key(o.worst.cosine if o.worst else None))
    failed = [o for o in result.outputs if not o.passed]
    return {
        "passed": result.passed,
        "dtype": result.dtype,
        "decided_by": (failed[0] if failed else worst).decided_by,
        "worst_cosine": _finite_or_text(worst.worst.cosine if worst.worst else None),
        "seconds": round(time.perf_counter() - start, 2),
    }


def _cosine_key(value) -> float:
    """Sort key: NaN (a new NaN/Inf) is the worst cosine, then the smallest."""
    return -math.inf if value is None or math.isnan(value) else value


def _finite_or_text(value):
    return value if value is None or math.isfinite(value) else str(value)


def file_bytes(path: pathlib.Path) -> int:
    """Bytes of the model file and of the external data files it names."""
    model = onnx.load(str(path), load_external_data=False)
    locations = {entry.value for graph in graphstats.iter_graphs(model.graph) for t in graph.initializer
                 for entry in t.external_data if entry.key == "location"}
    return path.stat().st_size + sum((path.parent / loc).stat().st_size for loc in locations
                                     if (path.parent / loc).exists())


def qdq_cast_edges(path: pathlib.Path) -> dict[str, int]:
    """DequantizeLinear -> Cast and Cast -> QuantizeLinear edges (all graphs): casts a Q/DQ model should not need."""
    model = onnx.load(str(path), load_external_data=False)
    dq_to_cast = cast_to_q = 0
    for graph in graphstats.iter_graphs(model.graph):
        producer = {out: node.op_type for node in graph.node for out in node.output}
        for node in graph.node:
            if node.op_type == "Cast" and node.input and producer.get(node.input[0]) == "DequantizeLinear":
                dq_to_cast += 1
            if node.op_type == "QuantizeLinear" and node.input and producer.get(node.input[0]) == "Cast":
                cast_to_q += 1
    return {"dq_to_cast": dq_to_cast, "cast_to_q": cast_to_q}


def run_model(model: DeployModel, work: pathlib.Path, log=print) -> dict[str, object]:
    """Convert ``model`` with every variant and measure each output (and the float32 source)."""
    entry: dict[str, object] = {"family": model.family, "note": model.note,
                                "dims": dict(model.dims), "variants": {}}
    entry["variants"][SOURCE] = {"conversion": {"status": "source"}, **measure(model, model.path, validate=False)}
    for variant in VARIANTS:
        dst = work / f"{model.name}.{_FILE_TAGS[variant]}.onnx"
        log(f"[deploy] {model.name}: {variant}")
        if dst.exists():
            dst.unlink()  # never measure a previous run's file as this run's
        conversion = convert_variant(variant, model.path, dst)
        result: dict[str, object] = {"conversion": conversion}
        if conversion["status"] == "ok":
            result.update(measure(model, dst, validate=True))
        entry["variants"][variant] = result
    return entry


# --- checks ---------------------------------------------------------------------------------------


def _check(check_id: str, description: str, value, target: str, passed: bool, unit: str = "",
           note: str = "") -> dict[str, object]:
    return {"id": check_id, "description": description, "value": value, "unit": unit, "target": target,
            "passed": bool(passed), "note": note}


def model_checks(name: str, entry: dict[str, object]) -> list[dict[str, object]]:
    """The per-model checks of ampconv fp16 against the ORT tool (n/a when the ORT tool has no output)."""
    ours, theirs = (entry["variants"].get(v, {}) for v in (AMPCONV_FP16, ORT_TOOL))
    a, o = ours.get("figures"), theirs.get("figures")
    checks = []
    if a is None:
        why = ours.get("conversion", {}).get("error") or ours.get("figures_error") or "no output"
        ids = ("casts", "cast_traffic", "weights", "heavy_low", "emulated")
        return [_check(f"{name}_{i}", f"{name}: {i.replace('_', ' ')}", None, "ampconv fp16 output", False,
                       note=f"ampconv fp16 failed: {why}"[:300]) for i in ids]
    if o is None or theirs.get("load_error"):
        # An output onnxruntime cannot load is no baseline to be held to.
        why = theirs.get("conversion", {}).get("error") or theirs.get("figures_error") or \
            f"its output does not load in onnxruntime: {theirs.get('load_error')}"
        for i in ("casts", "cast_traffic", "weights", "heavy_low"):
            checks.append(_check(f"{name}_{i}", f"{name}: {i.replace('_', ' ')} vs ORT tool", None, "n/a", True,
                                 note=f"n/a: the ORT tool has no output to compare with: {why}"[:300]))
    else:
        checks += [_casts_check(name, a, o), _traffic_check(name, a, o), _weights_check(name, a, o),
                   _heavy_check(name, a, o)]
    verdict = ours.get("validation") or {}
    checks.append(_check(f"{name}_emulated", f"{name}: ampconv fp16 passes emulated validation",
                         "pass" if verdict.get("passed") else "FAIL", "pass", bool(verdict.get("passed")),
                         note=str(verdict.get("error") or verdict.get("decided_by") or "")[:300]))
    return checks


def _casts_check(name: str, a: dict, o: dict) -> dict[str, object]:
    limit = max(CASTS_FACTOR * o["casts"], o["casts"] + CASTS_SLACK)
    return _check(f"{name}_casts", f"{name}: Casts, ampconv fp16 vs ORT tool", a["casts"],
                  f"<= max(1.25x, +2) of {o['casts']} = {limit:g}", a["casts"] <= limit)


def _traffic_check(name: str, a: dict, o: dict) -> dict[str, object]:
    ours, theirs = a["cast_traffic_bytes"], o["cast_traffic_bytes"]
    target = f"<= 1.25 x {theirs / 1e6:.3f} MB"
    unknown = (a["cast_traffic_unknown"], o["cast_traffic_unknown"])
    if any(unknown):
        return _check(f"{name}_cast_traffic", f"{name}: cast traffic per inference, ampconv fp16 vs ORT tool",
                      round(ours / 1e6, 3), target, False, "MB",
                      note=f"not comparable: Casts of unknown size (ampconv {unknown[0]}, ORT tool {unknown[1]})")
    largest = ", ".join(f"{n} {b / 1e6:.3f}" for n, b in a["largest_casts"][:3])
    note = (f"ratio {ours / theirs:.2f}; " if theirs else "") + f"largest Casts (MB): {largest or 'none'}"
    return _check(f"{name}_cast_traffic", f"{name}: cast traffic per inference, ampconv fp16 vs ORT tool",
                  round(ours / 1e6, 3), target, ours <= TRAFFIC_FACTOR * theirs, "MB", note=note)


def _weights_check(name: str, a: dict, o: dict) -> dict[str, object]:
    ours, theirs = a["weight_bytes"], o["weight_bytes"]
    return _check(f"{name}_weights", f"{name}: weight bytes, ampconv fp16 vs ORT tool", round(ours / 1e6, 3),
                  f"<= 1.02 x {theirs / 1e6:.3f} MB", ours <= WEIGHT_FACTOR * theirs, "MB",
                  note=f"ratio {ours / theirs:.3f}" if theirs else "")


def _heavy_check(name: str, a: dict, o: dict) -> dict[str, object]:
    """Every heavy node LOW in the ORT tool's output is LOW in ampconv's: by name when the names
    survive both conversions, else by counts per op type."""
    ours_low, ort_low = set(a["heavy_low_names"]), set(o["heavy_low_names"])
    ours_all = ours_low | set(a["heavy_other_names"])
    value = f"{a['heavy_low']}/{a['heavy_nodes']}"
    target = f"LOW wherever the ORT tool's is ({o['heavy_low']}/{o['heavy_nodes']})"
    if ort_low <= ours_all:
        missing = sorted(ort_low - ours_low)
        note = f"by name; not LOW: {', '.join(missing[:5])}" + (" ..." if len(missing) > 5 else "") \
            if missing else "by name"
        passed = not missing and a["heavy_low"] >= o["heavy_low"]
    else:
        short = {op: (counts["low"], o["heavy_by_op"][op]["low"]) for op, counts in a["heavy_by_op"].items()
                 if op in o["heavy_by_op"] and counts["low"] < o["heavy_by_op"][op]["low"]}
        short.update({op: (0, c["low"]) for op, c in o["heavy_by_op"].items() if op not in a["heavy_by_op"]
                      and c["low"]})
        note = "by counts per op type (names differ)" + (
            "; fewer LOW: " + ", ".join(f"{op} {x} < {y}" for op, (x, y) in sorted(short.items())) if short else "")
        passed = not short and a["heavy_low"] >= o["heavy_low"]
    return _check(f"{name}_heavy_low", f"{name}: heavy nodes LOW, ampconv fp16 vs ORT tool", value, target,
                  passed, note=note)


def qdq_checks(name: str, entry: dict[str, object]) -> list[dict[str, object]]:
    """The Q/DQ model: no Cast between DequantizeLinear and its consumer or before QuantizeLinear; no larger file."""
    ours = entry["variants"].get(AMPCONV_FP16, {})
    source = entry["variants"][SOURCE]
    edges = ours.get("qdq_edges")
    if edges is None:
        why = ours.get("conversion", {}).get("error", "no output")
        return [_check(f"{name}_{i}", f"{name}: {i}", None, "0", False, note=f"ampconv fp16 failed: {why}"[:300])
                for i in ("dq_to_cast", "cast_to_q", "file_size")]
    return [
        _check(f"{name}_dq_to_cast", f"{name}: DequantizeLinear -> Cast edges in ampconv fp16",
               edges["dq_to_cast"], "0", edges["dq_to_cast"] == 0),
        _check(f"{name}_cast_to_q", f"{name}: Cast -> QuantizeLinear edges in ampconv fp16",
               edges["cast_to_q"], "0", edges["cast_to_q"] == 0),
        _check(f"{name}_file_size", f"{name}: ampconv fp16 file bytes vs the float32/int8 input", ours["file_bytes"],
               f"<= {source['file_bytes']}", ours["file_bytes"] <= source["file_bytes"], "bytes"),
    ]


def bf16_share_check(name: str, entry: dict[str, object]) -> dict[str, object]:
    """ampconv bf16 on an opset-17 CNN: the share of float nodes whose first float tensor is LOW."""
    figures = entry["variants"].get(AMPCONV_BF16, {}).get("figures")
    description = f"{name} (opset 17): share of float nodes bfloat16 in ampconv bf16"
    how = ("float node: a node with a float input or output (inferred types), Cast/Constant/If/Loop/Scan "
           "left out; LOW: its first float input (else output) is bfloat16")
    if figures is None:
        return _check(f"{name}_bf16_float_share", description, None, ">= 0.9", False, note="no ampconv bf16 output")
    share = figures["float_low"] / figures["float_nodes"] if figures["float_nodes"] else 0.0
    return _check(f"{name}_bf16_float_share", description, round(share, 3), ">= 0.9", share >= BF16_FLOAT_SHARE,
                  note=f"{figures['float_low']} of {figures['float_nodes']}; {how}")


# --- report ---------------------------------------------------------------------------------------


def render_markdown(result: dict[str, object]) -> str:
    """deploy.md: per model a side-by-side table of the four conversions (and the float32 source)."""
    lines = ["# Deployment figures: ampconv vs onnxruntime's float16 tool (issue 20)", "",
             "Cast traffic: bytes moved by Cast nodes per inference at the sample shapes (input + output, "
             "MB = 10^6 bytes). Heavy: MatMul/Gemm/Conv/attention/normalization nodes reading float16/bfloat16 "
             "(`ampconv.core.heavy_ops.HEAVY_OPS`). Float: nodes with float data whose first float tensor is LOW. "
             f"Emulated: `ampconv.validate` with fp16/bf16 emulation, {SAMPLES} seeded random samples "
             "(worst cosine over outputs). Loads: an onnxruntime CPU session; bfloat16 models are expected "
             "not to load there (the CPU provider has no bfloat16 kernels for most ops).", ""]
    for name, entry in result["metrics"]["models"].items():
        lines += [f"## {name}", "", f"{entry['family']}; sample dims {entry['dims']}. {entry['note']}".strip(), "",
                  "| variant | Casts | cast traffic MB | heavy LOW | float LOW | weights MB | emulated | "
                  "loads (ORT CPU) | seconds |", "|---|---:|---:|---:|---:|---:|---|---|---:|"]
        for variant, v in entry["variants"].items():
            lines.append(_row(variant, v))
        lines.append("")
    checks = result["checks"]
    lines += ["## Checks", "", "| check | value | target | result | note |", "|---|---|---|---|---|"]
    for c in checks:
        note = str(c.get("note", "")).replace("|", "\\|")
        lines.append(f"| {c['id']} | {c['value']} {c.get('unit', '')} | {c['target']} | "
                     f"{'PASS' if c['passed'] else '**FAIL**'} | {note} |")
    for err in result["errors"]:
        lines += ["", f"Error in `{err['section']}`: {err['error']}"]
    return "\n".join(lines) + "\n"


def _row(variant: str, v: dict[str, object]) -> str:
    conversion = v.get("conversion", {})
    if conversion.get("status") not in ("ok", "source"):
        error = str(conversion.get("error", "")).strip().splitlines()[-1:] or [""]
        return f"| {variant} | {conversion.get('status')}: {error[0][:160].replace('|', '/')} | | | | | | | |"
    f = v.get("figures")
    if f is None:
        return f"| {variant} | figures failed: {v.get('figures_error', '')[:160]} | | | | | | | |"
    traffic = f"{f['cast_traffic_bytes'] / 1e6:.3f}" + (f" (+{f['cast_traffic_unknown']} unknown)"
                                                        if f["cast_traffic_unknown"] else "")
    verdict = v.get("validation")
    if verdict is None:
        emulated = "-"
    elif verdict.get("error"):
        emulated = f"error: {verdict['error'][:100]}"
    else:
        emulated = f"{'pass' if verdict['passed'] else '**FAIL**'} (cos {_fmt_cos(verdict['worst_cosine'])})"
    loads = "yes" if not v.get("load_error") else f"**no**: {str(v['load_error'])[:100]}"
    seconds = conversion.get("seconds")
    return (f"| {variant} | {f['casts']} | {traffic} | {f['heavy_low']}/{f['heavy_nodes']} | "
            f"{f['float_low']}/{f['float_nodes']} | {f['weight_bytes'] / 1e6:.2f} | "
            f"{emulated.replace('|', '/')} | {loads.replace('|', '/')} | {seconds if seconds is not None else '-'} |")


def _fmt_cos(value) -> str:
    return f"{value:.6f}" if isinstance(value, float) else str(value)


# --- entry ----------------------------------------------------------------------------------------


def main(out_dir, models: Sequence[str] | None = None) -> dict[str, object]:
    """Run the zoo (or the named spec names); write deploy.json and deploy.md into ``out_dir``."""
    out = pathlib.Path(out_dir)
    work = out / "tmp" / "deploy"
    work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    result: dict[str, object] = {"name": "deploy", "checks": [], "errors": [], "metrics": {"models": {}}}
    try:
        zoo = build_zoo(work / "zoo", names=models)
    except Exception as exc:  # noqa: BLE001 -- without the zoo there is nothing to measure; say why
        result["errors"].append({"section": "zoo", "error": f"{type(exc).__name__}: {exc}",
                                 "traceback": traceback.format_exc()[-3000:]})
        zoo = []
    result["metrics"]["zoo"] = describe(zoo)
    for model in zoo:
        try:
            entry = run_model(model, work)
            result["metrics"]["models"][model.name] = entry
            result["checks"] += model_checks(model.name, entry)
            if model.family == "qdq":
                result["checks"] += qdq_checks(model.name, entry)
            if model.name == BF16_CNN:
                result["checks"].append(bf16_share_check(model.name, entry))
        except Exception as exc:  # noqa: BLE001 -- one model's crash must not hide the others
            result["errors"].append({"section": model.name, "error": f"{type(exc).__name__}: {exc}",
                                     "traceback": traceback.format_exc()[-3000:]})
    result["metrics"]["seconds"] = round(time.perf_counter() - start, 1)
    (out / "deploy.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "deploy.md").write_text(render_markdown(result))
    return result


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--tool-child":
        _tool_child(*sys.argv[2:5])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results", help="folder for deploy.json, deploy.md and tmp/")
    parser.add_argument("--models", nargs="*", help="spec names of bench/deploy_models.py (bert also runs bert_ort)")
    args = parser.parse_args()
    res = main(args.out, args.models)
    failed = [c["id"] for c in res["checks"] if not c["passed"]]
    print(f"{len(res['checks']) - len(failed)} of {len(res['checks'])} checks passed; failed: {failed}")
    sys.exit(0 if not res["errors"] else 1)
