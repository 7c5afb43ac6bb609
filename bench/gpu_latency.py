"""GPU latency of float32 and of the float16/bfloat16 conversions: ``make bench-gpu``.

For each model and each batch size (1 and 16), times onnxruntime-gpu's CUDA
provider on these files:

- the float32 original,
- ampconv's O2 float16 conversion (``keep_io_types`` on, the default),
- ampconv's O2 bfloat16 conversion (deployment zoo models),
- onnxruntime's own ``onnxruntime.transformers.float16.convert_float_to_float16(keep_io_types=True)``
  (deployment zoo models),
- onnxconverter-common's ``convert_float_to_float16(keep_io_types=True)``,

and counts the Cast nodes of each and their traffic at that batch
(``bench/figures.py``). Models: the sample transformer, the sample CNN, a
6-layer GPT decoder of hidden size 1024 with external data, and the
deployment zoo of bench/deploy_models.py (BERT, GPT-2, ViT, a Whisper
encoder, MobileNetV3-small, the transformers also after onnxruntime's
transformer optimizer, a Q/DQ int8 CNN), each at its sample sequence length.
Latency is the median of ``--runs`` timed runs after ``--warmup`` runs,
inputs fixed per (model, batch) and seeded. A conversion or session that
fails is a row with its error, not a crash. Writes ``OUT/gpu_latency.json``
and ``OUT/gpu_latency.md``.

Where onnxruntime has no CUDA provider it says so and exits 2: the numbers
are never estimated on a CPU.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import statistics
import sys
import time
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.baseline import run_baseline  # noqa: E402
from bench.models import build_samples  # noqa: E402

BATCHES = (1, 16)
# Symbolic dimensions other than the batch, where a model names none (the samples).
OTHER_DIM = 16


def cuda_session(path: pathlib.Path):
    """A CUDA-provider session of ``path`` with default optimizations; raises when CUDA is absent."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RuntimeError(f"onnxruntime {ort.__version__} has no CUDA provider ({ort.get_available_providers()})")
    session = ort.InferenceSession(str(path), providers=["CUDAExecutionProvider"])
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"{path.name}: the CUDA provider was not used ({session.get_providers()})")
    return session


