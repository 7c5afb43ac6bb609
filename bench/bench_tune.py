"""Accuracy-driven precision: ampconv ``--calibration-data --tune`` vs onnxconverter-common's search.

``python bench/bench_tune.py --out /tmp/b`` (``run_all.py --only tune`` calls ``main``).

For every model of tests/data_models.py (each reproduces a data-dependent fp16
failure), on the same calibration samples and tolerance (``data_models.TOLERANCE``):

- onnxconverter-common ``auto_convert_mixed_precision(model, feed, rtol=, atol=,
  keep_io_types=True)``, in a child process with a time limit. It takes one
  feed dict: the first calibration sample. Its own check runs the candidate on
  onnxruntime's CPU provider, which computes most fp16 ops in float32 and hides
  overflow, so its output is also validated here under ampconv's fp16 emulation
  on all samples (and natively on all samples, to show the difference).
- ampconv: ``Config(level=AMPCONV_LEVEL, calibration_data=(folder,), tune=True, rtol, atol)``,
  at O3: onnxconverter-common's search starts from every op in fp16, so ampconv
  starts from the same place (at O2 its black list, e.g. Softmax and Log, and
  the gray ops that follow them would stay float32 before any search).

An *evaluation* is one inference of a candidate mixed-precision model for a
verdict: for onnxconverter-common, one full-output run of a converted candidate
(its float32 reference run and the runs it uses to discover dtypes are counted
apart, as ``reference_runs`` and ``dtype_runs``; ``sessions`` counts every
onnxruntime session it creates); for ampconv, ``report.tune["evaluations"]``.
An ampconv evaluation covers every calibration sample, onnxconverter-common's
one sample: ``sample_runs`` gives both in inferences.

*float32 nodes* are counted the same way in both outputs: nodes (subgraphs
included) with a float32 input or output after shape inference, leaving out
Cast, Constant, control-flow nodes (their bodies are counted) and nodes
without float data.

Memory: peak RSS of ``ampconv convert M --calibration-data DIR --tune`` as a
child process, with 10 and with 500 samples of a larger long_reduction
(512 KiB per sample, so holding all samples would add 256 MiB).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import data_models as dm  # noqa: E402  (tests/data_models.py: the models and their data)

SAMPLES = 16
OCC_TIMEOUT_S = 300.0
OCC_LOG_CHARS = 200_000
EVAL_RATIO_TARGET = 10.0
MEMORY_SAMPLES = (10, 500)
MEMORY_SIZE = 131072  # long_reduction input length for the memory check: 512 KiB per sample
MEMORY_RATIO_TARGET = 1.25
MEMORY_TIMEOUT_S = 600.0

_RSS_RUNNER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": done.returncode, "wall_s": time.perf_counter() - start,
                  "peak_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "stderr_tail": done.stderr[-1500:]}))
"""


# ---------------------------------------------------------------- shared measures
def float32_nodes(path) -> dict:
    """Nodes of the model at ``path`` that compute in float32 / in a LOW type (see module docstring)."""
    import onnx

    from bench.graphstats import FLOAT_TYPES, value_types

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)), check_type=False, strict_mode=False)
    found = {"float32": [], "low": 0, "unknown": []}

    def visit(graph, outer):
        types = value_types(graph, outer)
        for node in graph.node:
            subgraphs = [a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH]
            subgraphs += [g for a in node.attribute for g in a.graphs]
            for sub in subgraphs:
                visit(sub, types)
            if subgraphs or node.op_type in ("Cast", "Constant"):
                continue
            elems = [types.get(n) for n in list(node.input) + list(node.output) if n]
            if onnx.TensorProto.FLOAT in elems:
                found["float32"].append(node.name)
            elif any(e in FLOAT_TYPES for e in elems):
                found["low"] += 1
            elif None in elems:
                found["unknown"].append(node.name)

    visit(model.graph, {})
    return {"float32": len(found["float32"]), "low": found["low"], "float32_names": found["float32"],
            "unknown_type_nodes": found["unknown"]}


