"""Run ampconv over the ONNX backend test corpus and summarize what happened.

The corpus: every single-operator case of ``onnx.backend.test.case.node``
(about 1,900 models with inputs and expected outputs) plus the model folders
of ``onnx/backend/test/data/`` (``pytorch-converted``, ``pytorch-operator``,
``simple``, ``light``; light models ship without test inputs, so they run on
seeded random inputs).

For each case, and each (level, dtype) combination:

1. Eligible: the float32 original loads and runs in onnxruntime (CPU) on the
   case's inputs. Its outputs are the reference. Ineligible cases are counted
   with the reason and otherwise skipped.
2. Converted: ``ampconv.convert`` returns a report. An ``AmpconvError`` is a
   reported refusal (not converted, with its message); any other exception is
   a crash (not converted, with the traceback's last line).
3. Loaded: the output passes ``onnx.checker`` (full; only the basic check
   when the original itself fails the full one) and runs in onnxruntime
   on the inputs. bfloat16: the CPU provider has no bf16 kernels, so it must
   *resolve* (session creation fails only with NOT_IMPLEMENTED, and the report
   says so in a note) and its float32 emulation must run.
4. Accurate: the emulated converted model (every LOW tensor rounded to the
   LOW type, ``ampconv.numerics.emulate``) agrees with the float32 reference
   within the dtype's default tolerance (``DEFAULT_TOLERANCES``); non-float
   outputs must be equal.
5. Explained: not accurate, but ``ampconv.validate`` localizes the drift to a
   node that the conversion report names as LOW, and the reason is one of the
   categories of ``explain()``. Everything else is *failed*.

Usage::

    python scripts/corpus.py --out docs/corpus_summary.md [--json rows.json]
    python scripts/corpus.py --sample 60 --seed 0 --levels O1,O2 --dtypes fp16

Importable: ``collect_cases``, ``sample_cases``, ``run_case``, ``run_corpus``,
``summarize`` and ``render_markdown`` are what tests/end_to_end/test_corpus.py uses.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import glob
import json
import multiprocessing
import os
import random
import signal
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

LEVELS = ("O1", "O2", "O3")
DTYPES = ("fp16", "bf16")
DATA_SOURCES = ("pytorch-converted", "pytorch-operator", "simple", "light")
SOURCES = ("node",) + DATA_SOURCES
DEFAULT_TIMEOUT_S = 60
DEFAULT_WORKERS = 2

# Filled in the parent before the worker pool forks, so workers inherit the
# generated node cases instead of generating them again (5 s each).
_NODE_CASES: Dict[str, object] = {}


# ------------------------------------------------------------------ cases
@dataclasses.dataclass(frozen=True)
class Case:
    """One corpus model: ``source`` is ``node`` or a data folder name."""

    name: str
    source: str
    path: str = ""  # model file for data cases; empty for node cases

    @property
    def key(self) -> str:
        return f"{self.source}/{self.name}"


def _data_root() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data"


def _load_node_cases() -> Dict[str, object]:
    if not _NODE_CASES:
        import onnx.backend.test.case.node as node_cases

        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for case in node_cases.collect_testcases():
                _NODE_CASES[case.name] = case
    return _NODE_CASES


def collect_cases(sources: Sequence[str] = SOURCES) -> List[Case]:
    """Every case of the chosen sources, in a stable order."""
    cases: List[Case] = []
    if "node" in sources:
        cases += [Case(name, "node") for name in sorted(_load_node_cases())]
    root = _data_root()
    for source in DATA_SOURCES:
        if source not in sources:
            continue
        folder = root / source
        if source == "light":
            for model in sorted(folder.glob("*.onnx")):
                cases.append(Case(model.stem, source, str(model)))
            continue
        for model in sorted(folder.glob("*/model.onnx")):
            cases.append(Case(model.parent.name, source, str(model)))
    return cases


def sample_cases(cases: Sequence[Case], n: Optional[int], seed: int) -> List[Case]:
    """A seeded sample of ``n`` cases (all of them when ``n`` is None), in corpus order."""
    if n is None or n >= len(cases):
        return list(cases)
    chosen = set(random.Random(seed).sample(range(len(cases)), n))
    return [c for i, c in enumerate(cases) if i in chosen]


# --------------------------------------------------------------- materialize
@dataclasses.dataclass
class Materialized:
    """A case on disk: the model, feeds for onnxruntime, and a test-data folder."""

    model: str
    feeds: Dict[str, object]
    data_dir: Optional[str]  # test_data_set folder with tensor inputs; None if not writable
    random_inputs: bool = False


def materialize(case: Case, tmp: str) -> Materialized:
    """Write ``case`` into ``tmp`` (node cases) or read its inputs (data cases)."""
    if case.source == "node":
        tc = _load_node_cases()[case.name]
        model = tc.model
        path = os.path.join(tmp, "model.onnx")
        onnx.save(model, path)
        inputs = [_as_feed(v) for v in tc.data_sets[0][0]] if tc.data_sets else []
        names = [i.name for i in model.graph.input]
        feeds = dict(zip(names, inputs))
        return Materialized(path, feeds, _write_test_set(feeds, tmp))
    model = onnx.load(case.path, load_external_data=False)
    folder = os.path.dirname(case.path)
    sets = sorted(glob.glob(os.path.join(folder, "test_data_set_*")))
    if case.source == "light" or not sets:
        feeds = _random_feeds(model)
        return Materialized(case.path, feeds, _write_test_set(feeds, tmp), random_inputs=True)
    feeds = {}
    inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    for index, vi in enumerate(inputs):
        pb = os.path.join(sets[0], f"input_{index}.pb")
        if os.path.exists(pb):
            feeds[vi.name] = _read_pb(pb, vi.type)
    return Materialized(case.path, feeds, sets[0] if _all_tensors(feeds) else None)


def _as_feed(value) -> object:
    """Node cases store some inputs as TensorProto (exotic types) or numpy scalars: give onnxruntime arrays."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, list):
        return [_as_feed(v) for v in value]
    return value


