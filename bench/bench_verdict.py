"""Does the default validation verdict agree with ground truth on real published models? (issue 22)

``main(out_dir) -> dict`` (what bench/run_all.py calls) or
``python bench/bench_verdict.py --out DIR [--models rapidocr_det silero_vad] [--cache DIR]``.

Models: ``bench/real_models.py`` (ONNX files shipped inside pinned PyPI
wheels, each with a realistic sample input). Per model, three conversions:

- ``ampconv fp16`` / ``ampconv bf16``: ``ampconv.convert(src, dst, Config(dtype=...))``, defaults otherwise;
- ``occ fp16``: onnxconverter-common ``convert_float_to_float16(model, keep_io_types=True)`` in a child
  process (``bench/baseline.py``; a crash or a time-out is recorded).

Each converted model is validated twice with the default criteria,
``ampconv.validate(src, dst, ValidateOptions(backend="emulate", ...))``: on
the realistic sample (``inputs=(npz,)``) and on default seeded random inputs
(no ``inputs``; ``shapes`` fixes the dims to the sample's, so only the values
differ). Ground truth is computed here, from the very arrays that validation
compared (its runner's ``run`` is wrapped to keep them), by a rule independent
of ampconv's criteria. An output *agrees* when:

- an output read by its task (an argmax, a threshold: below) is judged by
  that task alone (issue 30: "the default verdict agrees with the task
  metric"); any other output by its cosine similarity with the float32
  reference, >= 0.999 (a NaN/Inf where the reference is finite makes it NaN,
  which fails). Issue 22's truth asked the cosine of every output; it is
  kept beside (``issue22_agrees``) and counted in the summary;
- where the output is read by argmax (``OutputSpec.class_axis``: class
  probabilities, per-frame characters, per-step tokens, per-anchor classes),
  every row whose reference top-2 are not a near tie keeps its argmax (for a
  detector's class scores, ``threshold`` set too, only the rows whose top
  score passes the threshold: the anchors that become boxes);
- where a small output (under ``FEW`` = 16 elements) is read against a
  threshold (``OutputSpec.threshold``: a speech or wake-word probability),
  every element not within a near tie of the threshold keeps its side: the
  cosine of a 1-element output is 1 whenever the signs agree, so its decision
  is the figure that means something. On a larger thresholded output (a text
  probability map) the thresholded area is the decision: its IoU with the
  reference's must be >= ``AREA_IOU`` (0.9) on every sample (a map's steep
  edges move a few pixels across any threshold under rounding alone; the
  package traces boxes around the area). A detector's per-anchor scores
  (``class_axis`` too) are judged by their argmax rows;
- integer outputs match exactly.

A near tie is a gap under ``TIE`` (1%) of the larger of the value's magnitude
and the output's RMS (top-1 - top-2 for a row, ``|ref - threshold|`` for a
decision): rounding may swap such a pair without changing what the model says.
The conversion agrees when every output does. The check per (model, converter,
inputs) is ``verdict == ground truth``. A converted model that validation
refuses counts as a correct fail when onnxruntime cannot load it either.

Writes ``OUT/verdict.json`` (everything, ``result.to_dict()`` of every
validation included) and ``OUT/verdict.md`` (a summary, then a table per model).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import pathlib
import sys
import time
import traceback
from collections.abc import Iterator, Sequence

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np

from bench import real_models
from bench.baseline import run_baseline
from bench.real_models import OutputSpec, RealModel

AMPCONV_FP16, AMPCONV_BF16, OCC_FP16 = "ampconv fp16", "ampconv bf16", "occ fp16"
CONVERTERS = (AMPCONV_FP16, AMPCONV_BF16, OCC_FP16)
REAL, RANDOM = "real", "random"
INPUT_MODES = (REAL, RANDOM)
COSINE_MIN = 0.999  # issue 22's bar for "the conversion keeps the output"
TIE = 0.01  # a gap under 1% of the magnitude is a near tie (see the module docstring)
FEW = 16  # outputs smaller than this are judged by their thresholded decisions (ampconv skips cosine there too)
AREA_IOU = 0.9  # a larger thresholded output (a map): the area over the threshold, IoU with the reference's
OCC_TIMEOUT_S = 300.0
TIME_BUDGET_S = 900.0  # the whole bench on 2 cores, wheels cached
CACHE_ENV = "AMPCONV_REAL_MODELS_CACHE"


# --- ground truth --------------------------------------------------------------------------------


def cosine(ref: np.ndarray, conv: np.ndarray) -> float:
    """Cosine of the flattened outputs over elements finite in both; NaN when one has a NaN/Inf the other lacks.

    Matched non-finite values (the same infinity, NaN in both) are left out; 1 when both are all zero.
    """
    r = np.asarray(ref, dtype=np.float64).ravel()
    c = np.asarray(conv, dtype=np.float64).ravel()
    finite_r, finite_c = np.isfinite(r), np.isfinite(c)
    matched = (r == c) | (np.isnan(r) & np.isnan(c))
    if np.any((finite_r != finite_c) | (~finite_r & ~finite_c & ~matched)):
        return math.nan
    r, c = r[finite_r], c[finite_r]
    norm = float(np.linalg.norm(r) * np.linalg.norm(c))
    if norm == 0.0:
        return 1.0 if not np.any(r) and not np.any(c) else 0.0
    return float(np.dot(r, c) / norm)


def _rms(array: np.ndarray) -> float:
    finite = array[np.isfinite(array)]
    return float(np.sqrt(np.mean(finite ** 2))) if finite.size else 0.0


def label_figures(ref: np.ndarray, conv: np.ndarray, axis: int, floor: float | None = None) -> dict[str, object]:
    """Argmax agreement along ``axis`` on rows whose reference top-2 gap is not a near tie.

    ``floor``: only rows whose reference top-1 exceeds it count (a detector
    keeps only anchors over its score threshold; the class of a background
    anchor is never read). ``largest_flipped_gap``: the largest gap among
    counted rows that flipped, relative to ``max(|top1|, output RMS)``: how
    clear the clearest flipped row was.
    """
    r = np.moveaxis(np.asarray(ref, dtype=np.float64), axis, -1)
    c = np.moveaxis(np.asarray(conv, dtype=np.float64), axis, -1)
    if r.shape[-1] < 2:
        return {"rows": 0, "clear_rows": 0, "flipped_clear": 0, "flipped_all": 0, "largest_flipped_gap": None}
    r, c = r.reshape(-1, r.shape[-1]), c.reshape(-1, c.shape[-1])
    top2 = np.sort(np.where(np.isfinite(r), r, -np.inf), axis=-1)[:, -2:]
    scale = np.maximum(np.abs(top2[:, 1]), _rms(r))
    with np.errstate(invalid="ignore", divide="ignore"):
        gap = (top2[:, 1] - top2[:, 0]) / np.where(scale > 0, scale, 1.0)
    kept = top2[:, 1] > floor if floor is not None else np.ones(r.shape[0], dtype=bool)
    flipped = (np.argmax(r, axis=-1) != np.argmax(np.where(np.isnan(c), -np.inf, c), axis=-1)) & kept
    clear = (gap > TIE) & kept
    return {
        "rows": int(np.count_nonzero(kept)),
        "clear_rows": int(np.count_nonzero(clear)),
        "flipped_clear": int(np.count_nonzero(flipped & clear)),
        "flipped_all": int(np.count_nonzero(flipped)),
        "largest_flipped_gap": float(np.max(gap[flipped])) if np.any(flipped) else None,
    }


def decision_figures(ref: np.ndarray, conv: np.ndarray, threshold: float) -> dict[str, object]:
    """Elements on the other side of ``threshold`` after conversion, outside the near-tie band around it."""
    r = np.asarray(ref, dtype=np.float64).ravel()
    c = np.asarray(conv, dtype=np.float64).ravel()
    band = TIE * max(abs(threshold), _rms(r))
    flipped = (r > threshold) != (c > threshold)
    clear = np.abs(r - threshold) > band
    return {
        "elements": int(r.size),
        "clear_elements": int(np.count_nonzero(clear)),
        "flipped_clear": int(np.count_nonzero(flipped & clear)),
        "flipped_all": int(np.count_nonzero(flipped)),
        "band": band,
    }


def output_truth(spec: OutputSpec, pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict[str, object]:
    """Ground truth for one output over its samples (reference, converted): figures, ``agrees`` and why not."""
    if any(r.shape != c.shape for r, c in pairs):
        return {"agrees": False, "why": "shapes differ: " + ", ".join(f"{r.shape} vs {c.shape}" for r, c in pairs)}
    if not all(np.issubdtype(r.dtype, np.floating) for r, _ in pairs):
        equal = all(np.array_equal(r, c) for r, c in pairs)
        return {"agrees": equal, "exact": equal, "why": "" if equal else "integer output differs"}
    figures: dict[str, object] = {"cosine": min((cosine(r, c) for r, c in pairs), key=_nan_first),
                                  "max_abs": _max_abs(pairs), "rms": max(_rms(np.asarray(r)) for r, _ in pairs)}
    why = []
    low_cosine = not figures["cosine"] >= COSINE_MIN  # NaN fails too
    read_by_task = spec.class_axis is not None or spec.threshold is not None
    if low_cosine and (not read_by_task or math.isnan(figures["cosine"])):
        why.append(f"cosine {figures['cosine']:.6f} < {COSINE_MIN}")
    if spec.class_axis is not None:
        figures["labels"] = _merge([label_figures(r, c, spec.class_axis, spec.threshold) for r, c in pairs])
        if figures["labels"]["flipped_clear"]:
            why.append(f"{figures['labels']['flipped_clear']} of {figures['labels']['clear_rows']} clear rows "
                       "changed argmax")
    if spec.threshold is not None:
        figures["decisions"] = _merge([decision_figures(r, c, spec.threshold) for r, c in pairs])
        figures["decisions"]["counted"] = all(r.size < FEW for r, _ in pairs)
        if figures["decisions"]["counted"] and figures["decisions"]["flipped_clear"]:
            why.append(f"{figures['decisions']['flipped_clear']} of {figures['decisions']['clear_elements']} "
                       f"clear elements crossed {spec.threshold}")
        if spec.class_axis is None and not figures["decisions"]["counted"]:
            figures["area_iou"] = min(area_iou(r, c, spec.threshold) for r, c in pairs)
            if not figures["area_iou"] >= AREA_IOU:
                why.append(f"area over {spec.threshold}: IoU {figures['area_iou']:.3f} < {AREA_IOU}")
    old = list(why) + ([f"cosine {figures['cosine']:.6f} < {COSINE_MIN}"] if low_cosine and read_by_task else [])
    return {**figures, "agrees": not why, "why": "; ".join(why), "issue22_agrees": not old}


def area_iou(ref: np.ndarray, conv: np.ndarray, threshold: float) -> float:
    """IoU of the elements over ``threshold`` in the reference and in the converted output (1 when both empty)."""
    r = np.asarray(ref, dtype=np.float64) > threshold
    c = np.asarray(conv, dtype=np.float64) > threshold
    union = int(np.count_nonzero(r | c))
    return int(np.count_nonzero(r & c)) / union if union else 1.0


def _nan_first(value: float) -> float:
    return -math.inf if math.isnan(value) else value


def _max_abs(pairs) -> float:
    with np.errstate(invalid="ignore"):
        worst = max(float(np.max(np.abs(np.asarray(c, np.float64) - np.asarray(r, np.float64)), initial=0.0))
                    for r, c in pairs)
    return math.inf if math.isnan(worst) else worst


def _merge(per_sample: list[dict]) -> dict:
    """Sum counts over samples; keep the largest of the other figures."""
    merged = {}
    for key in per_sample[0]:
        values = [d[key] for d in per_sample if d[key] is not None]
        if not values:
            merged[key] = None
        elif all(isinstance(v, int) for v in values):
            merged[key] = sum(values)
        else:
            merged[key] = max(values)
    return merged


# --- running -------------------------------------------------------------------------------------


@contextlib.contextmanager
def captured_runs() -> Iterator[dict[str, list[dict]]]:
    """Keep every output dict validation's runners return, by runner label ("reference model", "converted model").

    The arrays ground truth reads are then exactly those the verdict read.
    """
    from ampconv.numerics import runners

    original = runners.Runner.run
    record: dict[str, list[dict]] = {}

    def run(self, sample, names=None):
        outputs = original(self, sample, names)
        record.setdefault(self.label, []).append(outputs)
        return outputs

    runners.Runner.run = run
    try:
        yield record
    finally:
        runners.Runner.run = original


def convert(model_path: pathlib.Path, converter: str, dst: pathlib.Path) -> dict[str, object]:
    """One conversion; ``{"status": "ok" | "failed" | "timed out", "seconds", "error"}``, never raises."""
    if dst.exists():
        dst.unlink()  # a file left by an earlier run must not pass for this run's output
    outcome = _convert(model_path, converter, dst)
    if outcome["status"] == "ok" and not dst.exists():
        return {**outcome, "status": "failed", "error": f"reported success but wrote no {dst.name}"}
    return outcome


def _convert(model_path: pathlib.Path, converter: str, dst: pathlib.Path) -> dict[str, object]:
    start = time.perf_counter()
    if converter == OCC_FP16:
        outcome = run_baseline(model_path, dst, OCC_TIMEOUT_S)
        return {**outcome, "seconds": round(time.perf_counter() - start, 2)}
    import ampconv

    dtype = "bf16" if converter == AMPCONV_BF16 else "fp16"
    try:
        report = ampconv.convert(str(model_path), str(dst), ampconv.Config(dtype=dtype, overwrite=True))
    except Exception as exc:  # noqa: BLE001 -- a failed conversion is a result, not the end of the bench
        return {"status": "failed", "seconds": round(time.perf_counter() - start, 2), "error": _one_line(exc)}
    # How much went LOW: a verdict on a conversion that lowered nothing says little.
    precisions = [d.get("precision") for d in report.decisions_by_node().values()]
    return {"status": "ok", "seconds": round(time.perf_counter() - start, 2),
            "nodes_low": precisions.count("LOW"), "nodes_high": precisions.count("HIGH")}


def validate_and_judge(model: RealModel, src: pathlib.Path, dst: pathlib.Path, mode: str,
                       npz: pathlib.Path) -> dict[str, object]:
    """Validate ``dst`` against ``src`` on the realistic or random inputs; add ground truth per output."""
    import ampconv
    from ampconv.validation import ValidateOptions

    if mode == REAL:
        options = ValidateOptions(backend="emulate", inputs=(str(npz),))
    else:
        shapes = tuple((name, tuple(a.shape)) for name, a in np.load(npz).items() if a.ndim)
        options = ValidateOptions(backend="emulate", shapes=shapes, input_ranges=model.random_ranges)
    start = time.perf_counter()
    with captured_runs() as runs:
        try:
            result = ampconv.validate(str(src), str(dst), options)
        except Exception as exc:  # noqa: BLE001 -- a refusal is a verdict to compare with the truth
            return _refused(dst, exc, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    entry = {"verdict": "pass" if result.passed else "fail", "seconds": round(seconds, 2),
             "validation": result.to_dict(), "outputs": {}}
    references, converted = runs.get("reference model", []), runs.get("converted model", [])
    for out in result.outputs:
        spec = model.output(out.name)
        pairs = [(r[out.name], c[out.name]) for r, c in zip(references, converted) if out.name in r and out.name in c]
        truth = output_truth(spec, pairs) if pairs else _truth_from_figures(out)
        entry["outputs"][out.name] = {"verdict": "pass" if out.passed else "fail", "decided_by": out.decided_by,
                                      "ampconv": _ampconv_figures(out), "truth": truth}
    entry["truth"] = "pass" if all(o["truth"]["agrees"] for o in entry["outputs"].values()) else "fail"
    entry["agrees"] = entry["verdict"] == entry["truth"]
    old_truth = all(o["truth"].get("issue22_agrees", o["truth"]["agrees"]) for o in entry["outputs"].values())
    entry["issue22_agrees"] = entry["verdict"] == ("pass" if old_truth else "fail")
    return entry


def _refused(dst: pathlib.Path, exc: Exception, seconds: float) -> dict[str, object]:
    """Validation raised: a correct fail when onnxruntime cannot load the model either, else n/a.

    ``agrees`` is None (n/a) when the converted model loads (the inputs may not
    suit the model: the reference itself can fail on them) or when the load
    error is a missing CPU kernel (bfloat16), which says nothing of the model.
    """
    load_error = ort_load_error(dst)
    broken = load_error is not None and "Could not find an implementation" not in load_error
    return {"verdict": "refused", "seconds": round(seconds, 2), "error": _one_line(exc),
            "truth": "fail" if broken else "unknown", "load_error": load_error,
            "agrees": True if broken else None, "outputs": {}}


def ort_load_error(path: pathlib.Path) -> str | None:
    """Why onnxruntime's CPU provider cannot load ``path`` (default optimizations), or None when it loads."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 4
    try:
        onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 -- onnxruntime raises its own untyped errors
        return _one_line(exc)
    return None