def emulate_check(src, dst, calib: str, rtol: float, atol: float, backend: str = "emulate") -> dict:
    """Validate ``dst`` against ``src`` on every calibration sample with ``backend``; never raises."""
    try:
        import ampconv
        from ampconv.validation import ValidateOptions

        result = ampconv.validate(str(src), str(dst), ValidateOptions(
            inputs=(calib,), backend=backend, rtol=rtol, atol=atol))
    except Exception as exc:  # noqa: BLE001 -- a judge that cannot run is data, not a crash
        return {"passed": None, "error": f"{type(exc).__name__}: {exc}"[:500]}
    worst = {}
    for out in result.outputs:
        m = out.worst
        worst[out.name] = None if m is None else {
            "max_abs": _finite(m.max_abs), "mismatched": m.mismatched, "size": m.size,
            "new_nonfinite": m.new_nonfinite}
    return {"passed": bool(result.passed), "backend": result.backend, "worst": worst}


def _finite(x):
    # JSON has no inf/NaN: say them as strings.
    return x if x is None or math.isfinite(x) else str(x)


def eval_bound(n_low: int) -> int:
    """The target for ampconv's evaluations: 2 * ceil(log2 N) + 4 (4 when N <= 1)."""
    return 2 * math.ceil(math.log2(n_low)) + 4 if n_low > 1 else 4


# ---------------------------------------------------------------- onnxconverter-common
def run_occ(src, feed_npz, dst, rtol: float, atol: float, timeout_s: float, log_path,
            judge: str = "native") -> dict:
    """Run onnxconverter-common's ``auto_convert_mixed_precision`` in a child; never raises.

    Returns status ``ok`` / ``failed`` (its exception) / ``timed out``, its wall
    time, and the counters (kept up to date by the child, so a timeout still
    reports how many evaluations it had done).
    """
    result_path = pathlib.Path(str(dst) + ".result.json")
    if result_path.exists():
        result_path.unlink()
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--occ-child", str(src), str(feed_npz),
           str(dst), str(result_path), repr(rtol), repr(atol), str(log_path), judge]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        state = _read_json(result_path)
        state.update(status="timed out", seconds=None, error=f"no result after {timeout_s:g} s")
        return state
    state = _read_json(result_path)
    if done.returncode != 0 and state.get("status") != "failed":
        state.update(status="failed", error=(done.stderr or "").strip()[-800:] or f"exit {done.returncode}")
    state["process_seconds"] = round(time.perf_counter() - start, 2)
    return state


def _read_json(path) -> dict:
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return {}


