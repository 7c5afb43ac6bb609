"""The conversion report: data first (``Report``), renderers second."""

from __future__ import annotations

from ampconv.errors import Parameter, Speller, named, spell_parameters
from ampconv.core.precision import Precision

import dataclasses
import re
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional, Tuple


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
    # Warnings and notes may name parameters (``ampconv.errors.named``): read them through ``warning_texts``
    # and ``note_texts`` (or ``to_dict``), which spell them in Python words or, from the CLI, as flags.
    warnings: List[str] = dataclasses.field(default_factory=list)
    notes: List[str] = dataclasses.field(default_factory=list)
    runtime_pins: List[Dict[str, str]] = dataclasses.field(default_factory=list)
    # The checks of the written model: whether onnxruntime ran, the node count, the probe's node count
    # (distinct signatures; None: the whole model was loaded), and checker_seconds / runtime_seconds;
    # then the users' sessions (``checks.users``): users_levels, users_probes (0: the whole model),
    # users_probe_nodes and users_seconds.
    load_check: Dict[str, Any] = dataclasses.field(default_factory=dict)
    validation: Optional[Dict[str, Any]] = None
    # With calibration data: what the float32 pass saw; with --tune: what the accuracy search did.
    calibration: Optional[Dict[str, Any]] = None
    tune: Optional[Dict[str, Any]] = None
    # With evidence: what the release step tried in LOW and kept LOW (ampconv.calibration.release).
    release: Optional[Dict[str, Any]] = None
    # What decides GPU speed (ampconv.pipeline.figures): casts, cast traffic, heavy ops in LOW, weights.
    figures: Optional[Dict[str, Any]] = None
    # The main graph's float inputs and outputs: name, kind, precision, rule, reason (ampconv.plan.interface).
    interface: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    # A decoder's KV cache (ampconv.plan.kvcache.cache_summary): pairs, types, bytes per step; None without one.
    kv_cache: Optional[Dict[str, Any]] = None
    # The fallback LOW type (``bf16``) of nodes whose values do not fit ``dtype`` (precision FALLBACK);
    # None: such nodes run float32, and the report reads as it always did (two classes).
    fallback_dtype: Optional[str] = None
    # How far each float input may grow before a LOW node overflows (``ampconv.plan.envelope``): one entry
    # per input a LOW node limits (input, holds_to, limited_by, ...); None without a float32 run.
    envelope: Optional[List[Dict[str, Any]]] = None
    # BatchNormalization nodes folded into the Conv before them (``ampconv.passes.fold_batchnorm``): node, into,
    # reason. They are not in ``nodes``: the Conv that computes them is.
    folded: List[Dict[str, Any]] = dataclasses.field(default_factory=list)

    def to_dict(self, spell: Speller = Parameter.python_text) -> Dict[str, Any]:
        """A JSON-ready dict (the ``--report`` file format); ``spell``: how the parameters its warnings and notes
        name read (Python words by default; the CLI's report speaks its flags)."""
        data = dataclasses.asdict(self)
        data["warnings"], data["notes"] = self.warning_texts(spell), self.note_texts(spell)
        data["summary"] = {
            "nodes_low": self.count(Precision.LOW),
            "nodes_high": self.count(Precision.HIGH),
            "nodes_without_float": self.count(Precision.NONE),
            "by_op_type": self.op_summary(),
        }
        if self.fallback_dtype is None:
            del data["fallback_dtype"]
        else:
            data["summary"]["nodes_fallback"] = self.count(Precision.FALLBACK)
        return data

    def summary(self, verbose: bool = False) -> str:
        """The human summary the CLI prints (``verbose``: every node's decision too), in Python words."""
        return render_text(self, verbose=verbose)

    def warning_texts(self, spell: Speller = Parameter.python_text) -> List[str]:
        """The warnings, each parameter they name spelled by ``spell`` (Python words by default)."""
        return [spell_parameters(text, spell) for text in self.warnings]

    def note_texts(self, spell: Speller = Parameter.python_text) -> List[str]:
        """The notes, each parameter they name spelled by ``spell`` (Python words by default)."""
        return [spell_parameters(text, spell) for text in self.notes]

    def count(self, precision: str) -> int:
        """Number of nodes with this precision (all graphs)."""
        return sum(1 for n in self.nodes if n["precision"] == precision)

    def op_summary(self) -> Dict[str, Dict[str, int]]:
        """Per op type: how many nodes are LOW and HIGH."""
        table: Dict[str, Counter] = defaultdict(Counter)
        for n in self.nodes:
            if n["precision"] in ("LOW", "HIGH", "FALLBACK"):
                table[n["op_type"]][n["precision"]] += 1
        if self.fallback_dtype is not None:  # three classes: LOW, FALLBACK, HIGH
            return {op: {"LOW": c["LOW"], "FALLBACK": c["FALLBACK"], "HIGH": c["HIGH"]}
                    for op, c in sorted(table.items())}
        return {op: {"LOW": c["LOW"], "HIGH": c["HIGH"]} for op, c in sorted(table.items())}

    def decisions_by_node(self) -> Dict[str, Dict[str, str]]:
        """node name -> {precision, rule, reason}: what validation's localization prints."""
        return {
            n["name"]: {"precision": n["precision"], "rule": n["rule"], "reason": n["reason"]}
            for n in self.nodes
        }


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