def _truth_from_figures(out) -> dict[str, object]:
    """Fallback when no arrays were captured (validation's internals changed): ampconv's own cosine and top-1."""
    worst = out.worst
    if worst is None:
        return {"agrees": False, "why": f"no figures: {out.error}", "source": "none"}
    agrees = worst.cosine >= COSINE_MIN and (worst.top1 is None or worst.top1 == 1.0)
    return {"cosine": worst.cosine, "max_abs": worst.max_abs, "agrees": agrees, "source": "validate figures",
            "why": "" if agrees else f"cosine {worst.cosine:.6f}, top-1 {worst.top1}"}


def _ampconv_figures(out) -> dict[str, object]:
    """The figures validation reported for one output (its worst sample)."""
    worst = out.worst
    if worst is None:
        return {"error": out.error}
    keys = ("cosine", "max_abs", "scale", "scaled_p99_error", "scaled_max_error", "label_agreement", "clear_rows",
            "top1", "new_nonfinite", "criterion", "severity", "floor_ratio")
    return {k: getattr(worst, k, None) for k in keys}


def _one_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:600]


def run_model(model: RealModel, work: pathlib.Path, cache: pathlib.Path) -> dict[str, object]:
    """Fetch, build the sample, convert three ways, validate each on both input sets."""
    src = real_models.fetch(model, cache)
    npz = real_models.write_inputs(model, cache, work / "inputs")
    entry = {"model": real_models.describe(model, src), "inputs": _input_summary(npz),
             "float32_floor": float32_floor(src, npz), "conversions": {}}
    for converter in CONVERTERS:
        dst = work / "converted" / f"{model.key}.{converter.replace(' ', '_')}.onnx"
        dst.parent.mkdir(parents=True, exist_ok=True)
        done = convert(src, converter, dst)
        runs = {}
        if done["status"] == "ok":
            for mode in INPUT_MODES:
                runs[mode] = validate_and_judge(model, src, dst, mode, npz)
        entry["conversions"][converter] = {"convert": done, "validations": runs}
    return entry