def _occ_child(src, feed_npz, dst, result_path, rtol, atol, log_path, judge="native") -> None:
    """Child side of ``run_occ``: count sessions and runs by wrapping the functions it calls.

    ``judge="emulate"`` runs each candidate (and the reference) through
    ampconv's fp16 emulation instead of as it is: the same search, judged the
    way ampconv judges its own candidates.
    """
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxconverter_common import auto_mixed_precision as amp
    from onnxconverter_common import float16

    state = {"status": "running", "evaluations": 0, "reference_runs": 0, "dtype_runs": 0,
             "sessions": 0, "conversions": 0, "seconds": None}

    def save_state():
        pathlib.Path(result_path).write_text(json.dumps(state))

    real_run = amp.get_tensor_values_using_ort
    verdict_run = _emulated_run if judge == "emulate" else real_run

    def counted_run(model, input_feed, output_names=None, sess_options=None):
        # All outputs = a verdict run; the first is its float32 reference.
        # Named outputs = add_missing_dtypes_using_ort discovering types.
        if output_names is not None:
            state["dtype_runs"] += 1
        elif state["reference_runs"] == 0:
            state["reference_runs"] += 1
        else:
            state["evaluations"] += 1
        save_state()
        if output_names is not None:  # dtype discovery runs the float32 model: nothing to emulate
            return real_run(model, input_feed, output_names, sess_options)
        return verdict_run(model, input_feed, output_names, sess_options)

    class CountingSession(ort.InferenceSession):
        def __init__(self, *args, **kwargs):
            state["sessions"] += 1
            super().__init__(*args, **kwargs)

    convert = float16.convert_float_to_float16

    def counted_convert(*args, **kwargs):
        state["conversions"] += 1
        return convert(*args, **kwargs)

    amp.get_tensor_values_using_ort = counted_run
    ort.InferenceSession = CountingSession  # looked up at call time by get_tensor_values_using_ort
    float16.convert_float_to_float16 = counted_convert  # amp calls it through the module

    model = onnx.load(src)
    with np.load(feed_npz) as stored:
        feed = {k: stored[k] for k in stored.files}
    save_state()
    start = time.perf_counter()
    # It prints every attempt's block list and segment list; keep that out of
    # the bench log, on disk, but capped: a search that never ends prints
    # ever longer segment lists.
    with open(log_path, "w") as log, contextlib.redirect_stdout(_Capped(log, OCC_LOG_CHARS)):
        try:
            converted = amp.auto_convert_mixed_precision(model, feed, rtol=rtol, atol=atol, keep_io_types=True)
        except Exception as exc:  # noqa: BLE001 -- its failure is the result
            state.update(status="failed", seconds=round(time.perf_counter() - start, 3),
                         error=f"{type(exc).__name__}: {exc}"[:800])
            save_state()
            return
    state["seconds"] = round(time.perf_counter() - start, 3)
    onnx.save(converted, dst)
    state["status"] = "ok"
    save_state()


class _Capped:
    """A text sink that keeps the first ``limit`` characters written to it."""

    def __init__(self, handle, limit: int):
        self.handle, self.left = handle, limit

    def write(self, text: str) -> int:
        if self.left > 0:
            self.handle.write(text[: self.left])
            if len(text) >= self.left:
                self.handle.write("\n[log capped]\n")
            self.left -= len(text)
        return len(text)

    def flush(self) -> None:
        self.handle.flush()


def _emulated_run(model, input_feed, output_names=None, sess_options=None):
    """Like occ's ``get_tensor_values_using_ort`` (all outputs), on ampconv's emulation of ``model``."""
    import tempfile

    import onnx
    import onnxruntime as ort

    from ampconv.numerics import emulate, modelio

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "candidate.onnx")
        onnx.save(model, path)
        derived = modelio.load(path)
        emulate.emulate(derived)
        emulated = modelio.save_derived(derived, tmp, "emulated", external=False)
        options = ort.SessionOptions()
        # As ampconv's validator: no optimizer may fold the rounding Casts away.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(emulated, options, providers=["CPUExecutionProvider"])
        return session.run(None, input_feed)


# ---------------------------------------------------------------- ampconv
def run_ampconv(src, calib: str, dst, rtol: float, atol: float) -> dict:
    """``ampconv.convert`` with calibration data and ``tune``; never raises.

    Status ``not available`` while the installed ampconv lacks the options or
    does not report a tune result; ``failed`` when the conversion raised.
    """
    try:
        import ampconv

        config = ampconv.Config(level=AMPCONV_LEVEL, dtype="fp16", overwrite=True, calibration_data=(calib,),
                                tune=True, rtol=rtol, atol=atol)
    except Exception as exc:  # noqa: BLE001 -- an older ampconv rejects the fields
        return {"status": "not available", "error": f"{type(exc).__name__}: {exc}"[:500]}
    start = time.perf_counter()
    try:
        report = ampconv.convert(str(src), str(dst), config)
    except Exception as exc:  # noqa: BLE001 -- recorded, not hidden
        return {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:800]}
    seconds = time.perf_counter() - start
    tune = getattr(report, "tune", None)
    if not tune:
        return {"status": "not available", "error": "report.tune is empty: tune did not run"}
    return {
        "status": "ok",
        "seconds": round(seconds, 3),
        "passed": tune.get("passed"),
        "evaluations": tune.get("evaluations"),
        "low_nodes": tune.get("low_nodes"),
        "kept": tune.get("kept"),
        "margin_nodes": tune.get("margin_nodes"),
        "lowered": tune.get("lowered"),
        "tune_seconds": tune.get("seconds"),
        "calibration": getattr(report, "calibration", None),
        "high_nodes": [{"node": n["name"], "op_type": n["op_type"], "rule": n.get("rule")}
                       for n in report.nodes if n["precision"] == "HIGH"],
    }


