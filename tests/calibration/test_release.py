"""The release step (issue 37): float32 islands tried back in LOW under emulation on the evidence.

Unit tests of its parts (islands and their parts, the budget, the group test
with a fake trial, the allowance against the floor), then end to end on the
models of ``release_models``: released where the island buys nothing, kept
where it does, off with ``release=False``, inside ``--tune``, bounded in time,
and recorded in the report (JSON, summary, page).
"""

import json

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import ampconv
import release_models as rm
from ampconv.calibration import release
from ampconv.calibration.release import GroupTest, Island, ReleaseResult, allowance, budget
from ampconv.calibration.tune import Evaluation
from ampconv_cli.main import cli


def _island(*names, rule="gray-promote", classes=None):
    classes = classes or tuple(release.PRIOR[rule] for _ in names)
    return Island(tuple(names), tuple("Add" for _ in names), tuple(rule for _ in names), tuple(classes))


def _fake(harmful, costs=None):
    """A trial that fails exactly when a ``harmful`` node is lowered; cost ``costs(lowered)`` (default: fewer
    float32 nodes cost less). Records every trial's lowered names."""
    calls = []

    def trial(islands):
        lowered = {name for island in islands for name in island.nodes}
        calls.append(lowered)
        ok = not (lowered & set(harmful))
        cost = costs(lowered) if costs else -len(lowered)
        return Evaluation(tuple(sorted(lowered)), ok, "ok" if ok else f"lowering {sorted(lowered & set(harmful))} "
                                                                      "moves the outputs"), cost, "measured"

    return trial, calls


def _group_test(found, harmful, costs=None, seconds=None):
    trial, calls = _fake(harmful, costs)
    result = ReleaseResult("test", len(found), sum(len(i.nodes) for i in found),
                           budget(sum(len(i.nodes) for i in found)))
    search = GroupTest(trial, result, seconds)
    assert search.baseline()
    search.settle(list(found))
    return search, result, calls


# ------------------------------------------------------------------ parts
def test_budget_grows_with_the_logarithm_of_the_candidate_nodes():
    assert budget(1) == 6 and budget(3) == 8 and budget(6) == 10 and budget(100) == 18


def test_a_harmless_batch_is_released_in_one_evaluation():
    found = [_island("a"), _island("b", "c"), _island("d")]
    search, result, calls = _group_test(found, harmful=())
    assert len(calls) == 2 and calls[1] == {"a", "b", "c", "d"}  # the baseline, then every island at once
    assert [entry["nodes"] for entry in result.released] == [["a"], ["b", "c"], ["d"]]
    assert set(search.reasons()) == {"a", "b", "c", "d"} and "under emulation" in search.reasons()["a"]


def test_a_failing_batch_is_bisected_and_the_culprit_island_kept_with_its_error():
    found = [_island(name) for name in "abcdefgh"]
    _search, result, calls = _group_test(found, harmful=("f",))
    released = {name for entry in result.released for name in entry["nodes"]}
    assert released == set("abcdegh")
    assert [entry["nodes"] for entry in result.kept] == [["f"]] and "moves the outputs" in result.kept[0]["error"]
    assert len(calls) <= budget(8)


def test_an_island_that_fails_is_tried_by_class_and_an_overflowing_chain_whole():
    island = Island(("centered", "sq", "var", "normed"), ("Sub", "Mul", "ReduceMean", "Div"),
                    ("range-statistics", "data-overflow", "data-overflow", "range-statistics"), (3, 4, 4, 3))
    parts = island.parts()
    assert [part.nodes for part in parts] == [("centered", "normed"), ("sq", "var")]
    assert parts[1].parts() == []  # values over the LOW range: never lowered in part
    assert [p.nodes for p in _island("a", "b", "c").parts()] == [("a",), ("b", "c")]
    _search, result, _calls = _group_test([island], harmful=("sq",))
    assert [entry["nodes"] for entry in result.released] == [["centered", "normed"]]
    assert [entry["nodes"] for entry in result.kept] == [["sq", "var"]]


