"""Seeded fuzzing of the CLI (scripts/fuzz.py): malformed inputs, and valid models (scripts/fuzz_valid.py).

Malformed family: CI runs a bounded sample (150 cases of one seed, a few
seconds on 2 cores); ``python scripts/fuzz.py --cases 1000 --seed S`` runs
more. Every case must end in exit 0 with a model that passes onnx.checker, or
in exit 1/2 (3 for validate over tolerance) with exactly one ``ampconv:
error:`` line on stderr: never a traceback, never a file left behind on error,
never a changed input. A failure prints the summary with a one-line repro per
case; replay one with ``python scripts/fuzz.py --seed S --case N -v --keep /tmp/caseN``.

Valid family: models onnxruntime runs, in the graph shapes of issue 19
(computed/empty/omitted Resize inputs, untyped subgraph outputs...). Each must
convert four ways (fp16, O3, bf16, --no-keep-io-types) to a model that loads
and, but for bf16, runs and matches float32. CI runs VALID_SAMPLE cases
(about 20 s; a minute when every case fails); ``python scripts/fuzz.py --family valid --cases 500 --seed S``
runs more, ``--family valid --seed S --case N -v --keep DIR`` replays one.
Besides the sample: the generator is deterministic, and every ingredient it
claims shows up in the model it builds, which onnxruntime runs.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import os
import signal
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

pytestmark = pytest.mark.fuzz

_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fuzz.py"
_spec = importlib.util.spec_from_file_location("ampconv_fuzz", _SCRIPT)
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["ampconv_fuzz"] = fuzz
_spec.loader.exec_module(fuzz)

SAMPLE, SEED = 150, 2024


def test_cases_are_deterministic():
    for index in (0, 7, 42):
        a, b = fuzz.make_case(SEED, index), fuzz.make_case(SEED, index)
        assert (a.command, a.description, a.args, a.files) == (b.command, b.description, b.args, b.files)


@pytest.mark.parametrize("base", sorted(fuzz.BASES))
def test_unmutated_bases_convert(base):
    """The harness is not vacuous: every base model converts and the judge calls it ok."""
    data, side = fuzz.base_files(base)
    case = fuzz.Case(SEED, -1, "convert", base, "unmutated", {fuzz.MODEL: data, **dict(side)},
                     ["convert", "{dir}/" + fuzz.MODEL, "-o", "{dir}/" + fuzz.OUTPUT, "--report", "{dir}/" + fuzz.REPORT],
                     (fuzz.OUTPUT, fuzz.OUTPUT + ".data", fuzz.REPORT))
    outcome = fuzz.run_case(case)
    assert outcome.status == "ok", (outcome.status, outcome.exit_code, outcome.detail)


def test_a_clean_error_is_judged_clean():
    case = fuzz.Case(SEED, -1, "convert", "-", "not a model", {fuzz.MODEL: b"not a model at all"},
                     ["convert", "{dir}/" + fuzz.MODEL, "-o", "{dir}/" + fuzz.OUTPUT], (fuzz.OUTPUT,))
    outcome = fuzz.run_case(case)
    assert outcome.status == "error" and outcome.exit_code == 1, (outcome.status, outcome.detail)


def test_fuzz_sample_has_no_failures():
    outcomes = fuzz.run_fuzz(SAMPLE, SEED)
    summary = fuzz.render_summary(outcomes)
    statuses = {o.status for o in outcomes}
    assert {"ok", "error"} <= statuses, summary  # the sample exercises both ends
    if any(o.failed for o in outcomes):
        pytest.fail("\n" + summary, pytrace=False)


# Cases that once ended in a traceback (seed, case), each a distinct cause: a policy
# JSON nested too deeply, a lone surrogate op name, a non-UTF-8 op type, graph name
# and external-data location, a truncated weight and a dim of 2**40 in a converted
# model given to validate, nodes out of order and a sparse initializer under
# validate, a negative dimension of an external tensor.
REGRESSIONS = [(0, 14), (0, 248), (0, 262), (0, 771), (1, 226), (1, 251), (1, 280), (1, 2512), (2, 0)]


@pytest.mark.parametrize("seed,index", REGRESSIONS)
def test_former_tracebacks_stay_clean(seed, index):
    outcome = fuzz.run_case(fuzz.make_case(seed, index))
    assert not outcome.failed, (outcome.status, outcome.exit_code, outcome.detail)


# --------------------------------------------------------------------------- the valid family

valid = fuzz.fuzz_valid
VALID_SAMPLE, VALID_SEED = 200, 2024

# The op each ingredient must put in the model (in the main graph or a body).
INGREDIENT_OPS = {
    "add": "Add", "clip": "Clip", "constant_of_shape": "ConstantOfShape", "conv": "Conv", "dropout": "Dropout",
    "expand": "Expand", "if": "If", "layernorm": "LayerNormalization", "loop": "Loop", "matmul": "MatMul",
    "onehot": "OneHot", "pad": "Pad", "range": "Range", "relu": "Relu", "reshape": "Reshape", "resize": "Resize",
    "scan": "Scan", "slice": "Slice", "softmax": "Softmax", "squeeze_unsqueeze": "Squeeze", "tile": "Tile",
    "topk": "TopK", "upsample": "Upsample",
}


def _op_types(model: onnx.ModelProto) -> set:
    return {n.op_type for n in fuzz.all_nodes(model)}


def _runs(case, tmp_path: Path) -> None:
    path = tmp_path / f"{case.index}.onnx"
    path.write_bytes(case.model)
    outputs, refusal = valid.reference(path, case.feeds)
    assert refusal is None, (case.repro, refusal)


def test_valid_cases_are_deterministic():
    for index in (0, 5, 33):
        a, b = valid.make_case(VALID_SEED, index), valid.make_case(VALID_SEED, index)
        assert (a.opset, a.ingredients, a.description, a.model) == (b.opset, b.ingredients, b.description, b.model)
        assert a.feeds.keys() == b.feeds.keys()
        assert all(np.array_equal(a.feeds[k], b.feeds[k]) for k in a.feeds)
    assert valid.make_case(VALID_SEED, 0).model != valid.make_case(VALID_SEED, 1).model
    assert valid.make_case(VALID_SEED, 0).model != valid.make_case(VALID_SEED + 1, 0).model


def test_every_ingredient_is_covered_here():
    assert set(INGREDIENT_OPS) == set(valid.INGREDIENTS)


@pytest.mark.parametrize("name", sorted(valid.INGREDIENTS))
def test_each_ingredient_is_in_its_model_and_onnxruntime_runs_it(name, tmp_path):
    for index in range(3):
        case = valid.make_case(VALID_SEED, index, ingredient=name)
        assert name in case.ingredients, case.repro
        assert INGREDIENT_OPS[name] in _op_types(onnx.load_from_string(case.model)), case.repro
        _runs(case, tmp_path)


def _first(predicate, ingredient=None, limit=300):
    """The first case of VALID_SEED (forcing ``ingredient``) whose model satisfies ``predicate``, else None."""
    for index in range(limit):
        case = valid.make_case(VALID_SEED, index, ingredient=ingredient)
        if predicate(onnx.load_from_string(case.model)):
            return case
    return None


def _producers(graph: onnx.GraphProto) -> dict:
    return {out: node for node in graph.node for out in node.output}


def _empty_constant(node) -> bool:
    """A Constant node holding an empty tensor (``value`` with a 0 dim, or ``value_floats: []``)."""
    if node is None or node.op_type != "Constant":
        return False
    attr = node.attribute[0]
    return 0 in attr.t.dims if attr.name == "value" else attr.name in ("value_floats", "value_ints") and not (
        attr.floats or attr.ints)


def _image_classifier_resize(model: onnx.ModelProto) -> bool:
    """image_classifier32.onnx's form: opset 11-13 Resize, roi and scales empty Constants, sizes a computed Concat."""
    if not 11 <= model.opset_import[0].version <= 13:
        return False
    producers = _producers(model.graph)
    for node in model.graph.node:
        if node.op_type == "Resize" and len(node.input) == 4:
            roi, scales, sizes = (producers.get(name) for name in node.input[1:])
            if _empty_constant(roi) and _empty_constant(scales) and sizes is not None and sizes.op_type == "Concat":
                return True
    return False


