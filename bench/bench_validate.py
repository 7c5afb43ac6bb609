"""Cost of emulated validation against float32 inference on the sample transformer.

``python bench/bench_validate.py --out bench/results/validate.json`` (a folder
works too: ``validate.json`` is written inside it; ``run_all.py`` calls ``main``).

Measured on the CPU provider, median of repeated runs after warm-up:

- ``fp32_s``: the float32 model with the runtime's default optimizations (as
  deployed) and ``fp32_noopt_s`` with optimizations off (as the reference runs);
- ``emulated_s``: the emulated copy of the O2 fp16 conversion, optimizations
  off (as validation runs it: a Cast pair after every LOW tensor).

Target (docs/validation.md / issue): emulated inference at most 3x float32
inference. The one-time cost (emulate + save + session) and one whole
``validate`` call are reported beside it.

Memory (issue 22): ``ampconv validate --samples N`` streams its samples, so
its peak resident memory must not grow with N. Two processes, N = 50 and
N = 500 (batch 32), each report their own peak; the growth must stay under
``MAX_GROWTH_MB`` (before streaming it was about 0.13 MB per sample).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TARGET_RATIO = 3.0
MAX_GROWTH_MB = 16.0
FEW_SAMPLES, MANY_SAMPLES = 50, 500


def _samples(out: pathlib.Path) -> dict:
    try:
        from bench.models import build_samples
    except ImportError:  # run as a script from another folder
        sys.path.insert(0, str(ROOT / "bench"))
        from models import build_samples
    return build_samples(out)


def _median_seconds(run, repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _session(path: str, optimize: bool):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])


def measure(work: pathlib.Path, batch: int = 8, repeats: int = 50) -> dict:
    """Convert the sample transformer at O2 fp16 and time fp32 vs emulated inference."""
    import onnx

    import ampconv
    from ampconv.validation import ValidateOptions, validate
    from ampconv.numerics import emulate, modelio

    src = _samples(work / "samples")["transformer"]
    dst = work / "transformer.fp16.onnx"
    ampconv.convert(str(src), str(dst), ampconv.Config(level="O2", dtype="fp16", overwrite=True))
    proto = onnx.load(str(src), load_external_data=False)
    shape = [d.dim_value or batch for d in proto.graph.input[0].type.tensor_type.shape.dim]
    feeds = {proto.graph.input[0].name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}

    start = time.perf_counter()
    model = modelio.load(str(dst))
    stats = emulate.emulate(model)
    with tempfile.TemporaryDirectory() as tmp:
        emulated_path = modelio.save_derived(model, tmp, "emulated", external=False)
        emulated = _session(emulated_path, optimize=False)
        prepare_s = time.perf_counter() - start
        fp32 = _session(str(src), optimize=True)
        fp32_noopt = _session(str(src), optimize=False)
        fp32_s = _median_seconds(lambda: fp32.run(None, feeds), repeats)
        fp32_noopt_s = _median_seconds(lambda: fp32_noopt.run(None, feeds), repeats)
        emulated_s = _median_seconds(lambda: emulated.run(None, feeds), repeats)
        emulated_nodes = len(onnx.load(emulated_path, load_external_data=False).graph.node)

    sym = {d.dim_param: (batch,) for d in proto.graph.input[0].type.tensor_type.shape.dim if d.dim_param}
    start = time.perf_counter()
    result = validate(str(src), str(dst), ValidateOptions(samples=1, shapes=sym))
    validate_s = time.perf_counter() - start
    return {
        "model": "sample transformer",
        "input_shape": shape,
        "nodes_fp32": len(proto.graph.node),
        "nodes_emulated": emulated_nodes,
        "rounded_tensors": stats.rounded,
        "fp32_s": fp32_s,
        "fp32_noopt_s": fp32_noopt_s,
        "emulated_s": emulated_s,
        "ratio_vs_fp32": emulated_s / fp32_s,
        "ratio_vs_fp32_noopt": emulated_s / fp32_noopt_s,
        "prepare_s": prepare_s,
        "validate_call_s": validate_s,
        "validate_passed": result.passed,
        "repeats": repeats,
    }


_PEAK_RSS = """
import resource, sys
from ampconv.validation import ValidateOptions, validate
result = validate(sys.argv[1], sys.argv[2], ValidateOptions(samples=int(sys.argv[3]), shapes={"batch": 32}))
print(result.samples, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_memory(work: pathlib.Path) -> dict:
    """Peak resident memory (MB) of one ``validate`` process per sample count, on the O2 fp16 transformer."""
    import subprocess

    src, dst = _samples(work / "samples")["transformer"], work / "transformer.fp16.onnx"
    peaks = {}
    for count in (FEW_SAMPLES, MANY_SAMPLES):
        done = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(src), str(dst), str(count)],
                              capture_output=True, text=True, check=True, cwd=ROOT)
        compared, kilobytes = (int(v) for v in done.stdout.split())
        assert compared == count, (compared, count)
        peaks[count] = kilobytes / 1024
    return {"peak_mb": {str(k): round(v, 1) for k, v in peaks.items()},
            "growth_mb": round(peaks[MANY_SAMPLES] - peaks[FEW_SAMPLES], 1)}


def main(out_dir, batch: int = 8, repeats: int = 50) -> dict:
    """Run the measurement; write ``validate.json`` into ``out_dir`` and return the result."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = {"name": "validate", "checks": [], "metrics": {}, "errors": []}
    try:
        metrics = measure(out / "tmp" / "validate", batch, repeats)
        result["metrics"] = metrics
        ratio = metrics["ratio_vs_fp32"]
        result["checks"].append({
            "id": "validate.emulate_vs_fp32",
            "description": "emulated fp16 inference time / float32 inference time (sample transformer, CPU)",
            "value": round(ratio, 3), "unit": "x", "target": f"<= {TARGET_RATIO:g}x",
            "passed": ratio <= TARGET_RATIO,
            "note": f"vs float32 with optimizations off: {metrics['ratio_vs_fp32_noopt']:.2f}x",
        })
    except Exception as exc:  # noqa: BLE001 -- record, do not hide, a crash
        result["errors"].append({"section": "measure", "error": f"{type(exc).__name__}: {exc}"})
    try:
        memory = peak_memory(out / "tmp" / "validate")
        result["metrics"]["memory"] = memory
        result["checks"].append({
            "id": "validate.memory_vs_samples",
            "description": f"peak memory growth of validate from {FEW_SAMPLES} to {MANY_SAMPLES} random samples "
                           "(sample transformer, batch 32)",
            "value": memory["growth_mb"], "unit": "MB", "target": f"< {MAX_GROWTH_MB:g} MB",
            "passed": memory["growth_mb"] < MAX_GROWTH_MB,
            "note": f"peaks {memory['peak_mb'][str(FEW_SAMPLES)]} MB and {memory['peak_mb'][str(MANY_SAMPLES)]} MB",
        })
    except Exception as exc:  # noqa: BLE001 -- record, do not hide, a crash
        result["errors"].append({"section": "memory", "error": f"{type(exc).__name__}: {exc}"})
    (out / "validate.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results/validate.json", help="JSON file or folder")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    target = pathlib.Path(args.out)
    if target.suffix == ".json":
        # Work files go to <folder>/tmp/validate (git-ignored under bench/results).
        res = main(target.parent, args.batch, args.repeats)
        target.write_text(json.dumps(res, indent=2) + "\n")
    else:
        res = main(target, args.batch, args.repeats)
    print(json.dumps(res, indent=2))
