"""The input envelope (issue 37, part 3): how far each float input may grow before a LOW node overflows.

``plan.degrees`` carries each value's degree in each float input through op
semantics; ``plan.envelope`` reads it with a float32 run's figures, names the
limiting node in the report (JSON ``envelope``, the summary, the page) and,
where the user says an input reaches further (``--input-range``), puts the
nodes past it in the fallback type (rule ``data-envelope``).
"""

from __future__ import annotations

import json
import math

import numpy as np
import onnx_ir as ir
import pytest

from ampconv.config import Config
from ampconv.core.lowtypes import low_type
from ampconv.numerics.activations import Calibration, TensorStats
from ampconv.plan import Planner
from ampconv.plan.degrees import EXPONENTIAL, InputDegrees
from ampconv.policy import load_policy
from ampconv.reading.prepare import infer_types
from ampconv.report.html.columns import page_data
from helpers import convert_text, model_from_text

FP16_LN_MAX = math.log(65504.0)  # 11.09: exp passes float16's max beyond it


def _by_op(report, op_type: str) -> dict:
    """The report entry of the one node of ``op_type``."""
    (node,) = [n for n in report.nodes if n["op_type"] == op_type]
    return node


def _graph(text: str) -> ir.Graph:
    return ir.serde.deserialize_model(model_from_text(text)).graph


def _degrees(text: str, *inputs: str) -> dict:
    graph = _graph(text)
    sources = [v for v in graph.inputs if v.name in inputs]
    found = InputDegrees(graph, sources)
    return {name: {v.name: g.degree for v, g in grown.items()} for name, grown in found.by_input.items()}


# ------------------------------------------------------------------ degrees
DECOMPOSED_LN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 8] x, int64[2] ids) => (float[2, 8] y, float[2, 8] e, float[2, 8] p, float[2, 8] g, float[2, 8] l,
                                    float[2, 8] s)
    <float[8, 8] w = {%s}, float two = {2.0}, float eps = {1e-5}, float half = {0.5}, float one = {1.0},
     int64[1] axes = {-1}> {
    h = MatMul (x, w)
    mu = ReduceMean <axes = [-1]> (h)
    d = Sub (h, mu)
    sq = Pow (d, two)
    var = ReduceMean <axes = [-1]> (sq)
    ve = Add (var, eps)
    sd = Sqrt (ve)
    y = Div (d, sd)
    e = Exp (h)
    se = ReduceSum (e, axes)
    p = Div (e, se)
    l = Log (e)
    t = Erf (h)
    t1 = Add (t, one)
    g0 = Mul (h, t1)
    g = Mul (g0, half)
    s = Sigmoid (h)
}
""" % ", ".join(["0.1"] * 64)


def test_degrees_follow_op_semantics():
    """Linear layers keep the degree, a square doubles it, a root halves it, a normalization is degree 0, GELU
    through Erf is degree 1, Exp grows exponentially, Log of it is degree 1 again, exp/sum(exp) is bounded."""
    found = _degrees(DECOMPOSED_LN, "x")["x"]
    assert found["x"] == found["h"] == found["mu"] == found["d"] == 1
    assert found["sq"] == found["var"] == found["ve"] == 2 and found["sd"] == 1
    assert "y" not in found  # (x - mean) / sqrt(var): degree 0, no entry
    assert found["e"] == found["se"] == EXPONENTIAL and found["l"] == 1
    assert "p" not in found and "t" not in found and "s" not in found  # a written-out softmax, Erf, Sigmoid
    assert found["g"] == 1


def test_with_shifts_a_log_of_a_growing_value_keeps_its_growth_and_a_norm_still_ends_it():
    """log(s * x) moves with the input's scale though it never overflows: without ``shifts`` it has no degree
    (the envelope's question), with it the log of h keeps h's (the release step's question)."""
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 8] x) => (float[2, 8] y, float[2, 8] n) <float one = {1.0}, float eps = {1e-5}> {
        a = Abs (x)
        p = Add (a, one)
        y = Log (p)
        mu = ReduceMean <axes = [-1]> (y)
        d = Sub (y, mu)
        sq = Mul (d, d)
        var = ReduceMean <axes = [-1]> (sq)
        ve = Add (var, eps)
        sd = Sqrt (ve)
        n = Div (d, sd)
    }"""
    graph = _graph(text)
    sources = [v for v in graph.inputs if v.name == "x"]
    plain = {v.name for v in InputDegrees(graph, sources).by_input["x"]}
    shifted = {v.name: g.degree for v, g in InputDegrees(graph, sources, shifts=True).by_input["x"].items()}
    assert "y" not in plain and "d" not in plain
    assert shifted["y"] == shifted["d"] == 1 and shifted["var"] == 2
    assert "n" not in shifted  # the norm after the log: degree 0 either way


def test_integer_inputs_and_values_they_do_not_reach_have_no_degree():
    graph = _graph(DECOMPOSED_LN)
    found = InputDegrees(graph, [v for v in graph.inputs if v.name == "x"])
    assert found.growth("ids", graph.inputs[0]) is None  # not a source
    assert found.growth("x", None) is None


def test_an_op_the_table_does_not_know_passes_the_scale_on():
    text = """<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>
    g (float[2, 8] x) => (float[2, 8] y) {
        c = custom.Mystery (x)
        y = Mul (c, c)
    }"""
    assert _degrees(text, "x")["x"]["y"] == 2


# ------------------------------------------------------------------ the envelope
LOGITS_EXP = """<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 16] x) => (float[4, 16] y) <float[16, 16] w = {%s}, int64[1] axes = {-1}> {
    logits = MatMul (x, w)
    y = Exp (logits)
}
""" % ", ".join("1.0" if i % 17 == 0 else "0.0" for i in range(256))


def test_logits_into_an_unguarded_exp_hold_to_ln_of_the_max(tmp_path):
    """The issue's first hazard: confident logits reaching 14 into Exp. The envelope says 11.1, names the Exp."""
    report, _ = convert_text(tmp_path, LOGITS_EXP)
    (entry,) = report.envelope
    assert entry["input"] == "x" and entry["limited_by"] == _by_op(report, "Exp")["name"]
    assert entry["op_type"] == "Exp" and entry["holds_to"] == pytest.approx(FP16_LN_MAX, rel=1e-3)
    assert entry["reach"] is None and entry["acted"] == 0
    line = next(line for line in report.summary().splitlines() if "envelope:" in line)
    assert f"fp16 holds while |x| <= 11.1 (Exp '{entry['limited_by']}' overflows beyond)" in line
    assert "input_ranges" in line and "calibration_data" in line  # the fix, in Python words here
    assert json.loads(json.dumps(report.to_dict()))["envelope"] == report.envelope


