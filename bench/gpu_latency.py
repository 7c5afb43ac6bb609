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
6-layer GPT decoder of hidden size 1024 with external data, the full-size
ViT-S/16 of bench/vit_model.py (legacy-exported LayerNorms; batch 1 only,
its reshapes are static), and the deployment zoo of bench/deploy_models.py
(BERT, GPT-2, ViT, a Whisper encoder, MobileNetV3-small, a ConvNeXt exported
at opset 14, the transformers also after onnxruntime's transformer optimizer,
a Q/DQ int8 CNN), each at its sample sequence length. Latency is the median
of ``--runs`` timed runs after ``--warmup`` runs, inputs fixed per (model,
batch) and seeded; one session per file serves both batches, and the
variants of a batch are timed in turn (``--rounds``), so drift falls on
all. A conversion or session that fails is a row with its error, not a
crash. Writes
``OUT/gpu_latency.json`` and ``OUT/gpu_latency.md`` after every model, so a
run cut short keeps what it measured.

A GPU machine is often lent briefly and without torch's pinned versions, so
the zoo can be exported where torch is (``--prepare DIR``: the float32 zoo
files and ``DIR/manifest.json``) and timed where the GPU is (``--zoo DIR``);
the samples, the GPT and the ViT-S are built with numpy on either side, and
``--jobs`` converts several models at once. ``--cpu-dry-run`` runs every
step on the CPU provider with two runs, to check the script on a machine
without a GPU; its table says so and is never a result.

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


class GpuModel:
    """A float32 model to time, with the sizes of its symbolic dimensions and its integer input ranges."""

    def __init__(self, name: str, path: pathlib.Path, dims: Mapping[str, int] = (),
                 ranges: Mapping[str, Tuple[float, float]] = (), zoo: bool = False,
                 batches: Tuple[int, ...] = BATCHES) -> None:
        self.name, self.path, self.zoo, self.batches = name, path, zoo, tuple(batches)
        self.dims, self.ranges = dict(dims), dict(ranges)


def build_models(work: pathlib.Path, zoo_dir: Optional[pathlib.Path] = None) -> List[GpuModel]:
    """The float32 models to time: the samples, a 6-layer GPT, the full ViT-S/16 and the deployment zoo
    (exported here, or read from ``zoo_dir``'s manifest written by ``--prepare``)."""
    import onnx

    from bench.vit_model import build_vit
    from sample_models import gpt

    samples = build_samples(work / "samples")
    models = [GpuModel("transformer", samples["transformer"]), GpuModel("cnn", samples["cnn"])]
    models.append(GpuModel("gpt6", gpt.build(work / "gpt6", gpt.GptSpec(layers=6, hidden=1024, vocab=32000),
                                             name="gpt6")))
    vit_path = work / "vit_s16.onnx"
    if not vit_path.exists():
        onnx.save(build_vit(), vit_path)
    models.append(GpuModel("vit_s16", vit_path, zoo=True, batches=(1,)))
    if zoo_dir is not None:
        manifest = json.loads((zoo_dir / "manifest.json").read_text())
        models.extend(GpuModel(m["name"], zoo_dir / m["file"], m["dims"], {k: tuple(v) for k, v in m["ranges"].items()},
                               zoo=True) for m in manifest)
        return models
    try:
        from bench.deploy_models import build_zoo
    except ImportError as exc:  # torch/transformers missing: time what exists, and say so
        print(f"bench-gpu: deployment zoo skipped ({exc}); `pip install -c constraints.txt -e .[bench]`",
              file=sys.stderr)
        return models
    for m in build_zoo(work / "zoo"):
        models.append(GpuModel(m.name, m.path, m.dims, m.input_ranges, zoo=True))
    return models


def prepare_zoo(folder: pathlib.Path) -> pathlib.Path:
    """Export the float32 zoo into ``folder`` and write ``folder/manifest.json`` for ``--zoo``; returns it."""
    from bench.deploy_models import build_zoo

    entries = [{"name": m.name, "file": m.path.name, "dims": dict(m.dims), "ranges": dict(m.input_ranges)}
               for m in build_zoo(folder)]
    manifest = folder / "manifest.json"
    manifest.write_text(json.dumps(entries, indent=2) + "\n")
    return manifest


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


