"""Shape a report dict into the compact data the page embeds (once, as JSON).

Nodes become columns of small integers indexing shared string tables (op
types, rules, reasons, graphs, scopes): a 40,000-node report repeats the same
few dozen op types and rules, and the page reads columns faster than objects.
The order of ``report["nodes"]`` is kept: the planner lists each graph's
nodes in topological order, with a subgraph's nodes right before the
If/Loop/Scan node that runs them.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional

from ampconv.core.heavy_ops import HEAVY_OPS
from ampconv.core.lowtypes import LOW_TYPES
from ampconv.errors import command_line_text, spell_parameters
from ampconv.report import already_low_count, envelope_texts, float32_causes, rerun, unchanged_reason
from ampconv.report.rerun import YOUR_SAMPLES
from ampconv.validation.advice import fix_advice

PRECISIONS = ("LOW", "HIGH", "NONE", "FALLBACK")  # FALLBACK: the fallback type (bf16 where fp16 overflows)


class _Table:
    """A string table: ``index(s)`` gives each distinct string one small integer, in first-seen order."""

    def __init__(self) -> None:
        self.items: List[str] = []
        self._index: Dict[str, int] = {}

    def index(self, text: str) -> int:
        """The integer of ``text``, adding it when new."""
        found = self._index.get(text)
        if found is None:
            found = self._index[text] = len(self.items)
            self.items.append(text)
        return found


def scope_of(name: str, graph: str = "main") -> str:
    """The node-name scope the strip groups by: ``/blocks.0/attn/`` for ``/blocks.0/attn/MatMul``.

    Names without a ``/`` have the empty scope. Nodes of a subgraph are
    grouped under their graph's name, so they never mix with main-graph nodes.
    """
    cut = name.rfind("/")
    scope = name[: cut + 1] if cut >= 0 else ""
    return scope if graph == "main" else f"[{graph}] {scope}"


def page_data(report: Dict[str, Any]) -> Dict[str, Any]:
    """Everything the page shows, from a report dict (``convert --report``'s JSON)."""
    nodes = report.get("nodes") or []
    ops, rules, reasons, graphs, scopes = _Table(), _Table(), _Table(), _Table(), _Table()
    columns: Dict[str, list] = {key: [] for key in ("name", "op", "prec", "rule", "reason", "graph", "scope")}
    for node in nodes:
        graph = str(node.get("graph") or "main")
        precision = node.get("precision")
        columns["name"].append(node["name"])
        columns["op"].append(ops.index(node["op_type"]))
        columns["prec"].append(PRECISIONS.index(precision) if precision in PRECISIONS else 2)
        columns["rule"].append(rules.index(str(node.get("rule") or "")))
        columns["reason"].append(reasons.index(str(node.get("reason") or "")))
        columns["graph"].append(graphs.index(graph))
        columns["scope"].append(scopes.index(scope_of(node["name"], graph)))
    return {
        "summary": _summary(report),
        "verdict": verdict(report),
        "order": order_by_importance(report),
        "ops": op_table(nodes),
        "nodes": columns,
        "tables": {"ops": ops.items, "rules": rules.items, "reasons": reasons.items,
                   "graphs": graphs.items, "scopes": scopes.items},
        "errors": error_series(report),
    }


_HEAVY = frozenset(op for ops in HEAVY_OPS.values() for op in ops)


def verdict(report: Dict[str, Any]) -> Dict[str, Any]:
    """What the page opens on: the verdict (``kind``, ``title``, ``detail``), then what to do (``todo``, ``command``).

    ``kind`` is ``fail``, ``pass``, ``unvalidated``, ``unchanged`` or
    ``plan``. ``command`` is one command line to copy (or None): the fix
    validation's localization checked, a search with ``--tune``, or the
    validation still to run.
    """
    validation = report.get("validation") if isinstance(report.get("validation"), dict) else None
    warnings = len(report.get("warnings") or [])
    more = f" {warnings} warning(s) below." if warnings else ""
    nodes = report.get("nodes") or []
    counts = Counter(n.get("precision") for n in nodes)
    fallback = report.get("fallback_dtype")
    middle = f"{counts['FALLBACK']} in {fallback} (where {report.get('dtype')} overflows), " if fallback else ""
    converted = f"{counts['LOW']} node(s) run in {report.get('dtype')}, {middle}{counts['HIGH']} stay float32"
    source, output = str(report.get("source") or "MODEL.onnx"), str(report.get("output") or "OUT.onnx")
    if report.get("dry_run"):
        return _verdict("plan", "Plan only (dry run): nothing was written", converted + "." + more,
                        "Convert for real without --dry-run.", None)
    if report.get("unchanged"):
        reason = unchanged_reason(report.get("level"), nodes, report.get("figures"), report.get("dtype"))
        return _verdict("unchanged", "Nothing to convert: the model is unchanged", reason + "." + more, "", None)
    if validation is None:
        return _verdict("unvalidated", "Converted, not validated", converted + "." + more,
                        "Validate it on your own samples (.npz files or ONNX test_data_set_* folders):",
                        _command("validate", source, output, "--inputs", YOUR_SAMPLES))
    outputs = [o for o in validation.get("outputs") or [] if isinstance(o, dict)]
    failed = [o for o in outputs if not o.get("passed")]
    judged = (f"{len(outputs) - len(failed)}/{len(outputs)} output(s) pass on {validation.get('samples')} "
              f"sample(s) ({validation.get('backend_label') or validation.get('backend')})")
    metric = validation.get("metric") if isinstance(validation.get("metric"), dict) else None
    if metric is not None:  # the user's metric decided: the page says its verdict, not the outputs'
        judged = f"{metric.get('summary')} ({validation.get('backend_label') or validation.get('backend')})"
        failed = []
    if validation.get("passed"):
        random = validation.get("random_inputs")
        title = "PASS: your metric holds" if metric else "PASS: the converted model stays within tolerance"
        return _verdict("pass", title,
                        f"{judged}; {converted}." + more,
                        "Random inputs are a weak proxy: validate on your own samples:" if random else "",
                        _command("validate", source, output, "--inputs", YOUR_SAMPLES) if random else None)
    return _failed(report, validation, failed, judged, more)


def _failed(report, validation, failed, judged, more) -> Dict[str, Any]:
    """The FAIL verdict: which outputs, where drift starts, and the one fix to copy: the checked fix, or the
    accuracy search when it was not enough (``advice.fix_advice``, the CLI's words), the run repeated whole."""
    why = "; ".join(f"{o.get('name')}: {o.get('decided_by')}" for o in failed[:3])
    loc = validation.get("localization") if isinstance(validation.get("localization"), dict) else {}
    where = f" Drift starts at {loc['node']} ({loc.get('op_type')})." if loc.get("node") else ""
    detail = f"{judged}{f': {why}' if why else ''}.{where}{more}"
    title = ("FAIL: your metric does not hold" if isinstance(validation.get("metric"), dict)
             else "FAIL: the converted model drifts beyond tolerance")
    fix = loc.get("fix") if isinstance(loc.get("fix"), dict) else None
    if isinstance(loc.get("cause"), dict) and (fix is None or fix.get("passes")):
        command, complete = rerun.fix_command(report, loc)
        return _verdict("fail", title, detail, _with_gap(fix_advice(loc, command_line_text), complete), command)
    command, complete = rerun.search_command(report)
    todo = fix_advice(loc, command_line_text) if fix is not None else (
        "Find the nodes to keep float32 with your samples (the accuracy search, --tune), or rerun with "
        "--validate --localize to name where drift starts:")
    return _verdict("fail", title, detail, _with_gap(todo, complete), command)


def _with_gap(todo: str, complete: bool) -> str:
    """``todo``, saying what the command lacks when the report did not record the run's own command line."""
    if complete:
        return todo
    return f"{todo} (The report holds no command line of its run: add your other options to the command.)"


def _verdict(kind, title, detail, todo, command) -> Dict[str, Any]:
    return {"kind": kind, "title": title, "detail": detail, "todo": todo, "command": command}


def _command(*words: str) -> str:
    """``ampconv WORDS...`` quoted for a POSIX shell (a placeholder ending in ``/`` stays readable)."""
    return rerun.quoted(["ampconv", *words])


def order_by_importance(report: Dict[str, Any]) -> List[int]:
    """Node indexes in the order the node table opens on: what failed, what the search kept, float32 heavy
    ops, other float32 nodes, LOW heavy ops, other LOW nodes, nodes without float data (topological within each)."""
    validation = report.get("validation") if isinstance(report.get("validation"), dict) else {}
    loc = validation.get("localization") if isinstance(validation.get("localization"), dict) else {}
    fix = loc.get("fix") if isinstance(loc.get("fix"), dict) else {}
    cause = loc.get("cause") if isinstance(loc.get("cause"), dict) else {}
    failing = {loc.get("node"), cause.get("node"), *(fix.get("nodes") or [])} - {None}
    tune = report.get("tune") if isinstance(report.get("tune"), dict) else {}
    kept = {k.get("node") for k in tune.get("kept") or [] if isinstance(k, dict)}

    def rank(node: Dict[str, Any]) -> int:
        if node["name"] in failing:
            return 0
        if node["name"] in kept:
            return 1
        heavy = node["op_type"] in _HEAVY
        return {"HIGH": 3, "FALLBACK": 5, "LOW": 5}.get(node.get("precision"), 7) - heavy

    nodes = report.get("nodes") or []
    return sorted(range(len(nodes)), key=lambda i: (rank(nodes[i]), i))


def op_table(nodes: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per op type (sorted): LOW and HIGH counts (as the text summary) and nodes without float data."""
    table: Dict[str, Counter] = defaultdict(Counter)
    for node in nodes:
        table[node["op_type"]][node.get("precision")] += 1
    rows = [{"op": op, "LOW": c["LOW"], "HIGH": c["HIGH"], "NONE": c["NONE"]} for op, c in sorted(table.items())]
    if any(node.get("precision") == "FALLBACK" for node in nodes):  # the third class, where it is used
        for row, (_, c) in zip(rows, sorted(table.items())):
            row["FALLBACK"] = c["FALLBACK"]
    return rows


def _summary(report: Dict[str, Any]) -> Dict[str, Any]:
    """The facts of the text summary (``ampconv.report.render_text``), as plain values."""
    nodes = report.get("nodes") or []
    counts = Counter(n.get("precision") for n in nodes)
    validation = report.get("validation") or None
    tune = report.get("tune") or None
    calibration = report.get("calibration") or None
    return {
        "source": report.get("source"),
        "output": report.get("output"),
        "dtype": report.get("dtype"),
        "unit_roundoff": _unit_roundoff(report.get("dtype")),
        "level": report.get("level"),
        "requested_level": report.get("requested_level", report.get("level")),
        "preset": report.get("preset"),
        "policy_sources": report.get("policy_sources") or [],
        "dry_run": bool(report.get("dry_run")),
        "unchanged": bool(report.get("unchanged")),
        "counts": {"LOW": counts["LOW"], "HIGH": counts["HIGH"], "NONE": counts["NONE"], "total": len(nodes),
                   "already": already_low_count(nodes),
                   **({"FALLBACK": counts["FALLBACK"]} if report.get("fallback_dtype") else {})},
        "fallback_dtype": report.get("fallback_dtype"),
        "float32": float32_causes(nodes, bool((calibration or {}).get("synthetic"))) if counts["HIGH"] else "",
        "casts": {key: report.get(f"casts_{key}", 0) for key in ("before", "inserted", "removed", "after")},
        "weights": {"before": report.get("weight_bytes_before", 0), "after": report.get("weight_bytes_after", 0)},
        "constants": report.get("constants") or [],
        "runtime_pins": report.get("runtime_pins") or [],
        "interface": report.get("interface") or [],
        "warnings": report.get("warnings") or [],
        "notes": report.get("notes") or [],
        "calibration": _pick(calibration, ("samples", "random", "tensors", "notes")),
        "envelope": [spell_parameters(text) for text in envelope_texts(
            report.get("envelope"), report.get("dtype"), calibration, report.get("fallback_dtype"))],
        "tune": _pick(tune, ("passed", "evaluations", "budget", "low_nodes", "kept", "notes")),
        "release": _pick(report.get("release") or None, ("evidence", "islands", "nodes", "lowered", "evaluations",
                                                           "budget", "seconds", "released", "kept", "untried")),
        "validation": _validation(validation),
    }


def _unit_roundoff(dtype) -> Optional[float]:
    """The unit roundoff of the report's LOW type (the error chart's reference line); None for an unknown key."""
    record = LOW_TYPES.get(dtype) if isinstance(dtype, str) else None
    return record.unit_roundoff if record is not None else None


def _pick(section: Optional[Dict[str, Any]], keys) -> Optional[Dict[str, Any]]:
    if not isinstance(section, dict):
        return None
    return {key: section.get(key) for key in keys}


def _validation(validation: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The verdict, each output's decision, and the localization without its per-node series."""
    if not isinstance(validation, dict):
        return None
    loc = validation.get("localization")
    if isinstance(loc, dict):
        loc = {k: v for k, v in loc.items() if k != "node_errors"}
    return {
        "passed": validation.get("passed"),
        "backend": validation.get("backend_label") or validation.get("backend"),
        "samples": validation.get("samples"),
        "outputs": [
            {"name": o.get("name"), "passed": o.get("passed"), "decided_by": o.get("decided_by")}
            for o in validation.get("outputs") or [] if isinstance(o, dict)
        ],
        "localization": loc if isinstance(loc, dict) else None,
        "metric": (validation.get("metric") or {}).get("summary") if isinstance(validation.get("metric"), dict)
        else None,
    }


def error_series(report: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """Per-node error along the node order, or None when the report has none.

    ``propagated``: [node index, error] from validation's localization (each
    checked node's error on one sample, ``Localization.node_errors``).
    ``own``: [node index, error] from the accuracy search's ranking (each LOW
    node computed alone in LOW from exact inputs, ``tune.own_errors``).
    ``first``/``cause``: indexes of the first diverging node and of the node
    localization blames; ``kept``: nodes the search kept float32. Errors that
    are not finite are sent as None (the chart draws them at the top).
    """
    position = {}
    for index, node in enumerate(report.get("nodes") or []):
        position.setdefault(node["name"], index)
    validation = report.get("validation") if isinstance(report.get("validation"), dict) else {}
    loc = validation.get("localization") if isinstance(validation.get("localization"), dict) else {}
    tune = report.get("tune") if isinstance(report.get("tune"), dict) else {}
    propagated = _series(loc.get("node_errors") or [], position)
    own = _series(list((tune.get("own_errors") or {}).items()), position)
    if not propagated and not own:
        return None
    cause = loc.get("cause") if isinstance(loc.get("cause"), dict) else {}
    return {
        "propagated": propagated,
        "own": own,
        "sample": loc.get("sample"),
        "first": position.get(loc.get("node")),
        "cause": position.get(cause.get("node")),
        "kept": sorted(position[k["node"]] for k in tune.get("kept") or [] if k.get("node") in position),
    }


def _series(pairs, position: Dict[str, int]) -> List[list]:
    """[[node index, error or None], ...] in node order, for the pairs whose node the report lists."""
    found = []
    for pair in pairs:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or pair[0] not in position:
            continue
        found.append([position[pair[0]], _finite(pair[1])])
    found.sort(key=lambda p: p[0])
    return found


def _finite(value) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None