def test_the_cli_summary_names_the_flags(tmp_path):
    from click.testing import CliRunner

    from ampconv_cli.main import cli
    from helpers import save

    src = save(model_from_text(LOGITS_EXP), tmp_path / "m.onnx")
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 0, result.output
    assert "give its range with --input-range or samples with --calibration-data" in result.output


def test_an_input_range_beyond_the_envelope_moves_the_limiting_nodes_and_says_so(tmp_path):
    """Logits reaching 14: the run drawn in the range sees exp overflow; the Exp runs float32 (bf16 with the
    fallback type), and the summary says what the range did."""
    report, _ = convert_text(tmp_path, LOGITS_EXP, input_ranges={"x": (-14, 14)})
    node = _by_op(report, "Exp")
    assert node["precision"] == "HIGH" and node["rule"] in ("data-overflow", "data-envelope")
    assert any(f"data guard: {node['name']} (Exp) kept float32" in line for line in report.summary().splitlines())
    fallback, _ = convert_text(tmp_path, LOGITS_EXP, input_ranges={"x": (-14, 14)}, fallback_dtype="bf16")
    assert _by_op(fallback, "Exp")["precision"] == "FALLBACK"


def test_an_input_range_inside_the_envelope_changes_nothing(tmp_path):
    plain, _ = convert_text(tmp_path, LOGITS_EXP)
    inside, _ = convert_text(tmp_path, LOGITS_EXP, input_ranges={"x": (-5, 5)})
    assert [(n["name"], n["precision"]) for n in inside.nodes] == [(n["name"], n["precision"]) for n in plain.nodes]
    assert all(n["rule"] != "data-envelope" for n in inside.nodes)
    (entry,) = inside.envelope
    assert entry["reach"] == 5 and entry["holds_to"] == pytest.approx(FP16_LN_MAX, rel=1e-3) and entry["acted"] == 0
    assert "--input-range says it reaches 5" in entry_line(inside)


def entry_line(report) -> str:
    from ampconv.report import render_text
    from ampconv_cli.errors import flag_of

    return next(line for line in render_text(report, spell=flag_of).splitlines() if "envelope:" in line)