def measure_model(model: GpuModel, files: Mapping[str, object], warmup: int, runs: int, rounds: int = 5,
                  provider: str = "CUDAExecutionProvider") -> List[dict]:
    """Rows per batch of ``model.batches`` and variant of ``files``: Casts, cast traffic at that batch and the
    median latency, or the error, float32 first in each batch.

    One session per file serves every batch. The variants of one batch are
    timed in turn, ``rounds`` times ``runs // rounds`` runs each, so a drift
    of the GPU's clocks or the host's load falls on every variant alike (two
    runs of the same file an hour apart differed by up to 1.8x on an H200).
    """
    from bench.figures import deploy_figures

    sessions: Dict[str, object] = {}
    rows: Dict[Tuple[int, str], dict] = {}
    for variant, path in files.items():
        for batch in model.batches:
            row = rows[(batch, variant)] = {"model": model.name, "batch": batch, "variant": variant}
            if not isinstance(path, pathlib.Path):
                row["error"] = str(path)[-300:]
                continue
            try:
                figures = deploy_figures(path, {**model.dims, "batch": batch})
                row.update(casts=figures.casts, cast_traffic_mb=round(figures.cast_traffic_bytes / 1e6, 3))
                if variant not in sessions:
                    sessions[variant] = cuda_session(path) if provider == "CUDAExecutionProvider" else cpu_session(path)
            except Exception as exc:  # noqa: BLE001 -- e.g. a kernel the CUDA provider lacks: a row, not a crash
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    for batch in model.batches:
        dims = {**model.dims, "batch": batch}
        live = {}
        for variant, session in sessions.items():
            if "error" in rows[(batch, variant)]:
                continue
            try:
                inputs = feeds(session, batch, seed=batch, dims=dims, ranges=model.ranges)
                for _ in range(warmup):
                    session.run(None, inputs)
                live[variant] = (session, inputs)
            except Exception as exc:  # noqa: BLE001 -- a run that fails is a row
                rows[(batch, variant)]["error"] = f"{type(exc).__name__}: {exc}"[:300]
        for variant, ms in interleaved_ms(live, runs, rounds).items():
            rows[(batch, variant)]["ms"] = ms
    sessions.clear()
    return [rows[(batch, variant)] for batch in model.batches for variant in files]