# The default summary must fit a screen: a kind of line (a constant's action,
# a note's wording) that repeats more than GROUP_OVER times is shown as a
# count and EXAMPLES examples. ``verbose`` lists every line; the report file
# always holds every entry.
GROUP_OVER = 3
EXAMPLES = 2
FULL_LIST_HINT = "-v lists every one; --report FILE keeps them all"
# What varies between two lines of the same kind: quoted names and numbers.
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)


def line_kind(text: str) -> str:
    """``text`` with its quoted names and numbers blanked: lines of one kind share it."""
    return _NUMBER.sub("#", _QUOTED.sub("'_'", text))


def _grouped(items: List[Tuple[str, str]], verbose: bool, indent: str = "  ") -> List[str]:
    """``(kind, line)`` pairs as lines, a kind repeated more than ``GROUP_OVER`` times cut to examples.

    Kinds keep the order of their first line; with ``verbose`` every line is kept.
    """
    by_kind: Dict[str, List[str]] = {}
    for kind, line in items:
        by_kind.setdefault(kind, []).append(line)
    lines: List[str] = []
    for group in by_kind.values():
        if verbose or len(group) <= GROUP_OVER:
            lines.extend(group)
            continue
        lines.extend(group[:EXAMPLES])
        lines.append(f"{indent}... and {len(group) - EXAMPLES} more like these ({FULL_LIST_HINT})")
    return lines


def _consumers(names: List[str], verbose: bool) -> str:
    if verbose or len(names) <= EXAMPLES:
        return ", ".join(names)
    return f"{len(names)} nodes, e.g. {', '.join(names[:EXAMPLES])}"