BOUNDED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 8] x) => (float[2, 8] y) <float[8, 8] w = {%s}> {
    h = MatMul (x, w)
    y = Softmax (h)
}
""" % ", ".join(["0.1"] * 64)


def test_an_input_whose_envelope_is_unbounded_gets_no_entry(tmp_path):
    """Every value x reaches in LOW is bounded (Softmax) or cannot pass the max (a MatMul of 0.1s of a sample
    of |x| ~ 3 would need |x| ~ 8e4, which is an entry): the entry is there only when a LOW value grows."""
    report, _ = convert_text(tmp_path, BOUNDED)
    entries = report.envelope
    assert entries is not None  # a run was made
    assert all(e["limited_by"] != _by_op(report, "Softmax")["name"] for e in entries)
    only_softmax, _ = convert_text(tmp_path, BOUNDED.replace("h = MatMul (x, w)", "h = Identity (x)"))
    assert only_softmax.envelope == []  # the Softmax follows the float32 input: nothing LOW grows with x


def test_no_run_no_envelope(tmp_path):
    report, _ = convert_text(tmp_path, LOGITS_EXP, synthetic_run=False)
    assert report.envelope is None
    assert not any("envelope:" in line for line in report.summary().splitlines())


def test_calibration_data_gives_an_envelope_from_its_own_samples(tmp_path):
    folder = tmp_path / "cal"
    folder.mkdir()
    np.savez(folder / "s.npz", x=np.full((4, 16), 2.0, np.float32))
    report, _ = convert_text(tmp_path, LOGITS_EXP, calibration_data=(str(folder),))
    (entry,) = report.envelope
    assert entry["sample_max"] == 2.0 and entry["holds_to"] == pytest.approx(FP16_LN_MAX, rel=1e-3)
    assert "the calibration samples reached 2" in entry_line(report)


def test_a_sum_of_exponentials_passes_sooner_than_one():
    """exp(t) summed over 16 values passes 65504 once t > ln(65504 / 16): the envelope counts the sum."""
    text = LOGITS_EXP.replace("y = Exp (logits)", "e = Exp (logits)\n    y = ReduceSum (e, axes)")
    text = text.replace("float[4, 16] y", "float[4, 1] y")
    plan, _ctx = _plan_with(text, {"x": 2.0, "logits": 2.0, "e": math.exp(2.0), "y": 16 * math.exp(2.0)},
                            signed={"x": 2.0, "logits": 2.0})
    (entry,) = plan.envelope
    assert entry.limited_by == "y" and entry.holds_to == pytest.approx(math.log(65504 / 16), rel=1e-6)


def _plan_with(text: str, maxima: dict, signed: dict, reach: dict = None, **config):
    """Plan ``text`` with a float32 run that saw each tensor at ``maxima`` (largest signed value ``signed``)."""
    model = ir.serde.deserialize_model(model_from_text(text))
    for node in model.graph:
        node.name = node.outputs[0].name
    infer_types(model)
    tensors = {}
    for name, peak in maxima.items():
        stats = TensorStats(name, samples=1, elements=1, nonzero=1, max_abs=peak, min_nonzero_abs=peak)
        stats.max_value = signed.get(name, peak)
        tensors[name] = stats
    calibration = Calibration(low_type("fp16"), 1, True, ("s",), tensors, {}, synthetic=True, reach=reach or {})
    planner = Planner(model, load_policy(), Config(**config).plan_options, calibration=calibration)
    return planner.run(), planner.ctx


SCALED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 4] x) => (float[1, 4] y) <float[4, 4] w = {%s}, float k = {100.0}> {
    h = MatMul (x, w)
    y = Mul (h, k)
}
""" % ", ".join(["0.25"] * 16)


def test_a_reach_beyond_the_envelope_puts_the_limiting_node_in_the_fallback_type():
    """The run saw |x| = 1 and y at 100; y grows as |x|: it passes 65504 beyond |x| = 655. A reach of 1000
    moves Mul y (rule data-envelope, float32 or bf16); a reach of 500 leaves it LOW."""
    seen = {"x": 1.0, "h": 1.0, "y": 100.0}
    plan, _ = _plan_with(SCALED, seen, {}, reach={"x": 1000.0})
    by_name = {node.name: p.decision for node, p in plan.nodes.items()}
    assert (by_name["y"].precision, by_name["y"].rule) == ("HIGH", "data-envelope")
    assert "input x reaches |x| = 1000 (--input-range)" in by_name["y"].reason and "|x| = 655" in by_name["y"].reason
    assert by_name["h"].precision == "LOW"  # h holds to 65504: inside the reach
    assert [(e.input, e.acted) for e in plan.envelope] == [("x", 1)]
    bf16, _ = _plan_with(SCALED, seen, {}, reach={"x": 1000.0}, fallback_dtype="bf16")
    assert {node.name: p.decision.precision for node, p in bf16.nodes.items()}["y"] == "FALLBACK"
    inside, _ = _plan_with(SCALED, seen, {}, reach={"x": 500.0})
    by_name = {node.name: p.decision for node, p in inside.nodes.items()}
    assert by_name["y"].precision == "LOW" and by_name["y"].rule != "data-envelope"
    (entry,) = inside.envelope
    assert (entry.limited_by, entry.reach, entry.acted) == ("y", 500.0, 0)
    assert entry.holds_to == pytest.approx(655.04)


def test_the_page_shows_the_envelope(tmp_path):
    report, _ = convert_text(tmp_path, LOGITS_EXP)
    data = page_data(json.loads(json.dumps(report.to_dict())))
    (text,) = data["summary"]["envelope"]
    assert text.startswith(f"fp16 holds while |x| <= 11.1 (Exp '{_by_op(report, 'Exp')['name']}' overflows beyond)")
    assert text.endswith("give its range with input_ranges or samples with calibration_data")