def interleaved_ms(live: Mapping[str, Tuple[object, Dict[str, np.ndarray]]], runs: int, rounds: int) -> Dict[str, float]:
    """Median milliseconds per ``session.run`` of each variant in ``live`` (variant -> (session, inputs)),
    timed ``rounds`` times in turn, ``runs // rounds`` runs each round (at least one)."""
    times: Dict[str, List[float]] = {variant: [] for variant in live}
    per_round = max(1, runs // max(1, rounds))
    for _ in range(max(1, rounds)):
        for variant, (session, inputs) in live.items():
            for _ in range(per_round):
                start = time.perf_counter()
                session.run(None, inputs)
                times[variant].append((time.perf_counter() - start) * 1e3)
    return {variant: statistics.median(values) for variant, values in times.items() if values}


def cpu_session(path: pathlib.Path):
    """A CPU-provider session (``--cpu-dry-run`` only: it checks the script, it measures nothing)."""
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _convert_job(args) -> Tuple[str, Dict[str, object]]:
    """Pool worker: ``convert_all`` of one model (a module-level function, so a spawned process can run it)."""
    model, work = args
    return model.name, convert_all(model, work)


def convert_models(models: List[GpuModel], work: pathlib.Path, jobs: int) -> Dict[str, Dict[str, object]]:
    """Every model's variants, ``jobs`` models at a time in spawned processes (1: in this one)."""
    if jobs <= 1:
        return {m.name: convert_all(m, work) for m in models}
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # no runtime state crosses into the workers
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        return dict(pool.map(_convert_job, [(m, work) for m in models]))


def render(rows: List[dict], device: str, dry_run: bool = False) -> str:
    """The Markdown table of ``rows``."""
    lines = [
        "# GPU latency (onnxruntime CUDA provider)" if not dry_run else
        "# DRY RUN on the CPU provider: checks the script, measures nothing",
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
    """Entry point; exit 2 when no CUDA provider is available (unless ``--cpu-dry-run``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench" / "results")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5,
                        help="the variants of a batch are timed in turn this many times (runs/rounds runs each)")
    parser.add_argument("--prepare", type=pathlib.Path, metavar="DIR",
                        help="export the float32 zoo into DIR with a manifest for --zoo, then stop (needs torch)")
    parser.add_argument("--zoo", type=pathlib.Path, metavar="DIR", help="the zoo that --prepare wrote")
    parser.add_argument("--models", nargs="+", metavar="NAME", help="time only these models")
    parser.add_argument("--jobs", type=int, default=1, help="models converted at once")
    parser.add_argument("--work", type=pathlib.Path, metavar="DIR",
                        help="where the models and conversions go (default OUT/tmp/gpu_latency)")
    parser.add_argument("--cpu-dry-run", action="store_true",
                        help="every step on the CPU provider, 1 warm-up and 2 runs: checks the script only")
    args = parser.parse_args(argv)
    if args.prepare:
        print(f"bench-gpu: zoo manifest {prepare_zoo(args.prepare)}")
        return 0
    import onnxruntime as ort

    provider = "CPUExecutionProvider" if args.cpu_dry_run else "CUDAExecutionProvider"
    if args.cpu_dry_run:
        args.warmup, args.runs, args.rounds = 1, 2, 2
    elif provider not in ort.get_available_providers():
        print(
            f"bench-gpu: onnxruntime {ort.__version__} has no CUDA provider on this machine "
            f"(available: {', '.join(ort.get_available_providers())}); nothing measured",
            file=sys.stderr,
        )
        return 2
    work = args.work or args.out / "tmp" / "gpu_latency"
    work.mkdir(parents=True, exist_ok=True)
    models = [m for m in build_models(work, args.zoo) if not args.models or m.name in args.models]
    start = time.perf_counter()
    converted = convert_models(models, work, args.jobs)
    print(f"bench-gpu: {len(models)} models converted in {time.perf_counter() - start:.1f} s", flush=True)
    device = _device_name(ort) if not args.cpu_dry_run else "CPU (dry run)"
    args.out.mkdir(parents=True, exist_ok=True)
    rows: List[dict] = []
    for model in models:
        model_rows = measure_model(model, converted[model.name], args.warmup, args.runs, args.rounds, provider)
        base = {row["batch"]: row.get("ms") for row in model_rows if row["variant"] == "float32"}
        for row in model_rows:
            if "ms" in row:
                row["speedup"] = base[row["batch"]] / row["ms"] if base.get(row["batch"]) else None
        rows.extend(model_rows)
        print(f"bench-gpu: {model.name} timed ({time.perf_counter() - start:.1f} s)", flush=True)
        _write(args.out, rows, device, args.cpu_dry_run)
    print(render(rows, device, args.cpu_dry_run))
    return 0


def _device_name(ort) -> str:
    """nvidia-smi's name of the GPU, else onnxruntime's device string."""
    try:
        import subprocess

        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip() or ort.get_device()
    except OSError:
        return ort.get_device()


def _write(out: pathlib.Path, rows: List[dict], device: str, dry_run: bool) -> None:
    """``gpu_latency.json`` and ``.md`` as measured so far (a dry run writes ``gpu_latency_dry_run.*``)."""
    import onnxruntime as ort

    stem = "gpu_latency_dry_run" if dry_run else "gpu_latency"
    meta = {"device": device, "onnxruntime": ort.__version__, "dry_run": dry_run, "rows": rows}
    (out / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
    (out / f"{stem}.md").write_text(render(rows, device, dry_run))


if __name__ == "__main__":
    sys.exit(main())