def _read_pb(path: str, type_proto) -> object:
    with open(path, "rb") as f:
        data = f.read()
    kind = type_proto.WhichOneof("value")
    if kind == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(data)
        return numpy_helper.to_list(proto)
    if kind == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(data)
        return numpy_helper.to_optional(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(data)
    return numpy_helper.to_array(proto)


def _all_tensors(feeds: Dict[str, object]) -> bool:
    return all(isinstance(v, np.ndarray) for v in feeds.values())


def _write_test_set(feeds: Dict[str, object], tmp: str) -> Optional[str]:
    """input_<i>.pb files ampconv.validate can read; None when an input is not a tensor."""
    if not _all_tensors(feeds):
        return None
    folder = os.path.join(tmp, "test_data_set_0")
    os.makedirs(folder, exist_ok=True)
    for index, (name, array) in enumerate(feeds.items()):
        try:
            tensor = numpy_helper.from_array(array, name)
        except Exception:  # noqa: BLE001 -- exotic dtypes (float8, int4): validation cannot feed them
            return None
        with open(os.path.join(folder, f"input_{index}.pb"), "wb") as f:
            f.write(tensor.SerializeToString())
    return folder


_NP_TYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64, 9: np.bool_, 10: np.float16, 11: np.float64}


def _random_feeds(model: onnx.ModelProto) -> Dict[str, object]:
    rng = np.random.default_rng(0)
    init = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else 1 for d in t.shape.dim]
        dtype = _NP_TYPES.get(t.elem_type, np.float32)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


# ------------------------------------------------------------------ running
class CaseTimeout(BaseException):
    """Raised by SIGALRM inside a worker; BaseException so no `except Exception` swallows it."""


@contextlib.contextmanager
def _deadline(seconds: Optional[int]):
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def _raise(signum, frame):  # noqa: ARG001 -- signal handler signature
        raise CaseTimeout(f"timed out after {seconds} s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(int(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _session(path: str):
    import onnxruntime as ort

    ort.set_default_logger_severity(4)  # kernels refusing a type log before raising; we report it
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


_ORT_FLOATS = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}


def _run(path: str, feeds: Dict[str, object]) -> Dict[str, object]:
    session = _session(path)
    names = [o.name for o in session.get_outputs()]
    ready = {}
    for arg in session.get_inputs():
        if arg.name not in feeds:
            continue
        value = feeds[arg.name]
        want = _ORT_FLOATS.get(arg.type)
        # The emulated copy declares float32 where the model had float16 inputs:
        # feed the same values widened (exact), as ampconv.validate's runner does.
        if want is not None and isinstance(value, np.ndarray) and value.dtype.kind == "f" and value.dtype != want:
            value = value.astype(want)
        ready[arg.name] = value
    outs = session.run(names, ready)
    return dict(zip(names, outs))


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    text = lines[0] if lines else type(exc).__name__
    text = f"{type(exc).__name__}: {text}" if not isinstance(exc, _ampconv_error()) else text
    return text if len(text) <= 240 else text[:237] + "..."


