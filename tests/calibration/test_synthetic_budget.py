"""The synthetic run budgeted by its cost (issue 37, part 1): FLOPs, bytes and nodes, in seconds on this machine.

``calibration.cost`` estimates one float32 pass from the model's shapes;
``calibration.synthetic`` makes the run when the estimate fits the budget,
runs a slice (symbolic dimensions at 1) when only that fits, runs whatever
the estimate when asked explicitly (memory allowing), and says what a skipped
run cost in float32 nodes. The full ViT-S/16 is measured in
``bench/bench_vit.py``; a two-block copy stands in here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ampconv
from ampconv.calibration import cost, synthetic
from ampconv.errors import UsageError
from ampconv.options.groups import DataOptions
from ampconv.reading.load import load_model
from ampconv_cli.main import cli
from helpers import model_from_text, save

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench import figures  # noqa: E402
from bench.vit_model import VitSpec, build_vit  # noqa: E402

DENSE = """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, 64] x) => (float[batch, 32] y) <float[64, 32] w = {%s}, float[32] b = {%s}> {
    h = MatMul (x, w)
    y = Add (h, b)
}
""" % (", ".join(["0.01"] * 2048), ", ".join(["0.1"] * 32))


def _model(tmp_path, text, name="m") -> Path:
    return save(model_from_text(text), tmp_path / f"{name}.onnx")


def test_the_estimate_counts_flops_activations_weights_and_nodes(tmp_path):
    model = load_model(_model(tmp_path, DENSE), infer_types=True)
    run = cost.estimate(model, {"x": (8, 64)})
    assert run.flops == 2 * 8 * 64 * 32 + 8 * 32  # the product's multiply-adds, one FLOP per element of the Add
    assert run.activation_bytes == 2 * 4 * 8 * 32 + 4 * (4 * 8 * 64)  # h and y; x drawn and read: four times
    assert run.weight_bytes == 4 * (64 * 32 + 32) and run.nodes == 2 and run.unsized == 0
    assert run.seconds == pytest.approx(run.overhead + run.work)
    assert run.peak_bytes == 2 * run.weight_bytes + 2 * run.activation_bytes
    bigger = cost.estimate(model, {"x": (800, 64)})
    assert bigger.flops == pytest.approx(100 * run.flops) and bigger.activation_bytes == 100 * run.activation_bytes


def test_a_convolution_counts_its_kernel():
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"])], "c",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 6])],
        [onnx.numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    model = ir.serde.deserialize_model(proto)
    assert cost.estimate(model, {"x": (1, 3, 8, 8)}).flops == 2 * (4 * 6 * 6) * (3 * 3 * 3)


def test_the_default_budget_and_the_set_up_rule():
    """5 s by default; a run over half a second must compute as long as it sets up; a budget given is all."""
    assert synthetic.refused(cost.RunCost(20e9, 0, 0, 500), None) is None  # 1 s of arithmetic, 0.1 s set-up
    assert "> 5 s budget" in synthetic.refused(cost.RunCost(200e9, 0, 0, 500), None)
    chain = cost.RunCost(0.0, 4000 * 64, 4 * 8000, 4000)  # the 4,000-node chain of [1, 16] tensors
    assert "setting up nodes that compute little" in synthetic.refused(chain, None)
    assert synthetic.refused(chain, 10.0) is None and "> 0.1 s budget" in synthetic.refused(chain, 0.1)
    assert synthetic.refused(cost.RunCost(0.0, 0, 0, 1000), None) is None  # 0.23 s: cheap whatever it does


def _chain(nodes: int) -> onnx.ModelProto:
    made, x = [], "x"
    for i in range(nodes):
        made.append(helper.make_node("Relu" if i % 2 else "Neg", [x], [f"v{i}"]))
        x = f"v{i}"
    return helper.make_model(helper.make_graph(
        made, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 16])]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_run_that_is_all_set_up_is_skipped_unless_asked_for(tmp_path):
    src = save(_chain(3000), tmp_path / "chain.onnx")
    skipped = ampconv.convert(src, tmp_path / "a.onnx", ampconv.Config(overwrite=True))
    assert skipped.calibration is None and skipped.envelope is None
    note = next(n for n in skipped.note_texts() if n.startswith("synthetic float32 run skipped"))
    assert "3000 nodes" in note and "setting up nodes that compute little" in note
    assert "no node stays float32 for want of numbers" in note
    asked = ampconv.convert(src, tmp_path / "b.onnx", ampconv.Config(overwrite=True, synthetic_run=True))
    assert asked.calibration["synthetic"] is True
    budget = ampconv.convert(src, tmp_path / "c.onnx", ampconv.Config(overwrite=True, synthetic_budget=30.0))
    assert budget.calibration["synthetic"] is True


def test_an_explicit_run_needs_the_memory_its_estimate_says(tmp_path, monkeypatch):
    src = _model(tmp_path, DENSE)
    monkeypatch.setattr(synthetic, "available_memory", lambda: 1024)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, synthetic_run=True))
    assert report.calibration is None
    assert any("estimated peak memory" in n and "GiB available" in n for n in report.note_texts())
    monkeypatch.setattr(synthetic, "available_memory", lambda: 1 << 40)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, synthetic_run=True))
    assert report.calibration["synthetic"] is True


def test_the_default_run_needs_the_memory_too(tmp_path, monkeypatch):
    """Within the time budget but beyond the memory free: skipped, and the note says memory, not seconds."""
    src = _model(tmp_path, DENSE)
    monkeypatch.setattr(synthetic, "available_memory", lambda: 1024)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    assert report.calibration is None
    note = next(n for n in report.note_texts() if n.startswith("synthetic float32 run skipped"))
    assert "estimated peak memory" in note and "GiB available" in note and "budget" not in note
    monkeypatch.setattr(synthetic, "available_memory", lambda: None)  # the system does not say: time alone
    assert ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True)).calibration["synthetic"]


def _cgroup_files(tmp_path, limit: str, usage: int, inactive: int, key: str = "inactive_file"):
    (tmp_path / "max").write_text(limit + "\n")
    (tmp_path / "current").write_text(f"{usage}\n")
    (tmp_path / "stat").write_text(f"anon 5\n{key} {inactive}\nactive_file 7\n")
    return ((str(tmp_path / "max"), str(tmp_path / "current"), str(tmp_path / "stat"), "inactive_file"),)


def test_a_cgroup_limit_counts_its_working_set(tmp_path):
    """A container's limit less its usage without the reclaimable inactive file cache; no limit: no figure."""
    files = _cgroup_files(tmp_path, str(512 << 20), usage=400 << 20, inactive=300 << 20)
    assert synthetic._cgroup_available(files) == (512 << 20) - (100 << 20)
    assert synthetic._cgroup_available(_cgroup_files(tmp_path, "max", 400 << 20, 0)) is None
    assert synthetic._cgroup_available(_cgroup_files(tmp_path, "9223372036854771712", 1, 0)) is None  # v1's none
    over = _cgroup_files(tmp_path, str(512 << 20), usage=600 << 20, inactive=0, key="other")
    assert synthetic._cgroup_available(over) == 0
    assert synthetic._cgroup_available(((str(tmp_path / "absent"), "", "", ""),)) is None