# ---------------------------------------------------------------- one model
def measure_model(name: str, work: pathlib.Path, samples: int, occ_timeout_s: float) -> dict:
    """Both tools on one model with the same data and tolerance."""
    rtol, atol = dm.TOLERANCE
    folder = work / name
    model = dm.MODELS[name]
    src = model.save(folder)
    calib = folder / "calib"
    paths = model.write_calibration(calib, samples, seed=0)
    entry: dict = {"model": name, "samples": samples, "rtol": rtol, "atol": atol,
                   "fix_by_hand": dm.FIXES[name], "float32_nodes_source": float32_nodes(src)["float32"]}

    # As shipped (candidates judged natively on the CPU), then the same search
    # with candidates judged under ampconv's emulation.
    for key, judge in (("occ", "native"), ("occ_emulated_judge", "emulate")):
        occ_dst = folder / f"{name}.{key}.onnx"
        occ = run_occ(src, paths[0], occ_dst, rtol, atol, occ_timeout_s, folder / f"{key}_stdout.txt", judge)
        occ["judge"] = judge
        occ["feed"] = "calibration sample 0 (" + pathlib.Path(paths[0]).name + ")"
        occ["sample_runs"] = occ.get("evaluations")
        if occ.get("status") == "ok":
            occ["nodes"] = float32_nodes(occ_dst)
            occ["emulate"] = emulate_check(src, occ_dst, str(calib), rtol, atol)
            occ["native_cpu"] = emulate_check(src, occ_dst, str(calib), rtol, atol, backend="native")
        entry[key] = occ

    amp_dst = folder / f"{name}.tuned.onnx"
    amp = run_ampconv(src, str(calib), amp_dst, rtol, atol)
    if amp["status"] == "ok":
        amp["nodes"] = float32_nodes(amp_dst)
        amp["emulate"] = emulate_check(src, amp_dst, str(calib), rtol, atol)
        if isinstance(amp.get("evaluations"), int):
            amp["sample_runs"] = amp["evaluations"] * samples
    entry["ampconv"] = amp
    return entry