def float32_floor(src: pathlib.Path, npz: pathlib.Path) -> dict[str, dict[str, float]]:
    """Per output, how far onnxruntime's own optimized float32 run lies from the unoptimized one (real inputs).

    Fusions and kernel choices reorder float32 arithmetic; what that moves is
    drift no precision change causes, a yardstick for the conversions' figures
    (a dynamically quantized model can move a whole quantization step).
    """
    import onnxruntime

    with np.load(npz) as data:
        feeds = dict(data.items())
    runs = []
    for level in (onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL, onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL):
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = level
        options.log_severity_level = 4
        session = onnxruntime.InferenceSession(str(src), sess_options=options, providers=["CPUExecutionProvider"])
        runs.append(dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds))))
    return {name: {"max_abs": _max_abs([(ref, runs[1][name])]), "cosine": cosine(ref, runs[1][name]),
                   "rms": _rms(np.asarray(ref, np.float64))}
            for name, ref in runs[0].items() if np.issubdtype(ref.dtype, np.floating)}


def _input_summary(npz: pathlib.Path) -> dict[str, object]:
    with np.load(npz) as data:
        return {name: {"shape": list(a.shape), "dtype": a.dtype.name, "min": float(a.min()), "max": float(a.max())}
                for name, a in data.items()}