def feeds(session, batch: int, seed: int, dims: Optional[Mapping[str, int]] = None,
          ranges: Optional[Mapping[str, Tuple[float, float]]] = None) -> Dict[str, np.ndarray]:
    """Seeded inputs: the first (or ``batch``-named) symbolic dimension = ``batch``, others from
    ``dims`` (else 16); integers in ``ranges[name]`` (both ends, as the validator draws them) or
    token ids < 1000; floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    dims, ranges = dict(dims or {}), dict(ranges or {})
    out = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else batch if (i == 0 or d == "batch") else dims.get(d, OTHER_DIM)
                 for i, d in enumerate(arg.shape)]
        if "int" in arg.type:
            low, high = ranges.get(arg.name, (0, 999))
            out[arg.name] = rng.integers(math.ceil(low), math.floor(high), size=shape, endpoint=True).astype(np.int64)
        else:
            dtype = np.float16 if "float16" in arg.type else np.float32
            out[arg.name] = rng.standard_normal(shape).astype(dtype)
    return out


def latency_ms(session, inputs: Dict[str, np.ndarray], warmup: int, runs: int) -> float:
    """Median wall time of one ``session.run`` in milliseconds."""
    for _ in range(warmup):
        session.run(None, inputs)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, inputs)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class GpuModel:
    """A float32 model to time, with the sizes of its symbolic dimensions and its integer input ranges."""

    def __init__(self, name: str, path: pathlib.Path, dims: Mapping[str, int] = (),
                 ranges: Mapping[str, Tuple[float, float]] = (), zoo: bool = False) -> None:
        self.name, self.path, self.zoo = name, path, zoo
        self.dims, self.ranges = dict(dims), dict(ranges)


def build_models(work: pathlib.Path) -> List[GpuModel]:
    """The float32 models to time: the samples, a 6-layer GPT and the deployment zoo."""
    from sample_models import gpt

    samples = build_samples(work / "samples")
    models = [GpuModel("transformer", samples["transformer"]), GpuModel("cnn", samples["cnn"])]
    models.append(GpuModel("gpt6", gpt.build(work / "gpt6", gpt.GptSpec(layers=6, hidden=1024, vocab=32000),
                                             name="gpt6")))
    try:
        from bench.deploy_models import build_zoo
    except ImportError as exc:  # torch/transformers missing: time what exists, and say so
        print(f"bench-gpu: deployment zoo skipped ({exc}); `pip install -c constraints.txt -e .[bench]`",
              file=sys.stderr)
        return models
    for m in build_zoo(work / "zoo"):
        models.append(GpuModel(m.name, m.path, m.dims, m.input_ranges, zoo=True))
    return models


def convert_all(model: GpuModel, work: pathlib.Path) -> Dict[str, object]:
    """Variant -> file, or -> error text when that conversion failed (the row says so)."""
    import ampconv

    files: Dict[str, object] = {"float32": model.path}
    ours = work / f"{model.name}.ampconv.onnx"
    try:
        ampconv.convert(model.path, ours, ampconv.Config(level="O2", dtype="fp16", overwrite=True))
        files["ampconv O2 fp16"] = ours
    except Exception as exc:  # noqa: BLE001 -- one failed conversion is a row, not the end of the run
        files["ampconv O2 fp16"] = f"{type(exc).__name__}: {exc}"
    if model.zoo:
        from bench.bench_deploy import AMPCONV_BF16, ORT_TOOL, convert_variant

        for label, variant, tag in (("ampconv O2 bf16", AMPCONV_BF16, "ampconv-bf16"),
                                    ("ORT tool fp16", ORT_TOOL, "ort")):
            dst = work / f"{model.name}.{tag}.onnx"
            done = convert_variant(variant, model.path, dst)
            files[label] = dst if done["status"] == "ok" else f"{done['status']}: {done.get('error', '')}"
    theirs = work / f"{model.name}.occ.onnx"
    result = run_baseline(model.path, theirs, timeout_s=1800)
    files["onnxconverter-common fp16"] = theirs if result["status"] == "ok" else \
        f"{result['status']}: {result.get('error', '')}"
    return files


def measure(model: GpuModel, variant: str, path: object, batch: int, warmup: int, runs: int) -> dict:
    """One row: Casts, cast traffic at ``batch`` and the median CUDA latency, or the error."""
    row: dict = {"model": model.name, "batch": batch, "variant": variant}
    if not isinstance(path, pathlib.Path):
        return {**row, "error": str(path)[-300:]}
    from bench.figures import deploy_figures

    dims = {**model.dims, "batch": batch}
    try:
        figures = deploy_figures(path, dims)
        row.update(casts=figures.casts, cast_traffic_mb=round(figures.cast_traffic_bytes / 1e6, 3))
        session = cuda_session(path)
        row["ms"] = latency_ms(session, feeds(session, batch, seed=batch, dims=dims, ranges=model.ranges),
                               warmup, runs)
        del session
    except Exception as exc:  # noqa: BLE001 -- e.g. a kernel the CUDA provider lacks: a row, not a crash
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return row


def render(rows: List[dict], device: str) -> str:
    """The Markdown table of ``rows``."""
    lines = [
        "# GPU latency (onnxruntime CUDA provider)",
        "",
        f"Device: {device}",
        "",
        "| model | batch | variant | Casts | cast traffic MB | median ms | speed-up vs float32 |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        if "ms" not in row:
            error = str(row.get("error", "")).replace("|", "/").replace("\n", " ")[:160]
            lines.append(f"| {row['model']} | {row['batch']} | {row['variant']} | {row.get('casts', '-')} | "
                         f"{row.get('cast_traffic_mb', '-')} | failed: {error} | - |")
            continue
        speedup = f"{row['speedup']:.2f}x" if row.get("speedup") else "-"
        lines.append(
            f"| {row['model']} | {row['batch']} | {row['variant']} | {row['casts']} | "
            f"{row['cast_traffic_mb']:.3f} | {row['ms']:.3f} | {speedup} |"
        )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """Entry point; exit 2 when no CUDA provider is available."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench" / "results")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args(argv)
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        print(
            f"bench-gpu: onnxruntime {ort.__version__} has no CUDA provider on this machine "
            f"(available: {', '.join(ort.get_available_providers())}); nothing measured",
            file=sys.stderr,
        )
        return 2
    work = args.out / "tmp" / "gpu_latency"
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in build_models(work):
        files = convert_all(model, work)
        for batch in BATCHES:
            base_ms = None
            for variant, path in files.items():
                row = measure(model, variant, path, batch, args.warmup, args.runs)
                if variant == "float32":
                    base_ms = row.get("ms")
                if "ms" in row:
                    row["speedup"] = base_ms / row["ms"] if base_ms else None
                rows.append(row)
    device = ort.get_device()
    try:
        import subprocess

        device = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.strip() or device
    except OSError:
        pass
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_latency.json").write_text(json.dumps({"device": device, "rows": rows}, indent=2) + "\n")
    (args.out / "gpu_latency.md").write_text(render(rows, device))
    print(render(rows, device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