def model_checks(entry: dict) -> list[dict]:
    """The four checks of one model (see bench/README.md)."""
    name, amp = entry["model"], entry["ampconv"]
    checks = []
    amp_ok = amp["status"] == "ok"
    missing = f"{amp['status']}: {amp.get('error', '')}" if not amp_ok else ""

    def add(what, description, value, target, passed, note="", unit=""):
        checks.append({"id": f"tune.{name}.{what}", "description": f"{name}: {description}", "value": value,
                       "unit": unit, "target": target, "passed": bool(passed), "note": note})

    if amp_ok:
        judged = amp["emulate"].get("passed")
        add("ampconv_passes", "ampconv --tune output passes (its own verdict, and validation under emulation)",
            bool(amp["passed"]) and judged is True, "passes", bool(amp["passed"]) and judged is True,
            f"tune passed={amp['passed']}, emulation passed={judged}")
        n_low, evals = amp.get("low_nodes"), amp.get("evaluations")
        if isinstance(n_low, int) and isinstance(evals, int):
            bound = eval_bound(n_low)
            add("evaluations", "ampconv model evaluations", evals, f"<= 2*ceil(log2 N)+4 = {bound} (N={n_low})",
                evals <= bound, f"N = nodes LOW after the range guards, {amp.get('margin_nodes') or 0} of them "
                f"over the overflow guard only by its margin; kept float32: "
                f"{[k.get('node') for k in amp.get('kept') or []]}; lowered again across the margin: "
                f"{[k.get('node') for k in amp.get('lowered') or []]}")
        else:
            add("evaluations", "ampconv model evaluations", "missing", "<= 2*ceil(log2 N)+4", False,
                f"report.tune lacks evaluations/low_nodes: {evals!r}/{n_low!r}")
    else:
        add("ampconv_passes", "ampconv --tune output passes", "not available", "passes", False, missing)
        add("evaluations", "ampconv model evaluations", "not available", "<= 2*ceil(log2 N)+4", False, missing)

    for key, label in (("occ", ""), ("occ_emulated_judge", "_vs_emulated_judge")):
        occ = entry[key]
        who = "onnxconverter-common" + (" (emulating judge)" if label else "")
        occ_valid = occ.get("status") == "ok" and (occ.get("emulate") or {}).get("passed") is True
        if not amp_ok:
            add(f"float32_nodes{label}", f"float32 nodes, ampconv vs {who}", "not available",
                f"<= {who}'s", False, missing)
        elif occ_valid:
            mine, theirs = amp["nodes"]["float32"], occ["nodes"]["float32"]
            add(f"float32_nodes{label}", f"float32 nodes, ampconv vs {who}", mine,
                f"<= {who}'s {theirs}", mine <= theirs)
        else:
            # No valid baseline to compare against: say why instead of comparing with a broken model.
            add(f"float32_nodes{label}", f"float32 nodes, ampconv vs {who}", "n/a",
                f"<= {who}'s (when its model passes under emulation)", True, f"n/a: {who} " + _occ_verdict(occ))

        occ_evals = occ.get("evaluations")
        amp_evals = amp.get("evaluations") if amp_ok else None
        if isinstance(occ_evals, int) and isinstance(amp_evals, int) and amp_evals > 0:
            ratio = occ_evals / amp_evals
            # A timed-out search had done at least this many: the ratio is a lower bound.
            bound = "at least " if occ.get("status") == "timed out" else ""
            add(f"evaluation_ratio{label}", f"{who} evaluations / ampconv evaluations", round(ratio, 2),
                f">= {EVAL_RATIO_TARGET:g}", ratio >= EVAL_RATIO_TARGET,
                f"{bound}{occ_evals} vs {amp_evals}; {who} {_occ_verdict(occ)}", unit="x")
        else:
            if not amp_ok:
                why = missing
            elif not isinstance(amp_evals, int) or amp_evals == 0:
                why = f"ampconv evaluations = {amp_evals!r}"
            else:
                why = f"{who} evaluations = {occ_evals!r} ({_occ_verdict(occ)})"
            add(f"evaluation_ratio{label}", f"{who} evaluations / ampconv evaluations", "not available",
                f">= {EVAL_RATIO_TARGET:g}", False, why)
    return checks


def _occ_verdict(occ: dict) -> str:
    status = occ.get("status")
    if status == "ok":
        emu = occ.get("emulate") or {}
        verdict = {True: "passes", False: "FAILS", None: "could not be checked"}[emu.get("passed")]
        return f"finished; its output {verdict} under emulation" + (f" ({emu['error']})" if emu.get("error") else "")
    if status == "timed out":
        return f"timed out after {occ.get('evaluations')} evaluations ({occ.get('error')})"
    return f"failed: {occ.get('error', 'no result')}"