# --- checks and report ---------------------------------------------------------------------------


def model_checks(key: str, entry: dict) -> list[dict[str, object]]:
    """One check per (converter, inputs) that validated: the verdict equals the ground truth."""
    checks = []
    for converter, conv in entry["conversions"].items():
        for mode, run in conv["validations"].items():
            failing = [f"{name}: {o['decided_by']} / truth: {o['truth'].get('why') or 'agrees'}"
                       for name, o in run["outputs"].items() if o["verdict"] != ("pass" if o["truth"]["agrees"]
                                                                                else "fail")]
            # n/a (no truth to compare) shows as passed with the reason in the note, as bench_tune does.
            note = "; ".join(failing) if run.get("error") is None else run["error"]
            checks.append({
                "id": f"{key}_{converter.replace(' ', '_')}_{mode}_verdict_agrees",
                "description": f"{key}, {converter}, {mode} inputs: default verdict equals ground truth",
                "value": f"verdict {run['verdict']}, truth {run['truth']}",
                "unit": "",
                "target": "verdict == truth",
                "passed": run["agrees"] is not False,
                "note": f"n/a: {note}" if run["agrees"] is None else note,
            })
    return checks


def main(out_dir, models: Sequence[str] | None = None, cache: os.PathLike | None = None) -> dict[str, object]:
    """Run every model of ``real_models.MODELS`` (or those named); write verdict.json and verdict.md."""
    out = pathlib.Path(out_dir)
    work = out / "tmp" / "verdict"
    cache = pathlib.Path(cache or os.environ.get(CACHE_ENV) or out / "tmp" / "real_models")
    start = time.perf_counter()
    result: dict[str, object] = {"name": "verdict", "checks": [], "errors": [], "metrics": {"models": {}}}
    for model in real_models.MODELS:
        if models and model.key not in models:
            continue
        model_start = time.perf_counter()
        try:
            entry = run_model(model, work, cache)
            entry["seconds"] = round(time.perf_counter() - model_start, 1)
            result["metrics"]["models"][model.key] = entry
            result["checks"] += model_checks(model.key, entry)
            result["errors"] += _conversion_errors(model.key, entry)
        except Exception as exc:  # noqa: BLE001 -- one model's failure must not hide the others
            result["errors"].append({"section": model.key, "error": _one_line(exc),
                                     "traceback": traceback.format_exc()[-3000:]})
    seconds = round(time.perf_counter() - start, 1)
    result["metrics"]["seconds"] = seconds
    result["metrics"]["summary"] = summarize(result)
    if not models:
        result["checks"].append({"id": "verdict_bench_seconds", "description": "whole bench, wheels cached",
                                 "value": seconds, "unit": "s", "target": f"< {TIME_BUDGET_S:g} s",
                                 "passed": seconds < TIME_BUDGET_S, "note": "includes downloads on a first run"})
    (out / "verdict.json").write_text(json.dumps(result, indent=2, default=_jsonable) + "\n")
    (out / "verdict.md").write_text(render_markdown(result))
    return result