def _untyped_body_output(model: onnx.ModelProto) -> bool:
    """test_subgraph.onnx's form: a body output with ``type {}``, and a main-graph output without a type."""
    bodies = fuzz.all_graphs(model.graph)[1:]
    untyped = any(o.HasField("type") and o.type.WhichOneof("value") is None for g in bodies for o in g.output)
    return untyped and any(o.type.WhichOneof("value") is None for o in model.graph.output)


@pytest.mark.parametrize("predicate,ingredient", [
    (_image_classifier_resize, "resize"),
    (_untyped_body_output, "if"),
    (_untyped_body_output, "loop"),
    (_untyped_body_output, "scan"),
])
def test_the_issue_19_forms_are_generated(predicate, ingredient, tmp_path):
    """The two models of issue 19, in kind: the generator builds them, and onnxruntime runs them."""
    case = _first(predicate, ingredient)
    assert case is not None, f"no {ingredient} case of seed {VALID_SEED} has the form {predicate.__name__}"
    _runs(case, tmp_path)


def test_valid_harness_reports_a_mismatch(tmp_path):
    """The comparison is not vacuous: outputs off by more than the tolerance fail, with the numbers."""
    case = valid.make_case(VALID_SEED, 0)
    model = tmp_path / fuzz.MODEL
    model.write_bytes(case.model)
    expected, refusal = valid.reference(model, case.feeds)
    assert refusal is None
    assert valid.check_converted(model, case.feeds, expected, run=True) is None
    wrong = [e * 1.5 + 1.0 if e.dtype.kind == "f" else e for e in expected]
    problem = valid.check_converted(model, case.feeds, wrong, run=True)
    assert problem and "differ" in problem and "tolerance" in problem, problem
    result = fuzz.convert_and_check(case, tmp_path, "fp16", wrong)
    assert result.status == "output", result