# ---------------------------------------------------------------- memory
def measure_memory(work: pathlib.Path, counts=MEMORY_SAMPLES, size: int = MEMORY_SIZE,
                   timeout_s: float = MEMORY_TIMEOUT_S) -> dict:
    """Peak RSS of the CLI with calibration data and --tune at two sample counts."""
    import onnx

    rtol, atol = dm.TOLERANCE
    folder = work / "memory"
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "long_reduction_big.onnx"
    onnx.save(dm.long_reduction(size), str(src))
    ampconv_bin = pathlib.Path(sys.executable).with_name("ampconv")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    info: dict = {"model": f"long_reduction, input [1, {size}]", "sample_bytes": size * 4, "runs": {}}
    for count in counts:
        calib = folder / f"calib_{count}"
        if not (calib / f"sample_{count - 1:03d}.npz").exists():
            dm.write_samples(calib, dm.long_reduction_samples(count, seed=0, size=size))
        cmd = [str(ampconv_bin), "convert", str(src), "-o", str(folder / f"out_{count}.onnx"),
               "--calibration-data", str(calib), "--tune", "--rtol", repr(rtol), "--atol", repr(atol),
               "--overwrite", "-q"]
        try:
            done = subprocess.run([sys.executable, "-c", _RSS_RUNNER] + cmd, capture_output=True, text=True,
                                  timeout=timeout_s, env=env, check=False)
            run = json.loads(done.stdout.strip().splitlines()[-1])
        except subprocess.TimeoutExpired:
            run = {"rc": None, "error": f"timed out after {timeout_s:g} s"}
        except (ValueError, IndexError):
            run = {"rc": None, "error": "no result from the runner"}
        if "peak_kb" in run:
            run["peak_mib"] = round(run.pop("peak_kb") / 1024, 1)
            run["wall_s"] = round(run["wall_s"], 2)
        if run.get("rc") == 0:
            run.pop("stderr_tail", None)
        info["runs"][count] = run
    return info


def memory_check(info: dict) -> dict:
    """Peak RSS ratio between the largest and smallest sample count."""
    low, high = min(info["runs"]), max(info["runs"])
    a, b = info["runs"][low], info["runs"][high]
    check = {"id": "tune.memory_peak_rss_ratio",
             "description": f"peak RSS of `ampconv convert --calibration-data --tune`, {high} / {low} samples",
             "unit": "x", "target": f"<= {MEMORY_RATIO_TARGET:g}"}
    if a.get("rc") != 0 or b.get("rc") != 0:
        failed = a if a.get("rc") != 0 else b
        text = failed.get("error") or (failed.get("stderr_tail") or "").strip().splitlines()[-1:] or ["?"]
        return {**check, "value": "not available", "passed": False,
                "note": f"exit {failed.get('rc')}: {text if isinstance(text, str) else text[0]}"[:300]}
    ratio = b["peak_mib"] / a["peak_mib"]
    held = (a["peak_mib"] + high * info["sample_bytes"] / 2**20) / a["peak_mib"]
    return {**check, "value": round(ratio, 3), "passed": ratio <= MEMORY_RATIO_TARGET,
            "note": f"{a['peak_mib']} MiB vs {b['peak_mib']} MiB; holding all {high} samples "
                    f"({high * info['sample_bytes'] / 2**20:.0f} MiB) would give about {held:.2f}x"}