def test_a_slice_runs_where_the_given_shapes_are_too_dear(tmp_path):
    """--shape batch:200000 makes the pass dear; every symbolic dimension at 1 fits: that slice runs, and says so."""
    src = _model(tmp_path, DENSE)
    config = ampconv.Config(overwrite=True, shapes={"batch": 200000}, synthetic_budget=0.3)
    report = ampconv.convert(src, tmp_path / "o.onnx", config)
    note = report.calibration["notes"][0]
    assert "x [1, 64]" in note and "a slice: symbolic dimensions at 1" in note and "x [200000, 64]" in note
    full = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, shapes={"batch": 8}))
    assert "a slice" not in full.calibration["notes"][0] and "x [8, 64]" in full.calibration["notes"][0]
    none = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, synthetic_budget=1e-9))
    note = next(n for n in none.note_texts() if "skipped" in n)
    assert "> 1e-09 s budget" in note and "with every symbolic dimension at 1" not in note  # nothing to slice


def test_budget_options_are_checked():
    for bad in (0, -1.0, True, "5"):
        with pytest.raises(UsageError, match="synthetic_budget must be a number of seconds > 0"):
            DataOptions(synthetic_budget=bad)
    with pytest.raises(UsageError, match="synthetic_run must be None"):
        DataOptions(synthetic_run="yes")


def test_the_cli_takes_the_budget_and_the_explicit_run(tmp_path):
    src = _model(tmp_path, DENSE)
    out = tmp_path / "o.onnx"
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(out), "--synthetic-budget", "0.000001"])
    assert result.exit_code == 0, result.output
    assert "synthetic float32 run skipped" in result.output and "pass --synthetic-run" in result.output
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(out), "--overwrite", "--synthetic-budget",
                                      "0.000001", "--synthetic-run"])
    assert result.exit_code == 0 and "synthetic float32 run: 1 seeded random sample" in result.output
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(out), "--synthetic-budget", "0"])
    assert result.exit_code == 2


def test_a_vit_with_decomposed_layernorms_gets_the_run_and_casts_like_onnxruntimes_tool(tmp_path):
    """The ViT-S-class case at two blocks (bench/bench_vit.py measures all twelve): the synthetic run is made,
    the norms' statistics run LOW, and the casts are at most max(1.25x, +2) of onnxruntime's float16 tool's."""
    from onnxruntime.transformers.float16 import convert_float_to_float16

    proto = build_vit(VitSpec(depth=2))
    src = tmp_path / "vit.onnx"
    onnx.save(proto, src)
    report = ampconv.convert(src, tmp_path / "vit.fp16.onnx", ampconv.Config(overwrite=True))
    assert report.calibration["synthetic"] is True
    assert all(n["rule"] != "range-statistics" for n in report.nodes)
    baseline = tmp_path / "vit.ort.onnx"
    onnx.save(convert_float_to_float16(onnx.load(src), keep_io_types=True), baseline)
    ours, theirs = (figures.deploy_figures(str(p)).casts for p in (tmp_path / "vit.fp16.onnx", baseline))
    assert ours <= max(1.25 * theirs, theirs + 2), (ours, theirs)
    (entry,) = report.envelope
    assert entry["input"] == "pixel_values" and entry["holds_to"] > 4 * entry["sample_max"]


def test_an_initializer_listed_as_a_graph_input_is_a_weight_not_a_fed_input(tmp_path):
    """Old exporters (the ONNX backend test's 'light' models) list every initializer among the graph inputs: the
    run feeds the real inputs only, and the envelope is about them."""
    proto = model_from_text(DENSE)
    proto.graph.input.extend([helper.make_tensor_value_info("w", TensorProto.FLOAT, [64, 32]),
                              helper.make_tensor_value_info("b", TensorProto.FLOAT, [32])])
    src = save(proto, tmp_path / "old.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    assert report.calibration is not None and report.calibration["synthetic"] is True, report.notes
    assert [entry["input"] for entry in report.envelope] == ["x"]
