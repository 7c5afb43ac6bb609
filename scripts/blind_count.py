"""Run every blind spelling case (tests/blind/spellings.py) through ampconv both ways and print the table.

    python scripts/blind_count.py              # markdown table and totals
    python scripts/blind_count.py --json       # one JSON object: rows and totals
    python scripts/blind_count.py -k attn      # only cases whose name contains 'attn'
    python scripts/blind_count.py --markdown "Blind spellings: before" > tests/blind/BEFORE.md

Columns: nodes of the case, float32 nodes of the model converted with the samples as
calibration data, |needed| (worked out by hand, see the case's ``why``), excess =
|fp32 - needed| (target <= max(2, 10% of nodes)), accurate with data (true fp16, the judge's
emulator), accurate without data (default conversion), told (the default report warned or
gave an envelope below the samples' range), all-fp16 accurate (every node fp16: a hazard
case must fail it, a trap case must pass it). "held with data" = accurate and excess within
target; "held without data" = accurate, or told.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "blind"))
sys.path.insert(0, str(ROOT))

import harness  # noqa: E402
import spellings  # noqa: E402


def _yes(flag) -> str:
    return "yes" if flag else "NO"


def table(rows: list) -> str:
    head = ("| case | class | nodes | fp32 nodes | needed | excess | accurate with data | accurate without data "
            "| told | all-fp16 accurate |")
    lines = [head, "|---|---|---:|---:|---:|---:|---|---|---|---|"]
    for row in rows:
        a, b = row["with_data"], row["without_data"]
        fp32 = "error" if "error" in a else str(a["fp32_count"])
        excess = "-" if "error" in a else f"{a['excess']}{'' if a['excess_ok'] else ' (over)'}"
        lines.append(
            f"| {row['case']} | {row['class']} | {row['nodes']} | {fp32} | {len(row['needed'])} | {excess} "
            f"| {'error' if 'error' in a else _yes(a['accurate'])} | {'error' if 'error' in b else _yes(b['accurate'])} "
            f"| {'-' if b.get('accurate') else _yes(b.get('told'))} | {_yes(row['soundness']['all_fp16_ok'])} |"
        )
    return "\n".join(lines)


def totals(rows: list) -> dict:
    n = len(rows)
    return {
        "cases": n,
        "held_with_data": sum(bool(r["with_data"].get("held")) for r in rows),
        "held_without_data": sum(bool(r["without_data"].get("held")) for r in rows),
        "accurate_with_data": sum(bool(r["with_data"].get("accurate")) for r in rows),
        "excess_within_target": sum(bool(r["with_data"].get("excess_ok")) for r in rows),
        "accurate_without_data": sum(bool(r["without_data"].get("accurate")) for r in rows),
        "told_without_data": sum(bool(r["without_data"].get("told")) for r in rows),
        "unsound_cases": [r["case"] for r in rows if not _sound(r)],
    }


def _sound(row: dict) -> bool:
    s = row["soundness"]
    return s["reference_ok"] and s["needed_suffices"] and (s["all_fp16_ok"] != row["hazard"])


def markdown(rows: list, head: str) -> str:
    """The whole figures page (tests/blind/BEFORE.md): table, totals, where the excess is, what failed, the cases."""
    t = totals(rows)
    n = t["cases"]
    inaccurate = [r for r in rows if not r["without_data"].get("accurate")]
    warned = [r["case"] for r in rows if r["without_data"].get("warnings")]
    out = [head, "", READING, "", table(rows), ""]
    out.append(f"**held with data: {t['held_with_data']}/{n}, held without data: {t['held_without_data']}/{n}**\n")
    out.append(f"- with data: {t['accurate_with_data']}/{n} accurate, {t['excess_within_target']}/{n} within the excess target")
    out.append(f"- without data: {t['accurate_without_data']}/{n} accurate; of the {len(inaccurate)} inaccurate, "
               f"{sum(bool(r['without_data'].get('told')) for r in inaccurate)} told; reports with a warning: "
               f"{', '.join(warned) or 'none'}")
    out.append(f"- sound cases (float32 agrees with float64 where onnxruntime has double kernels, `needed` in float32 "
               f"suffices, all-fp16 fails exactly on the hazard cases): {n - len(t['unsound_cases'])}/{n}; needed nodes "
               f"whose lowering alone breaks accuracy: "
               f"{sum(sum(r['soundness']['needed_each'].values()) for r in rows)}/{sum(len(r['needed']) for r in rows)}\n")
    out += ["## Where the excess is (with data)\n", "| case | needed | extra float32 nodes | missing |", "|---|---|---|---|"]
    for r in rows:
        a = r["with_data"]
        if "error" in a or not a.get("excess_ok"):
            out.append(f"| {r['case']} | {', '.join(r['needed']) or '-'} | {', '.join(a.get('extra', [])) or a.get('error', '')} "
                       f"| {', '.join(a.get('missing', [])) or '-'} |")
    out += ["", "## What the default conversion got wrong (no data)\n", "| case | error on the samples | float32 nodes | told |",
            "|---|---|---|---|"]
    for r in inaccurate:
        b = r["without_data"]
        out.append(f"| {r['case']} | {b.get('accuracy', b.get('error'))} | {', '.join(b.get('fp32_nodes', [])) or 'none'} "
                   f"| {b.get('told_how', '')} |")
    out += ["", "## The cases\n", "| case | class | needed | max \\|input\\| | why |", "|---|---|---|---|---|"]
    for r in rows:
        mai = ", ".join(f"{k}: {v:.4g}" for k, v in r["max_abs_input"].items())
        out.append(f"| {r['case']} | {r['class']} | {', '.join(r['needed']) or '- (trap)'} | {mai} | {r['why'].replace('|', '/')} |")
    out += ["", f"Tolerance for every output of every case: {rows[0]['tolerance']} (max over the 8 samples).", ""]
    return "\n".join(out)


READING = """Reading the table: *fp32 nodes* and *excess* are for the model converted **with** the samples as
calibration data (`Config(calibration_data=(folder,))`); excess = |fp32 nodes - needed|, target
<= max(2, 10% of nodes). *accurate* is in true fp16 (the judge's own emulator, tests/blind/judge.py)
on the case's 8 samples. *told* is for the default conversion (`ampconv convert M -o O --report r.json`,
no data) and shown only where that conversion is inaccurate: the report has a `warnings` entry, or an
`envelope` entry whose `holds_to` is below the samples' max |input|. *all-fp16 accurate*: every node
fp16 (the judge's own all-fp16 emulation); a hazard case must fail it, a trap case (needed = 0) pass it."""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--markdown", metavar="TITLE", help="print the whole figures page (tests/blind/BEFORE.md) under this title")
    parser.add_argument("-k", default="", help="only cases whose name contains this")
    args = parser.parse_args(argv)
    import ampconv

    rows, start = [], time.time()
    with tempfile.TemporaryDirectory(prefix="blind_count_") as tmp:
        for case in spellings.CASES:
            if args.k in case.name:
                rows.append(harness.evaluate(case, Path(tmp) / case.name))
    t = totals(rows)
    if args.markdown:
        head = (f"# {args.markdown}\n\n`python scripts/blind_count.py --markdown ...` with ampconv from {ampconv.__file__} "
                f"({time.time() - start:.0f} s).")
        print(markdown(rows, head))
        return 0
    if args.json:
        print(json.dumps({"ampconv": ampconv.__file__, "seconds": round(time.time() - start, 1), "totals": t, "rows": rows},
                         indent=1, default=str))
        return 0
    print(table(rows))
    print()
    print(f"held with data: {t['held_with_data']}/{t['cases']}, held without data: {t['held_without_data']}/{t['cases']}")
    print(f"(with data: {t['accurate_with_data']} accurate, {t['excess_within_target']} within the excess target; "
          f"without data: {t['accurate_without_data']} accurate, {t['told_without_data']} told)")
    if t["unsound_cases"]:
        print("UNSOUND cases (fix the case, not the converter):", ", ".join(t["unsound_cases"]))
    print(f"ampconv from {ampconv.__file__}; {time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
