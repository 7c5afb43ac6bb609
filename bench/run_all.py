"""Run every benchmark and summarise: ``python bench/run_all.py --out bench/results``.

Discovers ``bench/bench_*.py``; each must expose ``main(out_dir) -> dict``.
Each bench runs in its own child process (a crash, a hang or a memory blow-up
in one cannot take the others down) under a time limit. Results go to
``OUT/summary.json`` (machine-readable, one entry per bench with status,
seconds and the bench's own dict) and ``OUT/SUMMARY.md`` (tables of checks:
value, target, pass/fail).
Each bench's own folder is ``OUT/tmp/<bench>/`` (git-ignored under
bench/results/tmp): only the two summaries are meant to be committed.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
from collections.abc import Sequence

BENCH_DIR = pathlib.Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DEFAULT_TIMEOUT_S = 1800


def discover(only: Sequence[str] | None = None) -> list[pathlib.Path]:
    """The bench modules, sorted by name; ``only`` filters by stem (``bench_convert``) or suffix (``convert``)."""
    found = sorted(BENCH_DIR.glob("bench_*.py"))
    if only:
        wanted = {o if o.startswith("bench_") else f"bench_{o}" for o in only}
        found = [p for p in found if p.stem in wanted]
    return found


def run_one_in_process(module_path: pathlib.Path, out_dir: pathlib.Path, result_path: pathlib.Path) -> None:
    """Child side: import the bench by path, call ``main(out_dir)``, write its dict as JSON."""
    sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location(f"bench.{module_path.stem}", module_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(out_dir)
    if not isinstance(result, dict):
        result = {"note": f"main() returned {type(result).__name__}, not a dict"}
    result_path.write_text(json.dumps(result, indent=2, default=str) + "\n")


def run_bench(module_path: pathlib.Path, out_root: pathlib.Path, timeout_s: float) -> dict[str, object]:
    """Parent side: run one bench in a child process; return its status entry (never raises)."""
    out_dir = out_root / "tmp" / module_path.stem
    out_dir.mkdir(parents=True, exist_ok=True)
    result_path = out_dir / "_result.json"
    if result_path.exists():
        result_path.unlink()
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--child", str(module_path),
           "--out", str(out_dir), "--result", str(result_path)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        return {"status": "timed out", "seconds": round(time.perf_counter() - start, 1),
                "error": f"no result after {timeout_s:g} s", "stderr_tail": _tail(exc.stderr)}
    seconds = round(time.perf_counter() - start, 1)
    (out_dir / "log.txt").write_text((done.stdout or "") + (done.stderr or ""))
    if done.returncode != 0 or not result_path.exists():
        return {"status": "failed", "seconds": seconds, "returncode": done.returncode,
                "error": _tail(done.stderr, 3000)}
    result = json.loads(result_path.read_text())
    failed = [c.get("id") for c in result.get("checks", []) if not c.get("passed")]
    status = "ok" if not failed and not result.get("errors") else "checks failed"
    return {"status": status, "seconds": seconds, "failed_checks": failed, "result": result}


def _tail(text, limit: int = 2000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-limit:]


def machine_info() -> dict[str, object]:
    """What the numbers were measured on: CPU count, memory, GPU presence, library versions."""
    info: dict[str, object] = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        # Other work on the machine skews timings: record how busy it was.
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
    }
    try:
        import psutil

        info["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    try:
        gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10, check=False)
        info["gpu"] = gpu.stdout.strip() or "none" if gpu.returncode == 0 else "none"
    except (OSError, subprocess.TimeoutExpired):
        info["gpu"] = "none"
    for package in ("onnx", "onnx_ir", "onnxruntime", "numpy", "onnxconverter_common", "ampconv"):
        try:
            info[package] = getattr(__import__(package), "__version__", "?")
        except ImportError:
            info[package] = "not installed"
    return info


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
        return "`" + (text if len(text) <= 400 else text[:400] + " ...") + "` (full: summary.json)"
    return str(value)


def render_markdown(summary: dict[str, object]) -> str:
    """SUMMARY.md: machine, then per bench its status, a check table, metrics and errors."""
    lines = ["# Benchmark summary", "", f"Run: {summary['started']} ({summary['seconds']} s)", "",
             "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in summary["machine"].items()]
    lines += ["", "## Overview", "", "| bench | status | seconds | failed checks |", "|---|---|---|---|"]
    for name, entry in summary["benches"].items():
        failed = ", ".join(entry.get("failed_checks") or []) or "-"
        lines.append(f"| {name} | {entry['status']} | {entry['seconds']} | {failed} |")
    for name, entry in summary["benches"].items():
        lines += ["", f"## {name}: {entry['status']}", ""]
        if entry.get("error"):
            lines += ["```", str(entry["error"]).strip(), "```", ""]
        result = entry.get("result") or {}
        checks = result.get("checks") or []
        if checks:
            lines += ["| check | value | target | result | note |", "|---|---|---|---|---|"]
            for c in checks:
                value = f"{_fmt(c.get('value'))} {c.get('unit', '')}".strip()
                verdict = "PASS" if c.get("passed") else "**FAIL**"
                note = str(c.get("note", "")).replace("|", "\\|").replace("\n", " ")[:300]
                lines.append(f"| {c.get('description', c.get('id'))} | {value} | {c.get('target')} "
                             f"| {verdict} | {note} |")
            lines.append("")
        metrics = result.get("metrics") or {k: v for k, v in result.items() if k not in ("checks", "errors")}
        if metrics:
            lines += ["Metrics:", ""] + [f"- {k}: {_fmt(v)}" for k, v in metrics.items()] + [""]
        for err in result.get("errors") or []:
            lines += [f"Error in section `{err.get('section')}`: {err.get('error')}", ""]
    return "\n".join(lines) + "\n"


def run_all(out_root: pathlib.Path, only: Sequence[str] | None = None,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> dict[str, object]:
    """Run every discovered bench; write summary.json and SUMMARY.md into ``out_root``; return the summary."""
    out_root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    summary: dict[str, object] = {
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "machine": machine_info(),
        "benches": {},
    }
    for path in discover(only):
        print(f"[bench] {path.stem} ...", flush=True)
        entry = run_bench(path, out_root, timeout_s)
        summary["benches"][path.stem] = entry
        print(f"[bench] {path.stem}: {entry['status']} in {entry['seconds']} s", flush=True)
    summary["seconds"] = round(time.perf_counter() - start, 1)
    (out_root / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    (out_root / "SUMMARY.md").write_text(render_markdown(summary))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry; exit status 0 when every bench ran (failed checks are data, not a crash), 1 otherwise."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(BENCH_DIR / "results"))
    parser.add_argument("--only", nargs="*", help="bench names to run (e.g. convert validate)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per bench")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        run_one_in_process(pathlib.Path(args.child), pathlib.Path(args.out), pathlib.Path(args.result))
        return 0
    summary = run_all(pathlib.Path(args.out), args.only, args.timeout)
    print(f"summary: {pathlib.Path(args.out) / 'SUMMARY.md'}")
    crashed = [n for n, e in summary["benches"].items() if e["status"] in ("failed", "timed out")]
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