def _ampconv_error():
    from ampconv.errors import AmpconvError

    return AmpconvError


def _crash_line(exc: BaseException) -> str:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return f"crash: {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}{where}"


def run_case(
    case: Case,
    levels: Sequence[str] = LEVELS,
    dtypes: Sequence[str] = DTYPES,
    timeout: Optional[int] = DEFAULT_TIMEOUT_S,
) -> List[dict]:
    """Every (level, dtype) row for one case (see the module docstring for the stages)."""
    rows: List[dict] = []
    base = {"case": case.name, "source": case.source}
    with tempfile.TemporaryDirectory(prefix="ampconv-corpus-") as tmp, warnings.catch_warnings(), np.errstate(
        all="ignore"
    ):
        warnings.simplefilter("ignore")
        try:
            with _deadline(timeout):
                mat = materialize(case, tmp)
                reference = _run(mat.model, mat.feeds)
        except CaseTimeout as exc:
            return [dict(base, level=lv, dtype=dt, eligible=False, status="ineligible",
                         reason=f"float32 original: {exc}") for lv in levels for dt in dtypes]
        except Exception as exc:  # noqa: BLE001 -- onnxruntime or onnx refusing the original
            reason = f"float32 original does not run in onnxruntime: {_one_line(exc)}"
            return [dict(base, level=lv, dtype=dt, eligible=False, status="ineligible", reason=reason)
                    for lv in levels for dt in dtypes]
        for level in levels:
            for dtype in dtypes:
                start = time.perf_counter()
                row = dict(base, level=level, dtype=dtype, eligible=True, random_inputs=mat.random_inputs)
                try:
                    with _deadline(timeout):
                        row.update(_run_combo(mat, reference, level, dtype, tmp))
                except CaseTimeout as exc:
                    row.update(status="failed", stage="timeout", reason=str(exc))
                row["seconds"] = round(time.perf_counter() - start, 3)
                rows.append(row)
    return rows


def _run_combo(mat: Materialized, reference: Dict[str, object], level: str, dtype: str, tmp: str) -> dict:
    import ampconv
    from ampconv.errors import AmpconvError

    dst = os.path.join(tmp, f"converted.{level}.{dtype}.onnx")
    out = {"converted": False, "loaded": False, "accurate": False, "explained": False}
    # Stage 2: convert.
    try:
        report = ampconv.convert(mat.model, dst, ampconv.Config(level=level, dtype=dtype, overwrite=True))
    except AmpconvError as exc:
        return dict(out, status="failed", stage="convert-refused", reason=_one_line(exc))
    except Exception as exc:  # noqa: BLE001 -- a crash is exactly what we count
        return dict(out, status="failed", stage="convert-crash", reason=_crash_line(exc))
    out["converted"] = True
    out["low_nodes"] = report.count("LOW")
    # Stage 3: checker, interface types kept (keep_io_types), native run (fp16)
    # or resolve (bf16), emulated run.
    try:
        # Held to what the original passes: onnx's shape inference rejects a few
        # valid originals (MeanVarianceNormalization without axes), and then
        # only the basic checker can be asked of the output.
        onnx.checker.check_model(dst, full_check=_passes_full_check(mat.model))
    except Exception as exc:  # noqa: BLE001
        return dict(out, status="failed", stage="checker", reason=_one_line(exc))
    changed = _interface_changes(mat.model, dst)
    if changed:
        return dict(out, status="failed", stage="interface", reason=changed)
    native_note = None
    try:
        _run(dst, mat.feeds)
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        bf16_missing_kernel = dtype == "bf16" and "NOT_IMPLEMENTED" in text
        if not bf16_missing_kernel:
            return dict(out, status="failed", stage="onnxruntime", reason=_one_line(exc))
        if not any("bfloat16" in n for n in report.notes):
            return dict(out, status="failed", stage="onnxruntime",
                        reason="bf16 model lacks CPU kernels but the report has no note saying so")
        native_note = "resolves (no CPU bf16 kernels)"
    try:
        emulated = _emulated_run(dst, mat.feeds, tmp)
    except Exception as exc:  # noqa: BLE001
        return dict(out, status="failed", stage="emulation", reason=_one_line(exc))
    out["loaded"] = True
    if native_note:
        out["note"] = native_note
    # Stage 4: accuracy against the float32 reference.
    drift = _compare(reference, emulated, dtype)
    if drift is None:
        return dict(out, accurate=True, status="accurate")
    out["drift"] = drift
    # Stage 5: explanation.
    explanation, node = explain(mat, dst, report, level, dtype)
    out["node"] = node
    if explanation is not None:
        return dict(out, explained=True, status="explained", reason=explanation)
    return dict(out, status="failed", stage="accuracy", reason=f"{drift}; not explained" + (f" (localized: {node})" if node else ""))