def _conversion_errors(key: str, entry: dict) -> list[dict[str, str]]:
    return [{"section": f"{key} {converter}", "error": f"conversion {c['convert']['status']}: "
             f"{c['convert'].get('error', '')}"[:1000]}
            for converter, c in entry["conversions"].items() if c["convert"]["status"] != "ok"]


def summarize(result: dict) -> dict[str, object]:
    """Counts of agreeing verdicts per converter and input set, and how often random inputs predicted the real verdict."""
    counts: dict[str, dict[str, int]] = {}
    random_vs_real = {"same_truth": 0, "compared": 0}
    for entry in result["metrics"]["models"].values():
        for converter, conv in entry["conversions"].items():
            runs = conv["validations"]
            for mode, run in runs.items():
                slot = counts.setdefault(f"{converter}, {mode}", {"agree": 0, "disagree": 0, "n/a": 0,
                                                                 "issue22_agree": 0})
                slot[{True: "agree", False: "disagree", None: "n/a"}[run["agrees"]]] += 1
                slot["issue22_agree"] += int(run.get("issue22_agrees", run["agrees"]) is True)
            if REAL in runs and RANDOM in runs:
                if runs[REAL]["truth"] != "unknown" and runs[RANDOM]["verdict"] != "refused":
                    random_vs_real["compared"] += 1
                    random_vs_real["same_truth"] += int(runs[RANDOM]["verdict"] == runs[REAL]["truth"])
    return {"agreement": counts, "random_verdict_matches_real_truth": random_vs_real}