def _constant_lines(report: Report, verbose: bool) -> List[str]:
    """One line per constant (its consumers joined), grouped by what was done to it.

    A group larger than ``GROUP_OVER`` gets a header with the count and the
    values involved in all, then ``EXAMPLES`` examples (every one with ``verbose``).
    """
    merged: Dict[Tuple[str, str, str], List[str]] = {}
    entries: Dict[Tuple[str, str, str], Dict[str, Any]] = {}
    for c in report.constants:
        key = (c["tensor"], c["detail"], c["action"])
        merged.setdefault(key, []).append(c["consumer"])
        entries.setdefault(key, c)
    # Grouped by the kind of action: a clamp's action quotes its own counts,
    # so equal strings would leave every clamped constant on a line of its own.
    by_kind: Dict[str, List[Tuple[str, str, str]]] = {}
    for key in merged:
        by_kind.setdefault(line_kind(key[2]), []).append(key)
    lines: List[str] = []
    for keys in by_kind.values():
        actions = {k[2] for k in keys}
        shared = next(iter(actions)) if len(actions) == 1 else None

        def line(key, prefix="  constant ", shared=shared):
            tensor, detail, action = key
            text = f"{prefix}{tensor} (used by {_consumers(merged[key], verbose)}): {detail}"
            # Examples under a header that states the shared action do not repeat it.
            return text if prefix != "  constant " and shared else f"{text} -> {action}"

        if verbose or len(keys) <= GROUP_OVER:
            lines.extend(line(k) for k in keys)
            continue
        overflow = sum(entries[k].get("overflow", 0) for k in keys)
        underflow = sum(entries[k].get("underflow", 0) for k in keys)
        from ampconv.core.lowtypes import LOW_TYPES  # numpy: only for a grouped summary

        record = LOW_TYPES.get(report.dtype)
        defaults = {record.max, record.smallest_subnormal} if record else set()
        # A limit the user set is named; the type's own limits read as its range.
        max_set = {entries[k].get("max_finite") for k in keys} - {None} - defaults
        min_set = {entries[k].get("min_positive") for k in keys} - {None} - defaults
        beyond = f"above max_finite {max_set.pop():g}" if len(max_set) == 1 else f"beyond the {report.dtype} range"
        small = f"below min_positive {min_set.pop():g}" if len(min_set) == 1 else f"round to 0 in {report.dtype}"
        counts = [f"{overflow} value(s) {beyond}"] if overflow else []
        counts += [f"{underflow} non-zero value(s) {small}"] if underflow else []
        in_all = f" ({' and '.join(counts)} in all)" if counts else ""
        what = shared or "each as its line says"
        lines.append(f"  {len(keys)} constants{in_all} -> {what}, e.g.:")
        lines.extend(line(k, "    ") for k in keys[:EXAMPLES])
        lines.append(f"    ... and {len(keys) - EXAMPLES} more ({FULL_LIST_HINT})")
    return lines


def render_text(report: Report, verbose: bool = False, spell: Speller = Parameter.python_text) -> str:
    """The human summary printed on stderr (``spell``: how a parameter a warning or note names reads)."""
    lines = []
    action = "plan for" if report.dry_run else "converted"
    target = f" -> {report.output}" if report.output and not report.dry_run else ""
    level = report.level if report.level == report.requested_level else f"{report.requested_level}->{report.level}"
    lines.append(f"ampconv: {action} {report.source}{target} ({report.dtype}, level {level}, preset {report.preset})")
    if report.unchanged:
        lines.append(f"  nothing to convert: the model is unchanged ({nothing_to_convert_reason(report)})")
    lines.append(f"  {_nodes_line(report)}")
    fallback = report.fallback_dtype
    quantized = _quantized_line(report)
    if quantized:
        lines.append(f"  {quantized}")
    if report.count("HIGH"):
        lines.append(f"  {float32_by_rule_line(report)}")
    summary = report.op_summary()
    if summary:
        width = max(len(op) for op in summary)
        lines.append(f"  {'op type'.ljust(width)}   LOW{f'  {fallback}' if fallback else ''}  HIGH")
        for op, c in summary.items():
            middle = f" {c['FALLBACK']:5d}" if fallback else ""
            lines.append(f"  {op.ljust(width)} {c['LOW']:5d}{middle} {c['HIGH']:5d}")
    lines.append(
        f"  casts: {report.casts_before} before, {report.casts_inserted} inserted, "
        f"{report.casts_removed} removed, {report.casts_after} after"
    )
    if report.weight_bytes_before:
        ratio = report.weight_bytes_after / report.weight_bytes_before
        lines.append(
            f"  weights: {_mib(report.weight_bytes_before)} -> {_mib(report.weight_bytes_after)} ({ratio:.0%})"
        )
    if report.figures is not None:
        lines.append(f"  {_figures_line(report)}")
    if report.kv_cache is not None:
        lines.append(f"  {spell_parameters(_kv_cache_line(report), spell)}")
    lines.extend(_constant_lines(report, verbose))
    lines.extend(_grouped(
        [(line_kind(pin["reason"]), f"  onnxruntime pin: {pin['node']} kept float32 ({pin['reason']})")
         for pin in report.runtime_pins],
        verbose,
    ))
    lines.extend(_data_lines(report, verbose))
    lines.extend(f"  envelope: {spell_parameters(text, spell)}" for text in
                 envelope_texts(report.envelope, report.dtype, report.calibration, report.fallback_dtype))
    if verbose:
        for n in report.nodes:
            if n["precision"] in ("LOW", "HIGH", "FALLBACK"):
                word = fallback if n["precision"] == "FALLBACK" else n["precision"]
                lines.append(f"  {word:4s} {n['name']} ({n['op_type']}): {n['reason']}")
    lines.extend(_grouped([(line_kind(note), f"  note: {note}") for note in report.note_texts(spell)], verbose))
    # Warnings are never grouped: each may need its own action.
    for warning in report.warning_texts(spell):
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)


