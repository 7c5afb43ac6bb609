"""Rule family ``interface``: every float main-graph input and output gets a named decision (plan/interface.py)."""

from __future__ import annotations

import numpy as np
import pytest

import ampconv
from helpers import convert_text, run

MLP = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x, int64[2] ids) => (float[2, 4] y, float[2, 4] big, int64[2] ids_out) <float[4, 4] W = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}, float[2, 4] big = {1e6, 1, 1, 1, 1, 1, 1, 1}> {
    y = MatMul (x, W)
    ids_out = Identity (ids)
}"""


def _interface(report):
    return {(d["kind"], d["name"]): (d["precision"], d["rule"]) for d in report.interface}


def test_default_keeps_every_float_input_and_output_by_rule_io_kept(tmp_path):
    report, _ = convert_text(tmp_path, MLP)
    assert _interface(report) == {
        ("input", "x"): ("HIGH", "io-kept"), ("output", "y"): ("HIGH", "io-kept"),
        ("output", "big"): ("HIGH", "io-kept"),
    }  # the int64 input and output are not float: no decision


def test_unkept_interface_is_low_except_an_output_whose_values_do_not_fit(tmp_path):
    report, model = convert_text(tmp_path, MLP, keep_io_types=False)
    assert _interface(report) == {
        ("input", "x"): ("LOW", "io-converted"), ("output", "y"): ("LOW", "io-converted"),
        ("output", "big"): ("HIGH", "io-misfit"),
    }
    misfit = next(d for d in report.interface if d["rule"] == "io-misfit")
    assert "1e+06" in misfit["reason"] or "65504" in misfit["reason"]
    assert any("'big' kept float32 despite --no-keep-io-types" in w for w in report.warnings)
    # What the file declares is what the decisions say.
    declared = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.input) + list(model.graph.output)}
    assert declared["x"] == declared["y"] == 10 and declared["big"] == 1


def test_named_keep_splits_the_interface(tmp_path):
    report, _ = convert_text(tmp_path, MLP, keep_io_types=("y",))
    assert _interface(report)[("input", "x")] == ("LOW", "io-converted")
    assert _interface(report)[("output", "y")] == ("HIGH", "io-kept")


def test_interface_decisions_are_in_the_report_file(tmp_path):
    report, _ = convert_text(tmp_path, MLP, keep_io_types=False)
    data = report.to_dict()
    assert {entry["rule"] for entry in data["interface"]} == {"io-converted", "io-misfit"}
    x = run(tmp_path / "model.out.onnx", {"x": np.ones((2, 4), np.float16), "ids": np.zeros(2, np.int64)})
    assert x[0].dtype == np.float16 and x[1].dtype == np.float32


def test_a_name_keep_io_types_does_not_know_is_refused(tmp_path):
    with pytest.raises(ampconv.UsageError, match="keep_io_types names nope"):
        convert_text(tmp_path, MLP, keep_io_types=("nope",))


def test_an_output_whose_producer_was_never_planned_stays_float32():
    """``io-undecided`` is a safety net: no exporter's graph in the tests reaches it, so it is driven directly."""
    import onnx_ir as ir

    from ampconv.config import Config
    from ampconv.plan import Planner
    from ampconv.plan.phases.outputs import unkept_output
    from ampconv.policy import load_policy
    from helpers import model_from_text

    model = ir.serde.deserialize_model(model_from_text(MLP))
    planner = Planner(model, load_policy(), Config(keep_io_types=False).plan_options)
    planner.run()
    orphan = ir.Value(name="orphan", type=ir.TensorType(ir.DataType.FLOAT))
    decision = unkept_output(planner.state, orphan)
    assert (decision.precision, decision.rule) == ("HIGH", "io-undecided")
    planned = next(v for v in model.graph.outputs if v.name == "y")
    assert unkept_output(planner.state, planned).rule == "io-converted"