def test_a_release_that_would_make_the_gpu_move_more_is_not_made():
    # Lowering b alone costs more (a cast pair around it); lowering a costs less.
    costs = {frozenset(): 100, frozenset({"a"}): 90, frozenset({"a", "b"}): 120, frozenset({"b"}): 130}
    found = [_island("a"), _island("b")]
    _search, result, _calls = _group_test(found, harmful=(), costs=lambda lowered: costs[frozenset(lowered)])
    assert [entry["nodes"] for entry in result.released] == [["a"]]
    (kept,) = result.kept
    assert kept["nodes"] == ["b"] and "the GPU would move more: 120 bytes against 90" in kept["error"]


def test_the_time_budget_leaves_islands_untried_and_says_so():
    found = [_island(name) for name in "abcd"]
    _search, result, calls = _group_test(found, harmful=("a",), seconds=0.0)
    assert len(calls) == 1  # the baseline only: no evaluation starts after the time is spent
    assert [entry["nodes"] for entry in result.untried] == [["a"], ["b"], ["c"], ["d"]]
    assert any("budget" in note and "stay float32" in note for note in result.notes)


def test_a_failing_baseline_releases_nothing():
    trial, calls = _fake(harmful=())
    result = ReleaseResult("test", 1, 1, budget(1))

    def failing(islands):
        outcome, cost, effect = trial(islands)
        return Evaluation(outcome.pinned, False, "output 'y' fails"), cost, effect

    search = GroupTest(failing, result)
    assert not search.baseline()
    assert "does not pass on the evidence" in result.notes[0] and search.reasons() == {}


def test_the_allowance_is_the_planned_error_or_the_floor_capped_by_the_outputs_own_rounding():
    reference = np.array([1.0, -2.0, 4.0], dtype=np.float32)
    u = 2.0 ** -11
    scale = float(np.sqrt(np.mean(reference.astype(np.float64) ** 2)))
    # A floor within a few roundings: 5x the floor.
    rms, peak = allowance(reference, (0.0, 0.0), (u * scale / 10, u * 4 / 10), u)
    assert rms == pytest.approx(max(u * scale / 2, u * scale)) and peak == pytest.approx(max(2 * u, u * 4))
    # A floor that holds an underflow a guard avoided: capped at 10 roundings of the output.
    rms, peak = allowance(reference, (0.0, 0.0), (1.0, 3.0), u)
    assert rms == pytest.approx(10 * u * scale) and peak == pytest.approx(10 * u * 4)
    # The planned conversion's own error is always allowed.
    assert allowance(reference, (0.5, 1.5), (0.0, 0.0), u) == (0.5, 1.5)


# ------------------------------------------------------------------ end to end
def _convert(tmp_path, builder, **config):
    model, samples = builder()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    data = rm.write(samples, tmp_path / "cal")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(calibration_data=(str(data),),
                                                                        overwrite=True, **config))
    return report, {n["name"]: n for n in report.nodes}, samples, src


def _emulated(src, dst, samples, tmp_path):
    np.savez(tmp_path / "check.npz", **samples[0])
    return ampconv.validate(src, dst, ampconv.ValidateOptions(backend="emulate", inputs=(str(tmp_path / "check.npz"),)))


def test_an_exp_whose_inf_is_harmless_downstream_is_released(tmp_path):
    report, nodes, samples, src = _convert(tmp_path, rm.mish_through_exp)
    for name in ("exp", "one_plus", "log"):
        node = nodes[name]
        assert (node["precision"], node["rule"]) == ("LOW", "release-low")
        assert "float32 by data-overflow" in node["reason"] and "4 calibration samples" in node["reason"]
        assert "RMS error" in node["reason"] and "within the allowed" in node["reason"]
    section = report.release
    assert section["islands"] == 1 and section["lowered"] == 3 and section["evaluations"] == 2
    assert section["released"][0]["nodes"] == ["exp", "one_plus", "log"] and section["kept"] == []
    assert _emulated(src, tmp_path / "out.onnx", samples, tmp_path).passed


def test_release_off_keeps_the_guards_decisions(tmp_path):
    report, nodes, _samples, _src = _convert(tmp_path, rm.mish_through_exp, release=False)
    assert [nodes[n]["rule"] for n in ("exp", "one_plus", "log")] == ["data-overflow"] * 3
    assert report.release is None


