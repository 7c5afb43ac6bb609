"""The HTML report page on a 40,000-node report: page size, write time, first render in headless Chromium.

``python bench/bench_html.py [--nodes 40000] [--out bench/results]`` builds a
synthetic report of a transformer-like graph (``synthetic_report``: scoped
node names, LOW/HIGH/NONE nodes, Casts, float32 islands, a localization
error series over every node and own errors over the LOW ones, so every part
of the page is drawn at full size), writes the page with ``ampconv report``,
and loads it from a file in headless Chromium ``RUNS`` times. The page
records ``performance.now()`` (ms since navigation start: HTML parse, JSON
parse, every section drawn) in ``body[data-render-ms]``, read back with
``--dump-dom``. Results: ``html_report.md`` in the output folder. ``run_all.py``
runs it through ``main(out_dir)`` (about ten seconds); without Chromium the
render time is left unmeasured and the file says so.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNS = 5
OPS = [("MatMul", "LOW", "white", "white list at O2"), ("Add", "LOW", "gray-follow", None),
       ("Softmax", "HIGH", "black", "black list at O2"), ("LayerNormalization", "HIGH", "black", "black list at O2"),
       ("Gelu", "LOW", "unlisted", "unlisted at O2"), ("Reshape", "LOW", "transparent-low", "moves data only"),
       ("Shape", "NONE", "no-float", "no float tensor"), ("Cast", "HIGH", "free-high", "free: kept float32"),
       ("Mul", "LOW", "gray-follow", None), ("Transpose", "LOW", "transparent-low", "moves data only")]


def synthetic_report(nodes: int = 40_000, seed: int = 0) -> dict:
    """A report dict shaped like ``convert --report --validate --localize --tune`` output, with ``nodes`` nodes."""
    from ampconv.writing import outputs

    rng = random.Random(seed)
    entries, errors, own = [], [], {}
    error = 4e-4
    for i in range(nodes):
        block, part = divmod(i, 200)
        scope = f"/blocks.{block}/{('attn', 'mlp', 'norm')[part % 3]}/"
        op, precision, rule, reason = OPS[rng.randrange(len(OPS))]
        name = f"{scope}{op}_{i}"
        entries.append({"name": name, "op_type": op, "graph": "main", "precision": precision, "rule": rule,
                        "reason": reason or f"gray: follows {entries[-1]['name'] if entries else 'x'}",
                        "follows": None})
        # Error grows through LOW nodes and float32 stops it: what the chart is for.
        error = error * (1.02 if precision == "LOW" else 0.7) + rng.random() * 1e-5
        if precision != "NONE":
            errors.append([name, float(f"{error:.4g}")])
        if precision == "LOW":
            own[name] = float(f"{rng.random() * 1e-3:.4g}")
    counts = {p: sum(1 for e in entries if e["precision"] == p) for p in ("LOW", "HIGH", "NONE")}
    return {
        outputs.REPORT_MARKER: outputs.REPORT_FORMAT,
        "source": "synthetic.onnx", "output": "synthetic.fp16.onnx", "dtype": "fp16", "level": "O2",
        "requested_level": "O2", "preset": "default", "policy_sources": ["preset default"], "dry_run": False,
        "unchanged": False, "nodes": entries, "initializers": [], "constants": [], "casts_before": 0,
        "casts_after": 900, "casts_inserted": 900, "casts_removed": 0, "weight_bytes_before": 2**30,
        "weight_bytes_after": 2**29, "warnings": [], "notes": [], "runtime_pins": [], "load_check": {},
        "validation": {"passed": False, "backend": "emulate", "samples": 1, "outputs": [],
                       "localization": {"backend": "emulate", "sample": 0, "checked": 10, "node": entries[min(10, nodes - 1)]["name"],
                                        "op_type": entries[min(10, nodes - 1)]["op_type"], "reason": "over tolerance",
                                        "precision": "LOW", "rule": "white", "cause": None,
                                        "node_errors": errors}},
        "calibration": None,
        "tune": {"passed": True, "evaluations": 12, "budget": 36, "low_nodes": counts["LOW"], "kept": [],
                 "trials": [], "ranking_head": [], "seconds": 1.0, "notes": [], "own_errors": own},
        "summary": {"nodes_low": counts["LOW"], "nodes_high": counts["HIGH"], "nodes_without_float": counts["NONE"]},
    }


def chromium() -> str | None:
    """The Chromium executable, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render_ms(browser: str, page: pathlib.Path, timeout: float = 120.0) -> tuple[float, str]:
    """Load ``page`` in headless Chromium; returns (the page's own render time in ms, the dumped DOM)."""
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000",
         "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=timeout,
    )
    found = re.search(r'data-render-ms="([0-9.]+)"', proc.stdout)
    if not found:
        raise RuntimeError(f"the page recorded no render time (exit {proc.returncode}): {proc.stderr[-500:]}")
    return float(found.group(1)), proc.stdout