@pytest.mark.skipif(not hasattr(os, "fork"), reason="the crash guard forks")
def test_valid_harness_survives_a_crash_and_a_hang():
    """A case whose process dies (onnxruntime segfaults on some models) or hangs fails alone; the run goes on."""
    case = valid.make_case(VALID_SEED, 0)

    def crash(send):
        send(("stage", "fp16"))
        faulthandler.disable()  # pytest's would print a page of stack on the real stderr
        os.kill(os.getpid(), signal.SIGSEGV)

    messages, death = fuzz.run_in_child(crash, timeout=30)
    outcome = fuzz._valid_outcome(case, messages, death)
    assert [(r.kind, r.status) for r in outcome.results] == [("fp16", "crash")], outcome
    assert "SIGSEGV" in outcome.results[0].detail

    def hang(send):
        send(("stage", "reference"))
        signal.pause()

    messages, death = fuzz.run_in_child(hang, timeout=1)
    outcome = fuzz._valid_outcome(case, messages, death)
    assert outcome.skipped.startswith("onnxruntime ran past") and not outcome.failed, outcome


def test_valid_sample_has_no_failures():
    outcomes = fuzz.run_valid_fuzz(VALID_SAMPLE, VALID_SEED)
    summary = fuzz.render_valid_summary(outcomes)
    converted = [o for o in outcomes if not o.skipped]
    assert len(converted) >= 0.9 * VALID_SAMPLE, summary  # the sample is not mostly skipped
    if any(o.failed for o in outcomes):
        pytest.fail("\n" + summary, pytrace=False)