# Why a node is float32, in a few words read after a count ("12 on the black list"), by its rule
# (docs/precision.md, "Rules and their ids"); a gray node that follows another is counted as
# following the root it follows (``_follow_root``): "8 follow nodes on the black list".
_FLOAT32_WORDS = {
    "hard-no-schema": "without a schema", "hard-unknown-type": "with inputs of unknown type",
    "hard-container": "on sequence/optional values", "hard-tensor-attribute": "with float32 tensor attributes",
    "hard-function-body": "whose function body is float32 only", "hard-runtime-kernel": "without a LOW kernel",
    "hard-gpu-kernel": "without a GPU bfloat16 kernel",
    "hard-quantization": "quantization ops", "hard-schema": "refused LOW by the schema at this opset",
    "runtime-pin": "rejected in LOW by onnx.checker/onnxruntime", "user-block-op": "kept by block_ops",
    "user-keep-fp32": "kept by keep_fp32", "user-keep-bf16": "named by keep_bf16, without bf16 at this opset",
    "hard-constant": "fed by constants out of the LOW range",
    "data-tune": "kept by the accuracy search", "data-overflow": "overflowing on calibration data",
    "data-accumulation": "whose sums overflow on calibration data",
    "data-underflow": "underflowing on calibration data", "range-statistics": "normalization statistics",
    "data-envelope": "past the envelope within a given input range",
    "range-reduction": "long fp16 sums", "range-mask": "masked softmax", "black": "on the black list",
    "unlisted": "on no list (O1)", "gray-promote": "with disagreeing inputs (gray)",
    "gray-free": "without float inputs or outputs (gray)", "free-high": "needed float32 by a consumer",
    "structural": "with float32 subgraphs", "range-phase": "computing Cos/Sin angles from integers",
    "hard-bitcast": "BitCast (its types are its meaning)",
}
# ``data-overflow`` read from the default synthetic run (random inputs), not from calibration data.
_SYNTHETIC_OVERFLOW = "overflowing on the synthetic float32 run"
# Phrases that name nodes already ("normalization statistics"); the others read "follow nodes <phrase>".
_NODE_NOUNS = frozenset({"quantization ops", "normalization statistics", "long fp16 sums", "masked softmax"})
_QUANTIZATION_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearConv",
                               "QLinearMatMul", "ConvInteger", "MatMulInteger", "MatMulIntegerToFloat",
                               "DynamicQuantizeMatMul", "QAttention", "QGemm"})