def _jsonable(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)


def _fmt(value, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def _cos(value) -> str:
    return "-" if value is None else ("nan" if isinstance(value, float) and math.isnan(value) else f"{value:.6f}")


def _labels_text(truth: dict) -> str:
    parts = []
    labels, decisions = truth.get("labels"), truth.get("decisions")
    if labels:
        text = f"{labels['clear_rows'] - labels['flipped_clear']}/{labels['clear_rows']} clear rows"
        if labels["flipped_all"]:
            text += f" ({labels['flipped_all']} flips, clearest gap {_fmt(labels['largest_flipped_gap'], 2)})"
        parts.append(text)
    if decisions:
        text = f"{decisions['clear_elements'] - decisions['flipped_clear']}/{decisions['clear_elements']} decisions"
        if decisions["flipped_all"]:
            text += f" ({decisions['flipped_all']} cross)"
        parts.append(text if decisions.get("counted") else f"[{text}]")
    return "; ".join(parts) or "-"


def render_markdown(result: dict) -> str:
    """verdict.md: the agreement summary, then per model its facts and one row per output and run."""
    lines = ["# Default verdict vs ground truth on real published models", "",
             f"{len(result['metrics']['models'])} models, {result['metrics']['seconds']} s. Ground truth, the "
             f"task: argmax kept on clear rows, thresholded decisions kept on clear elements of outputs under {FEW} "
             f"elements, the area over a larger output's threshold at IoU >= {AREA_IOU:g} (near tie: gap < "
             f"{TIE:g} of the magnitude); cosine >= {COSINE_MIN} only for outputs no task reads; "
             "bench/bench_verdict.py says how. Decisions of larger outputs are shown in brackets. Issue 22's "
             f"truth (cosine >= {COSINE_MIN} on every output too) is counted in the last column.", "",
             "| converter, inputs | verdict agrees with truth | disagrees | n/a (validation could not run) "
             "| agrees with issue 22's truth |",
             "|---|---|---|---|---|"]
    for name, slot in result["metrics"]["summary"]["agreement"].items():
        lines.append(f"| {name} | {slot['agree']} | {slot['disagree']} | {slot['n/a']} | {slot['issue22_agree']} |")
    rvr = result["metrics"]["summary"]["random_verdict_matches_real_truth"]
    lines += ["", f"Random-input verdict equals the real-input truth in {rvr['same_truth']} of {rvr['compared']} "
              "conversions.", ""]
    lines += _disagreements(result)
    for error in result["errors"]:
        lines.append(f"- error, {error['section']}: {error['error']}")
    for key, entry in result["metrics"]["models"].items():
        lines += _model_section(key, entry)
    return "\n".join(lines) + "\n"


def _disagreements(result: dict) -> list[str]:
    """One row per output whose verdict differs from its truth, and one per run validation could not do."""
    rows, refused = [], []
    for key, entry in result["metrics"]["models"].items():
        for converter, conv in entry["conversions"].items():
            for mode, run in conv["validations"].items():
                if run["agrees"] is None:
                    refused.append(f"- {key}, {converter}, {mode}: {_cell(run.get('error', ''))[:300]}")
                for name, out in run["outputs"].items():
                    truth, figures = out["truth"], out["ampconv"]
                    if (out["verdict"] == "pass") == truth["agrees"]:
                        continue
                    rows.append(f"| {key} | {converter} | {mode} | `{name}` | {out['verdict']}: "
                                f"{_cell(out['decided_by'] or '')} | {_cos(truth.get('cosine'))} | "
                                f"{_labels_text(truth)} | {_fmt(truth.get('max_abs'), 2)} | "
                                f"{_fmt(figures.get('scale'), 2)} | "
                                f"{'pass' if truth['agrees'] else 'fail: ' + _cell(truth['why'])} |")
    lines = ["## Disagreements", ""]
    if rows:
        lines += ["| model | converter | inputs | output | verdict | cosine | labels / decisions | max abs | scale | "
                  "truth |", "|" + "---|" * 10] + rows
    else:
        lines.append("None.")
    if refused:
        lines += ["", "Validation could not run (n/a):", ""] + refused
    return lines + [""]


def _model_section(key: str, entry: dict) -> list[str]:
    info = entry["model"]
    flow = ", ".join(f"{op} x{n}" for op, n in info["control_flow"].items()) or "none"
    lines = ["", f"## {key}: {info['what']}", "",
             f"{info['package']}=={info['version']} `{info['file']}`, {info['bytes'] / 1e6:.1f} MB, "
             f"{info['nodes']} nodes, control flow: {flow}. Feed: {info['feed']}.", ""]
    lines += [f"- `{name}`: {meaning}" for name, meaning in info["output_meanings"].items()]
    lines += ["", "Conversions: " + "; ".join(_conversion_text(name, conv["convert"])
                                             for name, conv in entry["conversions"].items()) + "."]
    lines += ["", "float32 floor (onnxruntime optimized vs unoptimized float32, real inputs): " + "; ".join(
        f"`{name}` max abs {_fmt(f['max_abs'], 2)}, cosine {_cos(f['cosine'])}"
        for name, f in entry.get("float32_floor", {}).items()) + "."]
    lines += ["", "| converter | inputs | output | meaning | verdict | decided by | cosine | labels / decisions "
              "| max abs | scale | truth | agrees | validate s |", "|" + "---|" * 13]
    for converter, conv in entry["conversions"].items():
        if conv["convert"]["status"] != "ok":
            lines.append(f"| {converter} | - | - | - | conversion {conv['convert']['status']} | "
                         f"{_cell(conv['convert'].get('error', ''))} | | | | | | | |")
            continue
        for mode, run in conv["validations"].items():
            if not run["outputs"]:
                lines.append(f"| {converter} | {mode} | - | - | {run['verdict']} | {_cell(run.get('error', ''))} | "
                             f"| | | | {run['truth']} | {_yes_no(run['agrees'])} | {run['seconds']} |")
            for name, out in run["outputs"].items():
                truth, figures = out["truth"], out["ampconv"]
                agrees = out["verdict"] == ("pass" if truth["agrees"] else "fail")
                lines.append(
                    f"| {converter} | {mode} | `{name}` | {_cell(info['output_meanings'].get(name, '?').split(';')[0])}"
                    f" | {out['verdict']} | {_cell(out['decided_by'] or '')} | {_cos(truth.get('cosine'))} | "
                    f"{_labels_text(truth)} | {_fmt(truth.get('max_abs'), 2)} | {_fmt(figures.get('scale'), 2)} | "
                    f"{'pass' if truth['agrees'] else 'fail: ' + _cell(truth['why'])} | {'yes' if agrees else 'NO'} | "
                    f"{run['seconds']} |")
    return lines


def _conversion_text(name: str, done: dict) -> str:
    text = f"{name} {done['status']} in {done.get('seconds')} s"
    if "nodes_low" in done:
        text += f" ({done['nodes_low']} nodes LOW, {done['nodes_high']} HIGH)"
    return text


def _yes_no(agrees: bool | None) -> str:
    return {True: "yes", False: "NO", None: "n/a"}[agrees]


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results", help="folder for verdict.json, verdict.md and tmp/")
    parser.add_argument("--models", nargs="*", help="keys of bench/real_models.py MODELS (default: all)")
    parser.add_argument("--cache", help=f"wheel and model cache (default: ${CACHE_ENV} or OUT/tmp/real_models)")
    args = parser.parse_args()
    res = main(args.out, args.models, args.cache)
    failed = [c["id"] for c in res["checks"] if not c["passed"]]
    print(f"{len(res['checks']) - len(failed)} of {len(res['checks'])} checks passed; failed: {failed}")
    sys.exit(0 if not res["errors"] else 1)