def _passes_full_check(path: str) -> bool:
    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception:  # noqa: BLE001
        return False
    return True


def _interface_changes(src: str, dst: str) -> Optional[str]:
    """With keep_io_types (the default) every graph input and output keeps its type.

    An initializer the source also lists as a graph input is a weight (old exporters list every weight
    so), not part of the interface: it takes its readers' type (docs/precision.md sec. 8).
    """
    a = onnx.load(src, load_external_data=False).graph
    b = onnx.load(dst, load_external_data=False).graph
    weights = {t.name for t in a.initializer}
    before = {v.name: _elem_types(v.type) for v in list(a.input) + list(a.output) if v.name not in weights}
    after = {v.name: _elem_types(v.type) for v in list(b.input) + list(b.output)}
    for name, t in before.items():
        if name in after and after[name] != t:
            return f"graph input/output {name} changed type"
    return None


def _elem_types(type_proto) -> str:
    """``sequence(tensor(1))``-style signature without shapes (inference may add shapes)."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return f"tensor({type_proto.tensor_type.elem_type})"
    if kind in ("sequence_type", "optional_type"):
        inner = getattr(type_proto, kind).elem_type
        return f"{kind}({_elem_types(inner)})"
    return kind or "?"


def _emulated_run(dst: str, feeds: Dict[str, object], tmp: str) -> Dict[str, object]:
    import onnx_ir as ir

    from ampconv.numerics.emulate import emulate

    model = ir.load(dst)
    emulate(model)
    path = os.path.join(tmp, "emulated.onnx")
    ir.save(model, path)
    return _run(path, feeds)


def _compare(reference: Dict[str, object], converted: Dict[str, object], dtype: str) -> Optional[str]:
    """None when every output agrees; otherwise a one-line description of the first drift."""
    from ampconv.numerics.metrics import compare
    from ampconv.validation.options import DEFAULT_TOLERANCES

    rtol, atol = DEFAULT_TOLERANCES[dtype]
    for name, ref in reference.items():
        if name not in converted:
            return f"output {name} missing"
        problem = _compare_one(name, ref, converted[name], rtol, atol, compare)
        if problem:
            return problem
    return None


def _compare_one(name, ref, conv, rtol, atol, compare) -> Optional[str]:
    if isinstance(ref, list) or isinstance(conv, list):
        if not isinstance(ref, list) or not isinstance(conv, list) or len(ref) != len(conv):
            return f"output {name}: sequence lengths differ"
        for k, (r, c) in enumerate(zip(ref, conv)):
            problem = _compare_one(f"{name}[{k}]", r, c, rtol, atol, compare)
            if problem:
                return problem
        return None
    if ref is None or conv is None:
        return None if ref is None and conv is None else f"output {name}: optional presence differs"
    ref, conv = np.asarray(ref), np.asarray(conv)
    exact = ref.dtype.kind not in "fc"
    if exact:
        if ref.shape != conv.shape or not np.array_equal(ref, conv):
            return f"output {name} ({ref.dtype}): {int(np.sum(ref != conv)) if ref.shape == conv.shape else 'shape'} element(s) differ"
        return None
    try:
        m = compare(ref, conv, rtol, atol)
    except ValueError as exc:
        return f"output {name}: {exc}"
    if m.passed:
        return None
    return f"output {name}: max_abs {m.max_abs:.3g}, max_rel {m.max_rel:.3g}, {m.mismatched}/{m.size} over tolerance, {m.new_nonfinite} new non-finite"


# ------------------------------------------------------------ explanations
def _o2_class(op_type: str) -> str:
    from ampconv.policy import load_policy

    policy = load_policy(level="O2")
    domain, _, op = op_type.rpartition("::")
    return policy.class_of(domain, op)


def explain(mat: Materialized, dst: str, report, level: str, dtype: str) -> Tuple[Optional[str], Optional[str]]:
    """(explanation or None, localized node or None) for a drifting conversion.

    The drift is explained only when ``ampconv.validate`` (emulate backend,
    localization on, the report's decisions) names a node that the report
    planned LOW (a widening Cast that ampconv inserted is traced back to the
    node it widens), or, when only an integer output differs, a LOW node feeds
    the op that produced it; and one of these holds:

    1. O3 forced the node LOW while the O2 plan of the same model keeps it
       float32 (a BLACK op, or a gray op following one): the policy cannot
       keep it HIGH at O3.
    2. LOW range: the node's output overflows to inf (new non-finite values)
       on these inputs. The report names the node LOW and its rule; the
       float32 reference exceeds the LOW type's largest finite value there
       (65504 for fp16; for bf16, float32's own extremes such as a mask of
       float32 lowest).
    3. The node's output is discrete (comparison, rounding, argmax...) and
       decided on rounded LOW inputs: a one-ulp change flips a decision.
    """
    import ampconv

    if mat.data_dir is None:
        return None, None
    decisions = report.decisions_by_node()
    try:
        result = ampconv.validate(
            mat.model,
            dst,
            ampconv.ValidateOptions(inputs=(mat.data_dir,), backend="emulate", localize=True, decisions=decisions),
        )
    except Exception as exc:  # noqa: BLE001
        return None, f"(validate failed: {_one_line(exc)})"
    loc = result.localization
    if result.passed:
        return None, "(ampconv.validate passes where the corpus comparison fails)"
    if loc is not None and loc.node is not None:
        name = _planned_node(dst, loc.node, decisions)
        new_nonfinite = bool(loc.new_nonfinite)
    else:
        # No float value drifts past tolerance, yet an integer output differs:
        # a quantization or rounding step landed on the other side. Blame the
        # LOW node feeding the op that produced that integer output.
        name = _low_feeder_of_integer_output(dst, decisions)
        if name is None:
            return None, None
        new_nonfinite = False
    node = f"{name} ({_op_of(report, name) or (loc.op_type if loc is not None else '?')})"
    decision = decisions.get(name)
    if decision is None or decision["precision"] != "LOW":
        return None, node
    op = _op_of(report, name) or ""
    if level == "O3" and decision["rule"] == "level-O3":
        o2 = ampconv.convert(mat.model, None, ampconv.Config(level="O2", dtype=dtype), dry_run=True)
        at_o2 = o2.decisions_by_node().get(name)
        if at_o2 is not None and at_o2["precision"] == "HIGH":
            return f"O3 forces {op} LOW; at O2 it stays float32 ({at_o2['rule']})", node
    if new_nonfinite:
        return (
            f"{dtype} range: {op} output overflows to inf on these inputs, where float32 exceeds "
            f"{dtype}'s largest finite value (planned LOW: {decision['rule']})",
            node,
        )
    if op in DISCRETE_OUTPUT_OPS:
        return (
            f"{op} decides on rounded {dtype} inputs (rule {decision['rule']}): a one-ulp input change flips "
            f"its discrete result",
            node,
        )
    return None, node


def _low_feeder_of_integer_output(dst: str, decisions) -> Optional[str]:
    """The first LOW planned node feeding the producer of an integer graph output, if any."""
    model = onnx.load(dst, load_external_data=False)
    producers = {o: n for n in model.graph.node for o in n.output}
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    for output in model.graph.output:
        if output.type.tensor_type.elem_type in floats or output.name not in producers:
            continue
        for tensor in producers[output.name].input:
            feeder = producers.get(tensor)
            if feeder is None:
                continue
            name = _planned_node(dst, feeder.name, decisions)
            if decisions.get(name, {}).get("precision") == "LOW":
                return name
    return None


def _op_of(report, name: str) -> Optional[str]:
    return next((n["op_type"] for n in report.nodes if n["name"] == name), None)


def _planned_node(dst: str, name: str, decisions) -> str:
    """``name``, or for a Cast ampconv inserted, the planned node whose output it casts."""
    if name in decisions:
        return name
    model = onnx.load(dst, load_external_data=False)
    producers = {o: n for n in model.graph.node for o in n.output}
    node = next((n for n in model.graph.node if n.name == name), None)
    while node is not None and node.op_type == "Cast" and node.name not in decisions and node.input:
        node = producers.get(node.input[0])
    return node.name if node is not None and node.name in decisions else name


# Ops whose output changes in steps: a LOW rounding of the input may move a
# value across a step (Floor(2.9999) vs Floor(3.0)) or flip an order.
DISCRETE_OUTPUT_OPS = frozenset(
    "Floor Ceil Round Sign ArgMax ArgMin TopK Equal Less LessOrEqual Greater GreaterOrEqual IsInf IsNaN "
    "Mod Hardmax NonZero Unique".split()
)


# ------------------------------------------------------------- orchestration
def _worker(args) -> List[dict]:
    case, levels, dtypes, timeout = args
    try:
        return run_case(case, levels, dtypes, timeout)
    except BaseException as exc:  # noqa: BLE001 -- never lose a row because the harness broke
        return [
            {"case": case.name, "source": case.source, "level": lv, "dtype": dt, "eligible": True,
             "status": "failed", "stage": "harness", "reason": _crash_line(exc)}
            for lv in levels for dt in dtypes
        ]


def run_corpus(
    cases: Sequence[Case],
    levels: Sequence[str] = LEVELS,
    dtypes: Sequence[str] = DTYPES,
    workers: int = DEFAULT_WORKERS,
    timeout: Optional[int] = DEFAULT_TIMEOUT_S,
    progress: bool = False,
) -> List[dict]:
    """Rows for every case and combination; ``workers`` > 1 uses a forked process pool."""
    if any(c.source == "node" for c in cases):
        _load_node_cases()  # before forking: the workers inherit it
    jobs = [(c, tuple(levels), tuple(dtypes), timeout) for c in cases]
    rows: List[dict] = []
    start = time.perf_counter()
    if workers <= 1:
        results: Iterable[List[dict]] = map(_worker, jobs)
    else:
        ctx = multiprocessing.get_context("fork")
        pool = ctx.Pool(workers, maxtasksperchild=50)
        results = pool.imap(_worker, jobs, chunksize=1)
    try:
        for done, case_rows in enumerate(results, 1):
            rows.extend(case_rows)
            if progress and (done % 50 == 0 or done == len(jobs)):
                print(f"  {done}/{len(jobs)} cases, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    finally:
        if workers > 1:
            pool.close()
            pool.join()
    return rows


def summarize(rows: Sequence[dict]) -> List[dict]:
    """One line per (level, dtype): cases, eligible, converted, loaded, accurate, explained, failed."""
    table = collections.OrderedDict()
    for row in rows:
        key = (row["level"], row["dtype"])
        t = table.setdefault(key, collections.Counter())
        t["cases"] += 1
        if not row["eligible"]:
            continue
        t["eligible"] += 1
        t["converted"] += bool(row.get("converted"))
        t["loaded"] += bool(row.get("loaded"))
        t["accurate"] += row["status"] == "accurate"
        t["explained"] += row["status"] == "explained"
        t["failed"] += row["status"] == "failed"
    order = {lv: i for i, lv in enumerate(LEVELS)}
    dorder = {d: i for i, d in enumerate(DTYPES)}
    return [
        dict(level=lv, dtype=dt, **{k: t[k] for k in ("cases", "eligible", "converted", "loaded", "accurate", "explained", "failed")})
        for (lv, dt), t in sorted(table.items(), key=lambda kv: (order.get(kv[0][0], 9), dorder.get(kv[0][1], 9)))
    ]


def render_markdown(rows: Sequence[dict], command: str, seconds: float) -> str:
    """The committed summary: table, explained drift, failures, ineligible reasons."""
    import onnxruntime

    lines = [
        "# ONNX backend corpus: ampconv summary",
        "",
        f"Generated by `{command}` (onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}, "
        f"{len({(r['source'], r['case']) for r in rows})} cases, {seconds:.0f} s). Do not edit by hand.",
        "",
        "A case is *eligible* when its float32 original loads and runs in onnxruntime (CPU). "
        "*converted*: `ampconv.convert` returned without error; *loaded*: the output passes "
        "`onnx.checker` (full, or basic where the original fails the full check) and runs in onnxruntime (bf16: resolves, and its float32 emulation runs); "
        "*accurate*: emulated outputs within the dtype's default tolerance of the float32 outputs "
        "(fp16 rtol=atol=1e-2, bf16 5e-2), non-float outputs equal; *explained*: drift localized to a node "
        "the report names LOW for a reason listed below; *failed*: anything else.",
        "",
        "| level | dtype | cases | eligible | converted | loaded | accurate | explained | failed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summarize(rows):
        lines.append(
            f"| {s['level']} | {s['dtype']} | {s['cases']} | {s['eligible']} | {s['converted']} | {s['loaded']} "
            f"| {s['accurate']} | {s['explained']} | {s['failed']} |"
        )
    explained = [r for r in rows if r["status"] == "explained"]
    lines += ["", "## Failures explained", ""]
    if not explained:
        lines.append("None.")
    groups = collections.defaultdict(list)
    for r in explained:
        groups[_category(r["reason"])].append(r)
    for cat, rs in sorted(groups.items()):
        lines.append(f"- **{cat}** ({len(rs)}): " + ", ".join(
            sorted({f"`{r['case']}` {r['level']}/{r['dtype']} at {r.get('node')}" for r in rs})[:12]
        ) + (" ..." if len(rs) > 12 else ""))
    failed = [r for r in rows if r["status"] == "failed"]
    lines += ["", "## Failures (not explained)", ""]
    if not failed:
        lines.append("None.")
    for r in sorted(failed, key=lambda r: (r.get("stage", ""), r["source"], r["case"], r["level"], r["dtype"])):
        lines.append(f"- `{r['source']}/{r['case']}` {r['level']}/{r['dtype']} [{r.get('stage')}]: {r.get('reason')}")
    inel = collections.Counter(_ineligible_reason(r["reason"]) for r in rows if not r["eligible"] and r["level"] == rows[0]["level"] and r["dtype"] == rows[0]["dtype"])
    lines += ["", "## Ineligible cases (float32 original does not run in onnxruntime)", ""]
    if not inel:
        lines.append("None.")
    for reason, n in inel.most_common():
        lines.append(f"- {n}: {reason}")
    return "\n".join(lines) + "\n"


def _category(reason: str) -> str:
    if reason.startswith("O3 forces"):
        return "O3 forces LOW a node that O2 keeps float32"
    if reason.startswith(("fp16 range", "bf16 range")):
        return f"{reason[:4]} range: a LOW node's output overflows on the case's inputs"
    if "discrete result" in reason:
        return "discrete output decided on rounded inputs"
    return reason


def _ineligible_reason(reason: str) -> str:
    text = reason.replace("float32 original does not run in onnxruntime: ", "")
    for marker in ("Unsupported model IR version", "opset", "NOT_IMPLEMENTED", "Could not find an implementation"):
        if marker in text:
            idx = text.find(marker)
            return text[idx: idx + 90]
    return text[:120]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default=",".join(LEVELS))
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--sources", default=",".join(SOURCES))
    parser.add_argument("--sample", type=int, default=None, help="run a seeded sample of N cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--case", action="append", default=[], help="only cases whose name contains this")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT_S, help="seconds per case and combination")
    parser.add_argument("--out", default=None, help="markdown summary file")
    parser.add_argument("--json", dest="json_path", default=None, help="every row as JSON")
    args = parser.parse_args(argv)
    levels = [x for x in args.levels.split(",") if x]
    dtypes = [x for x in args.dtypes.split(",") if x]
    cases = collect_cases([s for s in args.sources.split(",") if s])
    if args.case:
        cases = [c for c in cases if any(p in c.name for p in args.case)]
    cases = sample_cases(cases, args.sample, args.seed)
    start = time.perf_counter()
    rows = run_corpus(cases, levels, dtypes, args.workers, args.timeout, progress=True)
    seconds = time.perf_counter() - start
    command = "python scripts/corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = render_markdown(rows, command.strip(), seconds)
    if args.out:
        Path(args.out).write_text(text)
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=1, default=str))
    for s in summarize(rows):
        print(" ".join(f"{k}={v}" for k, v in s.items()))
    failed = sum(1 for r in rows if r["status"] == "failed")
    print(f"{len(cases)} cases, {failed} failed rows, {seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