def _follow_root(node: Dict[str, Any], by_name: Dict[str, Dict[str, Any]]) -> Tuple[str, Optional[Dict[str, Any]]]:
    """The first node (or graph input) up a gray node's chain of ``follows`` that decided by another rule."""
    seen = set()
    while node["rule"] == "gray-follow" and node.get("follows") and node["name"] not in seen:
        seen.add(node["name"])
        ahead = by_name.get(node["follows"])
        if ahead is None:  # a graph input (or a value no node produces)
            return "float32 graph inputs", None
        node = ahead
    return "", node


def _float32_cause(node: Dict[str, Any], by_name: Dict[str, Dict[str, Any]], synthetic: bool = False) -> str:
    """A float32 node's cause in a few words: its rule's, or that of the root it follows."""
    words, root = _follow_root(node, by_name)
    if root is None:
        return f"follow {words}"
    if root["op_type"] in _QUANTIZATION_OPS and root is not node:
        return "follow quantization scales"
    if synthetic and root["rule"] == "data-overflow":
        words = _SYNTHETIC_OVERFLOW
    else:
        words = _FLOAT32_WORDS.get(root["rule"], f"by rule {root['rule']}")
    if root is node:
        return words
    return f"follow {words}" if words in _NODE_NOUNS else f"follow nodes {words}"


def float32_by_rule_line(report: Report) -> str:
    """``float32: 15 node(s): 12 follow quantization scales, 3 needed float32 by a consumer``: why nodes stay float32."""
    return float32_causes(report.nodes, bool((report.calibration or {}).get("synthetic")))


def float32_causes(nodes: List[Dict[str, Any]], synthetic: bool = False) -> str:
    """``float32_by_rule_line`` from a report's node entries (the page reads them from the JSON).

    Every cause is named, most frequent first: one classification whatever else stays float32 (a cause
    folded into "N other" names nothing). ``synthetic``: the calibration statistics are the default
    synthetic run's, so an overflow the data guard saw is called that run's.
    """
    by_name = {n["name"]: n for n in nodes}
    causes = Counter(_float32_cause(n, by_name, synthetic) for n in nodes if n["precision"] == "HIGH")
    parts = [f"{count} {words}" for words, count in causes.most_common()]
    return f"float32: {sum(causes.values())} node(s): {', '.join(parts)}"


def _quantized_line(report: Report) -> str:
    """A model that is already quantized says so: its quantization ops run in integers, not LOW."""
    ops = Counter(n["op_type"] for n in report.nodes if n["op_type"] in _QUANTIZATION_OPS)
    if not ops:
        return ""
    listed = ", ".join(f"{op} {count}" for op, count in sorted(ops.items()))
    return (f"already quantized: {sum(ops.values())} quantization node(s) ({listed}) compute in integers; "
            "their scales are float32, and the float ops that follow them stay float32")


def nothing_to_convert_reason(report: Report) -> str:
    """Why a conversion changed nothing, in plain words."""
    return unchanged_reason(report.level, report.nodes, report.figures, report.dtype)


def unchanged_reason(level: str, nodes: List[Dict[str, Any]], figures: Optional[Dict[str, Any]], dtype: str) -> str:
    """``nothing_to_convert_reason`` from a report's values (the page reads them from the JSON)."""
    if level == "O0":
        return "level O0 changes no precision"
    if not any(n["precision"] in ("LOW", "HIGH") for n in nodes):
        return "no node computes in float32"
    if any(n["op_type"] in _QUANTIZATION_OPS for n in nodes):
        return "it is already quantized"
    figures = figures or {}
    if figures.get("heavy_low"):  # unchanged: the figures are the input's own
        return f"it is already mixed precision: {figures['heavy_low']} of {figures['heavy_nodes']} heavy op(s) run in {dtype}"
    return "every float32 node stays float32 for the reasons below"