def run(nodes: int, out: pathlib.Path) -> dict:
    """Build, write and render; returns the figures and writes ``out/html_report.md``."""
    browser = chromium()
    with tempfile.TemporaryDirectory(prefix="ampconv-bench-html-") as tmp:
        report = pathlib.Path(tmp) / "big.json"
        report.write_text(json.dumps(synthetic_report(nodes)))
        page = pathlib.Path(tmp) / "big.html"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from ampconv_cli.main import main; main()", "report", str(report), "-o", str(page)],
                       check=True, timeout=300, capture_output=True)
        write_s = time.perf_counter() - start
        figures = {"nodes": nodes, "report_bytes": report.stat().st_size, "page_bytes": page.stat().st_size,
                   "write_seconds": round(write_s, 2), "render_ms": [], "browser": None}
        if browser:
            figures["browser"] = subprocess.run([browser, "--version"], capture_output=True, text=True,
                                                timeout=60).stdout.strip()
            for _ in range(RUNS):
                ms, dom = render_ms(browser, page)
                if 'data-count="0"' not in dom:
                    raise RuntimeError("the page reported script errors")
                figures["render_ms"].append(ms)
    out.mkdir(parents=True, exist_ok=True)
    (out / "html_report.md").write_text(markdown(figures))
    return figures


def markdown(f: dict) -> str:
    """The results file."""
    lines = [
        "# HTML report page: 40,000 nodes",
        "",
        "`python bench/bench_html.py` (synthetic report: scoped names, LOW/HIGH/NONE nodes, Casts, a",
        "localization error series over every float node and own errors over the LOW ones; see the module",
        "docstring). Render time is the page's own `performance.now()` when every section is drawn: HTML",
        "parse, the embedded JSON parsed once, summary, op table, canvas strip (visible rows only),",
        "error chart (SVG) and the virtualized node table, measured from navigation start in headless",
        "Chromium loading the page from a file.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| nodes | {f['nodes']:,} |",
        f"| report JSON | {f['report_bytes'] / 2**20:.2f} MiB |",
        f"| page (self-contained HTML) | {f['page_bytes'] / 2**20:.2f} MiB ({f['page_bytes'] / f['nodes']:.0f} bytes/node) |",
        f"| `ampconv report` wall time (process, imports included) | {f['write_seconds']:.2f} s |",
    ]
    if f["render_ms"]:
        lines += [
            f"| first render, median of {len(f['render_ms'])} | {statistics.median(f['render_ms']):.0f} ms |",
            f"| first render, all runs | {', '.join(f'{m:.0f}' for m in f['render_ms'])} ms |",
            f"| browser | {f['browser']} |",
        ]
    else:
        lines.append("| first render | not measured: no Chromium on this machine |")
    return "\n".join(lines) + "\n"


def main(out_dir=None) -> dict:
    """``run_all``'s entry: the 40,000-node page into ``out_dir``; returns its figures."""
    out = pathlib.Path(out_dir) if out_dir is not None else ROOT / "bench" / "results"
    figures = run(40_000, out)
    return {"metrics": figures}


def cli(argv=None) -> int:
    """Command line: ``--nodes N --out DIR``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=40_000)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    figures = run(args.nodes, args.out)
    print(markdown(figures))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(cli())