def test_a_residual_promoted_by_a_float32_input_is_released(tmp_path):
    report, nodes, samples, src = _convert(tmp_path, rm.residual_from_input)
    assert (nodes["residual"]["precision"], nodes["residual"]["rule"]) == ("LOW", "release-low")
    assert "float32 by gray-promote" in nodes["residual"]["reason"]
    assert report.summary().count("release: 1 of 1 float32 node(s) in 1 island(s) lowered on 4 calibration samples") == 1
    assert _emulated(src, tmp_path / "out.onnx", samples, tmp_path).passed


def test_an_overflow_that_reaches_the_output_is_kept_with_the_error_that_kept_it(tmp_path):
    report, nodes, samples, src = _convert(tmp_path, rm.box_area)
    assert [nodes[n]["rule"] for n in ("area", "side")] == ["data-overflow"] * 2
    kept = report.release["kept"]
    assert [entry["nodes"] for entry in kept] == [["area", "side"]]
    assert "NaN/Inf" in kept[0]["error"]
    assert report.release["lowered"] == 0 and report.release["evaluations"] <= report.release["budget"]
    assert _emulated(src, tmp_path / "out.onnx", samples, tmp_path).passed


def test_the_report_records_the_release_in_json_summary_and_page(tmp_path):
    report, _nodes, _samples, _src = _convert(tmp_path, rm.box_area)
    data = json.loads(json.dumps(report.to_dict(), default=str))
    assert set(data["release"]) >= {"evidence", "islands", "nodes", "lowered", "evaluations", "budget", "seconds",
                                    "released", "kept", "untried", "trials", "notes"}
    text = report.summary()
    assert "release: 0 of 2 float32 node(s) in 1 island(s) lowered" in text and "release: area, side kept float32" in text
    from ampconv.report.html.columns import page_data
    from ampconv.report.html.page import render_page

    html = render_page(page_data(data))
    assert 'row("release"' in html and '"release":{"evidence":"4 calibration samples"' in html


def test_tune_includes_the_release(tmp_path):
    report, nodes, _samples, _src = _convert(tmp_path, rm.mish_through_exp, tune=True)
    assert report.tune["passed"] and report.tune["evaluations"] == 1
    assert report.release is not None and report.release["lowered"] == 3
    assert all(nodes[n]["rule"] == "release-low" for n in ("exp", "one_plus", "log"))


def test_a_release_that_cannot_run_keeps_the_plan_and_says_why(tmp_path, monkeypatch):
    def broken(setting, found):
        raise RuntimeError("no session today")

    monkeypatch.setattr(release, "_search", broken)
    report, nodes, _samples, _src = _convert(tmp_path, rm.mish_through_exp)
    assert nodes["exp"]["rule"] == "data-overflow"
    assert report.release["lowered"] == 0
    assert any("could not run (no session today)" in note for note in report.release["notes"])


def test_a_model_too_slow_for_one_evaluation_in_the_time_is_not_tried(tmp_path, monkeypatch):
    monkeypatch.setattr(release, "SECONDS", 1e-6)
    report, nodes, _samples, _src = _convert(tmp_path, rm.mish_through_exp)
    assert nodes["exp"]["rule"] == "data-overflow"
    section = report.release
    assert section["evaluations"] == 0 and [e["nodes"] for e in section["untried"]] == [["exp", "one_plus", "log"]]
    assert "not tried: one evaluation would take about" in section["notes"][0]


def test_on_the_synthetic_run_input_scaled_nodes_are_not_tried(tmp_path):
    model, _samples = rm.mish_through_exp()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    assert report.calibration is not None and report.calibration["synthetic"]
    assert report.release is None  # every float32 node there follows the float input's scale


def test_on_the_synthetic_run_values_the_weights_set_are_tried_and_released(tmp_path):
    model, _samples = rm.squared_embedding()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    nodes = {n["name"]: n for n in report.nodes}
    assert report.calibration["synthetic"]
    assert (nodes["square"]["precision"], nodes["square"]["rule"]) == ("LOW", "release-low")
    assert "the synthetic float32 run's seeded random sample" in nodes["square"]["reason"]
    off = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, release=False))
    assert {n["name"]: n["rule"] for n in off.nodes}["square"] == "data-overflow" and off.release is None