def _figures_line(report: Report) -> str:
    """The GPU figures in one line: casts, the bytes they move per inference, heavy ops in LOW."""
    f = report.figures
    at = ", ".join(f"{name}={value}" for name, value in f["dims"].items()) or "the declared shapes"
    traffic = f"{f['cast_traffic_bytes'] / 1e6:.2f} MB"
    if f["cast_traffic_unknown"]:
        traffic += f" (+{f['cast_traffic_unknown']} cast(s) of unknown size)"
    low = _low_type_name(report.dtype)
    if report.fallback_dtype is not None:  # heavy ops LOW count both types
        low = f"{low} or {_low_type_name(report.fallback_dtype)}"
    return (
        f"GPU figures: {f['casts']} cast(s) moving {traffic} per inference at {at}; "
        f"{f['heavy_low']} of {f['heavy_nodes']} heavy op(s) (MatMul, Conv, attention, norms) in {low}"
    )


def _kv_cache_line(report: Report) -> str:
    """The KV cache in one line: the pairs found, their type, the bytes per step, and symbols left at 1."""
    cache = report.kv_cache
    pairs = cache["pairs"]
    shown = ", ".join(f"{p['past']} -> {p['present']}" for p in pairs[:2]) + (", ..." if len(pairs) > 2 else "")
    line = (
        f"KV cache: {len(pairs)} past/present pair(s) ({shown}) in {'/'.join(cache['types'])}; "
        f"{_mib(cache['bytes_read'])} read, {_mib(cache['bytes_written'])} written per step"
    )
    if "float32" in cache["types"]:
        line += f" ({named('kv_cache', 'low')} keeps it in the LOW type)"
    if cache["unset"]:
        line += f"; {', '.join(cache['unset'])} counted as 1 (give their sizes with {named('shapes')})"
    return line


def already_low_count(nodes: List[Dict[str, Any]]) -> int:
    """Nodes of a model converted before, whose main type is float16/bfloat16 already (rule ``already-low``)."""
    return sum(1 for n in nodes if n.get("rule") == "already-low")


def _nodes_line(report: Report) -> str:
    """``nodes: 7 LOW, 1 HIGH, 2 without float data``; a model converted before says so first
    (``nodes: 7 already in float16 (converted before), ...``), never "0 LOW" for what already runs LOW."""
    fallback = report.fallback_dtype
    three = f"{report.count('FALLBACK')} {fallback} (fallback where {report.dtype} overflows), " if fallback else ""
    already = already_low_count(report.nodes)
    without = f"{report.count('NONE') - already} without float data"
    counts = f"{report.count('LOW')} LOW, {three}{report.count('HIGH')} HIGH"
    if not already:
        return f"nodes: {counts}, {without}"
    record = _low_type_name(report.dtype)
    if report.unchanged:
        return f"nodes: {already} already in {record} (converted before), {report.count('HIGH')} float32, {without}"
    return f"nodes: {counts}, {already} already in {record} (converted before), {without}"


def _low_type_name(dtype: str) -> str:
    """The LOW type's name (``float16``) for its key, or the key itself when it names none."""
    from ampconv.core.lowtypes import LOW_TYPES  # numpy: only when a type is named in a line

    record = LOW_TYPES.get(dtype)
    return record.name if record is not None else str(dtype)


def render_warnings(report: Report, spell: Speller = Parameter.python_text) -> str:
    """Only the warnings, one ``ampconv: warning:`` line each: what ``-q`` still prints ("" when none)."""
    return "\n".join(f"ampconv: warning: {warning}" for warning in report.warning_texts(spell))


