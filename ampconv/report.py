"""The conversion report: data first (``Report``), renderers second."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional


@dataclasses.dataclass
class Report:
    """Everything a conversion decided and did, JSON-serializable via ``to_dict``."""

    source: str
    output: Optional[str]
    dtype: str
    level: str
    requested_level: str
    preset: str
    policy_sources: List[str]
    dry_run: bool = False
    unchanged: bool = False
    nodes: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    initializers: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    constants: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    casts_before: int = 0
    casts_after: int = 0
    casts_inserted: int = 0
    casts_removed: int = 0
    weight_bytes_before: int = 0
    weight_bytes_after: int = 0
    warnings: List[str] = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)
    runtime_pins: List[Dict[str, str]] = dataclasses.field(default_factory=list)
    # The checks of the written model: whether onnxruntime ran, the node count, the probe's node count
    # (distinct signatures; None: the whole model was loaded), and checker_seconds / runtime_seconds.
    load_check: Dict[str, Any] = dataclasses.field(default_factory=dict)
    validation: Optional[Dict[str, Any]] = None
    # With calibration data: what the float32 pass saw; with --tune: what the accuracy search did.
    calibration: Optional[Dict[str, Any]] = None
    tune: Optional[Dict[str, Any]] = None

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict (the ``--report`` file format)."""
        data = dataclasses.asdict(self)
        data["summary"] = {
            "nodes_low": self.count("LOW"),
            "nodes_high": self.count("HIGH"),
            "nodes_without_float": self.count("NONE"),
            "by_op_type": self.op_summary(),
        }
        return data

    def to_json(self) -> str:
        """Deterministic, indented JSON."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def count(self, precision: str) -> int:
        """Number of nodes with this precision (all graphs)."""
        return sum(1 for n in self.nodes if n["precision"] == precision)

    def op_summary(self) -> Dict[str, Dict[str, int]]:
        """Per op type: how many nodes are LOW and HIGH."""
        table: Dict[str, Counter] = defaultdict(Counter)
        for n in self.nodes:
            if n["precision"] in ("LOW", "HIGH"):
                table[n["op_type"]][n["precision"]] += 1
        return {op: {"LOW": c["LOW"], "HIGH": c["HIGH"]} for op, c in sorted(table.items())}

    def decisions_by_node(self) -> Dict[str, Dict[str, str]]:
        """node name -> {precision, rule, reason}: what validation's localization prints."""
        return {
            n["name"]: {"precision": n["precision"], "rule": n["rule"], "reason": n["reason"]}
            for n in self.nodes
        }


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def render_text(report: Report, verbose: bool = False) -> str:
    """The human summary printed on stderr."""
    lines = []
    action = "plan for" if report.dry_run else "converted"
    target = f" -> {report.output}" if report.output and not report.dry_run else ""
    level = report.level if report.level == report.requested_level else f"{report.requested_level}->{report.level}"
    lines.append(f"ampconv: {action} {report.source}{target} ({report.dtype}, level {level}, preset {report.preset})")
    if report.unchanged:
        lines.append("  nothing to convert: the model is unchanged")
    lines.append(
        f"  nodes: {report.count('LOW')} LOW, {report.count('HIGH')} HIGH, "
        f"{report.count('NONE')} without float data"
    )
    summary = report.op_summary()
    if summary:
        width = max(len(op) for op in summary)
        lines.append(f"  {'op type'.ljust(width)}   LOW  HIGH")
        for op, c in summary.items():
            lines.append(f"  {op.ljust(width)} {c['LOW']:5d} {c['HIGH']:5d}")
    lines.append(
        f"  casts: {report.casts_before} before, {report.casts_inserted} inserted, "
        f"{report.casts_removed} removed, {report.casts_after} after"
    )
    if report.weight_bytes_before:
        ratio = report.weight_bytes_after / report.weight_bytes_before
        lines.append(
            f"  weights: {_mib(report.weight_bytes_before)} -> {_mib(report.weight_bytes_after)} ({ratio:.0%})"
        )
    for c in report.constants:
        lines.append(f"  constant {c['tensor']} (used by {c['consumer']}): {c['detail']} -> {c['action']}")
    for pin in report.runtime_pins:
        lines.append(f"  onnxruntime pin: {pin['node']} kept float32 ({pin['reason']})")
    lines.extend(_data_lines(report))
    if verbose:
        for n in report.nodes:
            if n["precision"] in ("LOW", "HIGH"):
                lines.append(f"  {n['precision']:4s} {n['name']} ({n['op_type']}): {n['reason']}")
    for note in report.notes:
        lines.append(f"  note: {note}")
    for warning in report.warnings:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


def _data_lines(report: Report) -> List[str]:
    """What calibration data and the accuracy search decided: every data-rule node with its evidence."""
    if report.calibration is None:
        return []
    cal = report.calibration
    kind = "random (seeded)" if cal["random"] else "from files"
    lines = [f"  calibration: {cal['samples']} sample(s) {kind}, {cal['tensors']} tensors observed"]
    for n in report.nodes:
        if n["rule"].startswith("data-") and n["rule"] != "data-tune":
            lines.append(f"  data guard: {n['name']} ({n['op_type']}) kept float32: {n['reason']}")
    lines.extend(f"  calibration note: {note}" for note in cal.get("notes", ()))
    tune = report.tune
    if tune is not None:
        verdict = "passes" if tune["passed"] else "could not pass"
        lines.append(
            f"  tune: {verdict} after {tune['evaluations']} evaluation(s) (budget {tune['budget']}, "
            f"{tune['low_nodes']} LOW nodes after the guards), {len(tune['kept'])} node(s) kept float32"
        )
        for kept in tune["kept"]:
            lines.append(f"  tune: {kept['node']} ({kept['op_type'] or '?'}) kept float32: {kept['evidence']}")
        lines.extend(f"  tune note: {note}" for note in tune.get("notes", ()))
    return lines


def render_plan(report: Report) -> str:
    """``--dry-run`` output: one line per node with its precision and reason."""
    lines = [render_text(report)]
    lines.append("plan:")
    for n in report.nodes:
        graph = "" if n["graph"] == "main" else f"[{n['graph']}] "
        lines.append(f"  {n['precision']:4s} {graph}{n['name']} ({n['op_type']}): {n['reason']}")
    return "\n".join(lines)