def test_the_cli_turns_the_release_off(tmp_path):
    model, samples = rm.mish_through_exp()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    data = rm.write(samples, tmp_path / "cal")
    out = tmp_path / "r.json"
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(tmp_path / "o.onnx"), "--calibration-data",
                                      str(data), "--no-release", "--report", str(out), "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["release"] is None
    assert "--release / --no-release" in CliRunner().invoke(cli, ["convert", "--help"]).output


def test_islands_never_hold_values_made_from_integers():
    """Shape arithmetic and positions: the samples span neither (hazard 8)."""
    from ampconv.calibration.release import _integer_made
    import onnx_ir as ir

    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 6] x) => (float[2, 6] y, float[2] z) <float big = {4099.0}> {
        s = Shape (x)
        f = Cast <to = 1> (s)
        g = Mul (f, big)
        z = Identity (g)
        y = Relu (x)
    }"""
    from helpers import model_from_text

    from ampconv.passes.pipeline import run_passes
    from ampconv.reading.prepare import InferTypesPass

    model = ir.serde.deserialize_model(model_from_text(text))
    run_passes(model, InferTypesPass())
    made = {v.name for v in _integer_made(model)}
    assert {"f", "g", "z"} <= made and "y" not in made


def _synthetic(tmp_path, builder):
    model, _samples = builder()
    src = tmp_path / "m.onnx"
    onnx.save(model, src)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    assert report.calibration["synthetic"]
    return report, {n["name"]: n for n in report.nodes}


def test_on_the_synthetic_run_a_norm_after_a_norm_is_tried_and_released(tmp_path):
    """After a norm, values no longer follow the input's scale (degree 0): the random sample speaks for them, so
    the second norm's flushed eps (and what it pinned) is judged by the outputs, and released."""
    report, nodes = _synthetic(tmp_path, rm.norm_after_norm)
    island = ["ln1_eps", "ln1_sqrt", "ln1_div", "ln1_gamma", "ln1_beta"]
    assert [(nodes[n]["precision"], nodes[n]["rule"]) for n in island] == [("LOW", "release-low")] * 5
    assert "float32 by hard-constant" in nodes["ln1_eps"]["reason"]
    assert report.release["released"][0]["nodes"] == island
    assert all(n["precision"] == "LOW" for n in report.nodes)


def test_on_the_synthetic_run_a_norm_of_the_input_scale_is_not_tried(tmp_path):
    """A variance that grows with the input's square: the random sample does not speak for the user's data, and
    the eps stays float32, with the nodes that read the input's scale; only what follows the norm's quotient
    (gamma, beta) is tried. The same model with calibration data tries the eps too."""
    report, nodes = _synthetic(tmp_path, rm.norm_on_the_input)
    assert [(nodes[n]["precision"], nodes[n]["rule"]) for n in ("ln_eps", "ln_sqrt", "ln_div")] == [
        ("HIGH", "hard-constant"), ("HIGH", "gray-follow"), ("HIGH", "gray-promote")]
    section = report.release or {"released": [], "kept": []}
    tried = {node for entry in section["released"] + section["kept"] for node in entry["nodes"]}
    assert tried <= {"ln_beta", "ln_gamma"}
    data, _nodes, _samples, _src = _convert(tmp_path, rm.norm_on_the_input)
    assert "ln_eps" in [node for entry in data.release["released"] + data.release["kept"] for node in entry["nodes"]]


def test_on_the_synthetic_run_a_centring_after_a_log_of_the_input_is_not_tried(tmp_path):
    """The audio front end told its int16 range: log-mel moves with the input's scale (a log never overflows,
    but it shifts), so the centring after it, pinned by the power spectrum's overflow, stays float32 (released,
    the random sample's log-mel cancelled differently from real audio's: 5.9x the floor instead of 0.9x)."""
    import data_models

    src = tmp_path / "audio.onnx"
    onnx.save(data_models.audio_frontend(), src)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True,
                                                                     input_ranges={"frames": (-32768, 32767)}))
    nodes = {n["name"]: n for n in report.nodes}
    assert report.calibration["synthetic"]
    assert [(nodes[n]["precision"], nodes[n]["rule"]) for n in ("center", "scale")] == [("HIGH", "gray-follow")] * 2
    tried = {node for entry in (report.release or {}).get("released", []) for node in entry["nodes"]}
    assert not tried & {"center", "scale"}