# ---------------------------------------------------------------- report
def render_markdown(result: dict) -> str:
    """One row per model and tool, then errors, the memory runs and the checks."""
    lines = ["# bench_tune: ampconv --tune vs onnxconverter-common auto_convert_mixed_precision", "",
             f"Calibration samples: {result['metrics'].get('samples')}; tolerance rtol, atol = "
             f"{result['metrics'].get('tolerance')}; onnxconverter-common gets sample 0 as its feed. "
             "occ = onnxconverter-common as shipped (candidates judged natively on the CPU); "
             "occ-emu = the same search judging candidates under ampconv's emulation.", "",
             "| model | tool | status | N | evaluations | sessions | inferences | seconds | float32 nodes "
             "| passes natively (CPU) | passes (emulate) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in result["metrics"].get("models", {}).items():
        for key, tool in (("ampconv", "ampconv"), ("occ", "occ"), ("occ_emulated_judge", "occ-emu")):
            r = e.get(key, {})
            cells = [name, tool, r.get("status", "-"), r.get("low_nodes", "-"), r.get("evaluations", "-"),
                     r.get("sessions", "-"), r.get("sample_runs", "-"), r.get("seconds", "-"),
                     (r.get("nodes") or {}).get("float32", "-"),
                     (r.get("native_cpu") or {}).get("passed", "-"), (r.get("emulate") or {}).get("passed", "-")]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", "Errors and notes:", ""]
    for name, e in result["metrics"].get("models", {}).items():
        for side in ("ampconv", "occ", "occ_emulated_judge"):
            if e.get(side, {}).get("error"):
                lines.append(f"- {name} / {side}: {e[side]['status']}: {e[side]['error']}")
    memory = result["metrics"].get("memory")
    if memory:
        lines += ["", f"Memory ({memory['model']}):", "", "| samples | exit | peak RSS MiB | wall s |",
                  "|---|---|---|---|"]
        for count, run in memory["runs"].items():
            lines.append(f"| {count} | {run.get('rc')} | {run.get('peak_mib', '-')} | {run.get('wall_s', '-')} |")
    lines += ["", "| check | value | target | result | note |", "|---|---|---|---|---|"]
    for c in result["checks"]:
        lines.append(f"| {c['id']} | {c['value']} | {c['target']} | {'PASS' if c['passed'] else 'FAIL'} "
                     f"| {str(c.get('note', '')).replace('|', '/')} |")
    return "\n".join(lines) + "\n"


AMPCONV_LEVEL = "O3"  # the starting point of onnxconverter-common's search: every op fp16


def main(out_dir, samples: int = SAMPLES, models=None, occ_timeout_s: float = OCC_TIMEOUT_S,
         memory: bool = True) -> dict:
    """Run every model (or ``models``) and the memory check; write ``tune.json`` and ``tune.md``."""
    out = pathlib.Path(out_dir)
    work = out / "tmp" / "tune"
    work.mkdir(parents=True, exist_ok=True)
    result: dict = {"name": "tune", "checks": [], "errors": [],
                    "metrics": {"samples": samples, "tolerance": list(dm.TOLERANCE), "models": {}}}
    for name in models or list(dm.MODELS):
        print(f"[tune] {name} ...", flush=True)
        try:
            entry = measure_model(name, work, samples, occ_timeout_s)
            result["metrics"]["models"][name] = entry
            result["checks"] += model_checks(entry)
        except Exception as exc:  # noqa: BLE001 -- record, do not hide, a crash
            result["errors"].append({"section": name, "error": f"{type(exc).__name__}: {exc}"})
    if memory:
        print("[tune] memory ...", flush=True)
        try:
            info = measure_memory(work)
            result["metrics"]["memory"] = info
            result["checks"].append(memory_check(info))
        except Exception as exc:  # noqa: BLE001
            result["errors"].append({"section": "memory", "error": f"{type(exc).__name__}: {exc}"})
    (out / "tune.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "tune.md").write_text(render_markdown(result))
    return result


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--occ-child":
        src_, feed_, dst_, result_, rtol_, atol_, log_, judge_ = sys.argv[2:10]
        _occ_child(src_, feed_, dst_, result_, float(rtol_), float(atol_), log_, judge_)
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results", help="folder for tune.json, tune.md and tmp/")
    parser.add_argument("--samples", type=int, default=SAMPLES)
    parser.add_argument("--models", nargs="*", choices=sorted(dm.MODELS))
    parser.add_argument("--occ-timeout", type=float, default=OCC_TIMEOUT_S)
    parser.add_argument("--no-memory", action="store_true")
    args = parser.parse_args()
    res = main(args.out, args.samples, args.models, args.occ_timeout, not args.no_memory)
    print(json.dumps(res["checks"], indent=2))
