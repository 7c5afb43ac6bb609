"""GPU latency of float32, ampconv O2 fp16 and onnxconverter-common fp16: ``make bench-gpu``.

For each model (the sample transformer, the sample CNN and a 6-layer GPT
decoder of hidden size 1024 with external data) and each batch size (1 and 16),
times onnxruntime-gpu's CUDA provider on three files:

- the float32 original,
- ampconv's O2 float16 conversion (``keep_io_types`` on, the default),
- onnxconverter-common's ``convert_float_to_float16(keep_io_types=True)``,

and counts the Cast nodes of each. Latency is the median of ``--runs`` timed
runs after ``--warmup`` runs, inputs fixed per (model, batch) and seeded.
Writes ``OUT/gpu_latency.json`` and ``OUT/gpu_latency.md``.

Where onnxruntime has no CUDA provider it says so and exits 2: the numbers
are never estimated on a CPU.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time
from typing import Dict, List

import numpy as np
import onnx

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.baseline import run_baseline  # noqa: E402
from bench.models import build_samples  # noqa: E402

BATCHES = (1, 16)


def cuda_session(path: pathlib.Path):
    """A CUDA-provider session of ``path`` with default optimizations; raises when CUDA is absent."""
    import onnxruntime as ort

    if "CUDAExecutionProvider" not in ort.get_available_providers():
        raise RuntimeError(f"onnxruntime {ort.__version__} has no CUDA provider ({ort.get_available_providers()})")
    session = ort.InferenceSession(str(path), providers=["CUDAExecutionProvider"])
    if session.get_providers()[0] != "CUDAExecutionProvider":
        raise RuntimeError(f"{path.name}: the CUDA provider was not used ({session.get_providers()})")
    return session


def feeds(session, batch: int, seed: int) -> Dict[str, np.ndarray]:
    """Seeded inputs: symbolic first dimension = ``batch``, other symbolic dimensions 16 (token ids < 1000)."""
    rng = np.random.default_rng(seed)
    out = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else (batch if i == 0 else 16) for i, d in enumerate(arg.shape)]
        if "int" in arg.type:
            out[arg.name] = rng.integers(0, 1000, size=shape).astype(np.int64)
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


def count_casts(path: pathlib.Path) -> int:
    """Cast nodes in every graph of the model at ``path``."""
    model = onnx.load(str(path), load_external_data=False)
    stack, total = [model.graph], 0
    while stack:
        graph = stack.pop()
        for node in graph.node:
            total += node.op_type == "Cast"
            stack.extend(a.g for a in node.attribute if a.HasField("g"))
            stack.extend(g for a in node.attribute for g in a.graphs)
    return total


def build_models(work: pathlib.Path) -> Dict[str, pathlib.Path]:
    """The float32 models to time."""
    from sample_models import gpt

    samples = build_samples(work / "samples")
    models = {"transformer": samples["transformer"], "cnn": samples["cnn"]}
    models["gpt6"] = gpt.build(work / "gpt6", gpt.GptSpec(layers=6, hidden=1024, vocab=32000), name="gpt6")
    return models


def convert_all(name: str, src: pathlib.Path, work: pathlib.Path) -> Dict[str, pathlib.Path]:
    """float32, ampconv O2 fp16 and onnxconverter-common fp16 files of one model."""
    import ampconv

    files = {"float32": src}
    ours = work / f"{name}.ampconv.onnx"
    ampconv.convert(src, ours, ampconv.Config(level="O2", dtype="fp16", overwrite=True))
    files["ampconv O2 fp16"] = ours
    theirs = work / f"{name}.occ.onnx"
    result = run_baseline(src, theirs, timeout_s=1800)
    if result["status"] == "ok":
        files["onnxconverter-common fp16"] = theirs
    return files


def render(rows: List[dict], device: str) -> str:
    """The Markdown table of ``rows``."""
    lines = [
        "# GPU latency (onnxruntime CUDA provider)",
        "",
        f"Device: {device}",
        "",
        "| model | batch | variant | Casts | median ms | speed-up vs float32 |",
        "|---|---|---|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['batch']} | {row['variant']} | {row['casts']} | "
            f"{row['ms']:.3f} | {row['speedup']:.2f}x |"
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
    for name, src in build_models(work).items():
        files = convert_all(name, src, work)
        for batch in BATCHES:
            base_ms = None
            for variant, path in files.items():
                session = cuda_session(path)
                ms = latency_ms(session, feeds(session, batch, seed=batch), args.warmup, args.runs)
                base_ms = ms if variant == "float32" else base_ms
                rows.append(
                    {"model": name, "batch": batch, "variant": variant, "casts": count_casts(path),
                     "ms": ms, "speedup": (base_ms or ms) / ms}
                )
                del session
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