def envelope_texts(envelope: Optional[List[Dict[str, Any]]], dtype: str, calibration: Optional[Dict[str, Any]],
                   fallback_dtype: Optional[str] = None) -> List[str]:
    """One sentence per envelope entry: how far the input may grow, the node that limits it, and the fix.

    The parameters it names are ``named()`` markers (``spell_parameters`` spells them); the summary and the
    page both read these.
    """
    if not envelope:
        return []
    calibration = calibration or {}
    seen = "the synthetic run's sample" if calibration.get("synthetic") else \
        "the random samples" if calibration.get("random") else "the calibration samples"
    texts = []
    for entry in envelope:
        name = entry["input"]
        text = (f"{dtype} holds while |{name}| <= {entry['holds_to']:.3g} ({entry['op_type']} "
                f"{entry['limited_by']!r} overflows beyond); {seen} reached {entry['sample_max']:.3g}")
        if entry.get("reach") is None:
            text += (f"; if {name} reaches further, give its range with {named('input_ranges')} or samples "
                     f"with {named('calibration_data')}")
        else:
            text += f"; {named('input_ranges')} says it reaches {entry['reach']:g}"
            if entry.get("acted"):
                text += f": {entry['acted']} node(s) past that run {fallback_dtype or 'float32'} (data-envelope)"
        texts.append(text)
    return texts


def _data_lines(report: Report, verbose: bool = False) -> List[str]:
    """What calibration data and the accuracy search decided: the data-rule nodes with their evidence.

    Guards are grouped by rule and notes by wording (``_grouped``); ``verbose`` lists every one.
    """
    if report.calibration is None:
        return []
    cal = report.calibration
    kind = "random (seeded)" if cal["random"] else "from files"
    lines = [f"  calibration: {cal['samples']} sample(s) {kind}, {cal['tensors']} tensors observed"]
    lines.extend(_grouped(
        [(n["rule"], f"  data guard: {n['name']} ({n['op_type']}) "
                     f"{'runs ' + str(report.fallback_dtype) if n['precision'] == 'FALLBACK' else 'kept float32'}: "
                     f"{n['reason']}")
         for n in report.nodes if n["rule"].startswith("data-") and n["rule"] != "data-tune"],
        verbose,
    ))
    lines.extend(_grouped(
        [(line_kind(note), f"  calibration note: {note}") for note in cal.get("notes", ())], verbose
    ))
    tune = report.tune
    if tune is not None:
        verdict = "passes" if tune["passed"] else "could not pass"
        lines.append(
            f"  tune: {verdict} after {tune['evaluations']} evaluation(s) (budget {tune['budget']}, "
            f"{tune['low_nodes']} LOW nodes after the guards), {len(tune['kept'])} node(s) kept float32"
        )
        lines.extend(_grouped(
            [(line_kind(kept["evidence"]),
              f"  tune: {kept['node']} ({kept['op_type'] or '?'}) kept float32: {kept['evidence']}")
             for kept in tune["kept"]],
            verbose,
        ))
        lines.extend(_grouped([(line_kind(note), f"  tune note: {note}") for note in tune.get("notes", ())], verbose))
    lines.extend(release_lines(report.release, verbose))
    return lines


def release_lines(release: Optional[Dict[str, Any]], verbose: bool = False) -> List[str]:
    """What the release step tried and decided (``calibration.release``); empty when it had nothing to try."""
    if release is None:
        return []
    lines = [
        f"  release: {release['lowered']} of {release['nodes']} float32 node(s) in {release['islands']} island(s) "
        f"lowered on {release['evidence']}, {release['evaluations']} evaluation(s) (budget {release['budget']}, "
        f"{release['seconds']:.2f} s)"
    ]
    lines.extend(_grouped(
        [("release kept", f"  release: {', '.join(entry['nodes'])} kept float32: {entry['error']}")
         for entry in release["kept"]], verbose))
    lines.extend(_grouped([(line_kind(note), f"  release note: {note}") for note in release.get("notes", ())],
                          verbose))
    return lines


def render_plan(report: Report, spell: Speller = Parameter.python_text) -> str:
    """``--dry-run`` output: one line per node with its precision and reason."""
    lines = [render_text(report, spell=spell)]
    lines.append("plan:")
    for n in report.nodes:
        graph = "" if n["graph"] == "main" else f"[{n['graph']}] "
        lines.append(f"  {n['precision']:4s} {graph}{n['name']} ({n['op_type']}): {n['reason']}")
    return "\n".join(lines)
