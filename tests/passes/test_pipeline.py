"""The rewrite steps as onnx_ir passes, each on a tiny in-memory model (no disk, no onnxruntime).

Every pass gets a negative case: with nothing to do it returns modified=False
and leaves the model byte-for-byte as it was.
"""

import onnx
import onnx.parser
import onnx_ir as ir
import pytest
from onnx_ir.passes import PassManager

from ampconv.config import Config
from ampconv.errors import ConversionError
from ampconv.passes.apply import ApplyPlanPass
from ampconv.passes.cleanup import CleanupPass, cast_cleanup
from ampconv.passes.opset import EnsureDefaultOpsetPass
from ampconv.passes.pipeline import run_passes
from ampconv.plan import Plan, Planner
from ampconv.policy import load_policy
from ampconv.reading.prepare import InferTypesPass, NameNodesPass

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'

MLP = HEADER + """
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
    mm = MatMul (x, w)
    y = Relu (mm)
}""" % ", ".join(["0.5"] * 16)


def parse(text: str) -> ir.Model:
    return ir.serde.deserialize_model(onnx.parser.parse_model(text))


def snapshot(model: ir.Model) -> bytes:
    return ir.serde.serialize_model(model).SerializeToString()


def prepared(text: str) -> ir.Model:
    model = parse(text)
    run_passes(model, NameNodesPass(), InferTypesPass())
    return model


def plan_for(model: ir.Model, level: str = "O1") -> Plan:
    config = Config(level=level)
    policy = load_policy(level=level)
    return Planner(model, policy, config.plan_options).run()


def op_types(model: ir.Model):
    return [n.op_type for g in model.graphs() for n in g]


# ------------------------------------------------------------------ NameNodes
def test_name_nodes_names_the_unnamed_ones_without_clashes():
    model = parse(HEADER + """
    g (float[2] x) => (float[2] y) {
        Neg_1 = Neg (x)
        y = Abs (Neg_1)
    }""")
    nodes = list(model.graph)
    nodes[1].name = "Neg_1"  # taken: the counter skips it
    step = NameNodesPass()
    result = step(model)
    assert result.modified and result.model is model
    assert step.named == 1
    assert [n.name for n in model.graph] == ["Neg_2", "Neg_1"]


def test_name_nodes_with_every_node_named_changes_nothing():
    model = parse(HEADER + """
    g (float[2] x) => (float[2] y) {
        y = Neg (x)
    }""")
    next(iter(model.graph)).name = "n"
    before = snapshot(model)
    step = NameNodesPass()
    assert step(model).modified is False
    assert step.named == 0
    assert snapshot(model) == before


# ------------------------------------------------------------------ InferTypes
def test_infer_types_fills_intermediate_types():
    model = parse(HEADER + """
    g (float[2] x) => (float[2] y) {
        t = Neg (x)
        y = Abs (t)
    }""")
    t = next(iter(model.graph)).outputs[0]
    assert t.type is None
    step = InferTypesPass()
    assert step(model).modified
    assert t.dtype == ir.DataType.FLOAT and step.filled >= 1


def test_infer_types_fills_in_when_onnx_inference_fails(monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("inference failed")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    model = parse(HEADER + """
    g (float[2] x) => (float[2] y) {
        t = Neg (x)
        y = Abs (t)
    }""")
    t = next(iter(model.graph)).outputs[0]
    step = InferTypesPass()
    assert step(model).modified  # the schema fill-in types t from x
    assert t.dtype == ir.DataType.FLOAT and step.filled == 1


def test_infer_types_on_a_fully_typed_model_changes_nothing():
    model = parse(HEADER + """
    g (float[2] x) => (float[2] y) <float[2] t> {
        t = Neg (x)
        y = Abs (t)
    }""")
    before = snapshot(model)
    step = InferTypesPass()
    assert step(model).modified is False
    assert step.filled == 0
    assert snapshot(model) == before


# ------------------------------------------------------------------ ApplyPlan
def test_apply_plan_rewrites_and_counts():
    model = prepared(MLP)
    step = ApplyPlanPass(plan_for(model))
    assert step(model).modified
    assert step.result.casts_inserted == 2  # x in, y out (keep_io_types)
    assert [f.fate for f in step.result.initializers] == ["LOW"]
    assert op_types(model).count("Cast") == 2


def test_apply_plan_with_nothing_low_changes_nothing():
    model = prepared(HEADER + """
    g (int64[2] x) => (int64[2] y) {
        y = Neg (x)
    }""")
    before = snapshot(model)
    plan = plan_for(model)
    step = ApplyPlanPass(plan)
    assert step(model).modified is False
    assert step.result.casts_inserted == 0 and not step.result.initializers
    assert snapshot(model) == before


def test_apply_plan_postcondition_is_the_loop_state_invariant():
    model = parse("""<ir_version: 8, opset_import: ["" : 8]>
    g (float[1, 2] initial, float[1, 3, 2] x) => (float[1, 2] y, float[1, 3, 2] z) {
        y, z = Scan <num_scan_inputs = 1, body = body (float[2] sum_in, float[2] next)
                     => (float[2] sum_out, float[2] scan_out) {
            sum_out = Add (sum_in, next)
            scan_out = Identity (sum_out)
        }> ("", initial, x)
    }""")
    body = next(iter(model.graph)).attributes["body"].value
    body.outputs[0].dtype = ir.DataType.FLOAT16  # as a broken rewrite would leave it
    empty = Plan(low="fp16", level="O1", nodes={}, values={}, graph_output_needs={}, constants=[])
    with pytest.raises(ir.passes.PostconditionError):
        ApplyPlanPass(empty)(model)
    # run_passes raises the check's own error, as convert always has.
    with pytest.raises(ConversionError, match="state sum_in enters as FLOAT but leaves the body as FLOAT16"):
        run_passes(model, ApplyPlanPass(empty))


# ------------------------------------------------------------------ Cleanup
ROUND_TRIP = HEADER + """
g (float16[2] x) => (float16[2] y) {
    up = Cast <to = 1> (x)
    down = Cast <to = 10> (up)
    y = Neg (down)
}"""


def test_one_cleanup_sweep_then_the_fixed_point():
    model = parse(ROUND_TRIP)
    sweep = CleanupPass()
    assert sweep(model).modified
    # The bypassed pair: "down" went this sweep, "up" is dead only now.
    assert sweep.result.round_trip == 1 and op_types(model) == ["Cast", "Neg"]

    model = parse(ROUND_TRIP)
    sweep = CleanupPass()
    manager = cast_cleanup(sweep)
    assert isinstance(manager, PassManager) and manager.early_stop
    assert manager(model).modified
    # Each case counts what it did: "down" bypassed (round trip), then "down" and "up" dropped (dead).
    assert sweep.result.round_trip == 1 and sweep.result.dead == 2
    assert op_types(model) == ["Neg"]


def test_cleanup_with_only_needed_casts_changes_nothing():
    model = parse(HEADER + """
    g (float[2] x) => (float16[2] y) {
        y = Cast <to = 10> (x)
    }""")
    before = snapshot(model)
    sweep = CleanupPass()
    assert cast_cleanup(sweep)(model).modified is False
    assert sweep.result.removed == 0
    assert snapshot(model) == before


# ------------------------------------------------------------------ EnsureDefaultOpset
def test_default_opset_added_for_inserted_casts():
    model = parse('<ir_version: 8, opset_import: ["ai.onnx.ml" : 3]>' + """
    g (float[2] x) => (float[2] y) {
        y = ai.onnx.ml.Normalizer <norm = "MAX"> (x)
    }""")
    graph = model.graph
    cast = ir.Node("", "Cast", [graph.inputs[0]], [ir.AttrInt64("to", 10)], num_outputs=1)
    graph.insert_before(next(iter(graph)), cast)
    step = EnsureDefaultOpsetPass()
    assert step(model).modified
    assert model.opset_imports[""] == 13
    assert step.notes == ["added default-domain opset 13 for the inserted casts"]


@pytest.mark.parametrize(
    "text",
    [
        HEADER + "g (float[2] x) => (float16[2] y) { y = Cast <to = 10> (x) }",  # has one
        '<ir_version: 8, opset_import: ["ai.onnx.ml" : 3]>'
        + 'g (float[2] x) => (float[2] y) { y = ai.onnx.ml.Normalizer <norm = "MAX"> (x) }',  # needs none
    ],
)
def test_default_opset_left_alone_when_present_or_not_needed(text):
    model = parse(text)
    before = snapshot(model)
    step = EnsureDefaultOpsetPass()
    assert step(model).modified is False
    assert step.notes == []
    assert snapshot(model) == before


# ------------------------------------------------------------------ the pipeline
def test_rewrite_pipeline_as_the_converter_runs_it():
    model = prepared(MLP)
    rewrite, sweep, opset = ApplyPlanPass(plan_for(model)), CleanupPass(), EnsureDefaultOpsetPass()
    result = run_passes(model, rewrite, cast_cleanup(sweep), opset)
    assert result.modified and result.model is model
    assert rewrite.result.casts_inserted == 2 and sweep.result.removed == 0 and opset.notes == []
    onnx.checker.check_model(ir.serde.serialize_model(model), full_check=True)


def test_run_passes_keeps_other_errors_wrapped():
    class Broken(ir.passes.InPlacePass):
        def call(self, model):
            raise ValueError("boom")

    with pytest.raises(ir.passes.PassError) as info:
        run_passes(parse(MLP), Broken())
    assert isinstance(info.value.__cause__.__cause__, ValueError)


def test_small_in_memory_weights_are_converted_eagerly_with_the_same_bits(tmp_path):
    """A bias is converted when the plan is applied (no lazy tensor), with numpy's round-to-nearest-even."""
    import numpy as np
    import onnx

    import ampconv

    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    big = rng.standard_normal((80, 64)).astype(np.float32)  # above EAGER_MAX_ELEMENTS: stays lazy
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            onnx.helper.make_node("MatMul", ["z", "B"], ["k"], name="mm2"),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4]),
         onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 80])],
        [onnx.helper.make_tensor_value_info("h", onnx.TensorProto.FLOAT, [2, 3]),
         onnx.helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT, [2, 64])],
        [onnx.numpy_helper.from_array(w, "W"), onnx.numpy_helper.from_array(big, "B")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    ampconv.convert(tmp_path / "m.onnx", tmp_path / "o.onnx", ampconv.Config())
    written = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "o.onnx")).graph.initializer}
    assert written["W"].dtype == np.float16 and np.array_equal(written["W"].view(np.uint16), w.astype(np.float16).view(np.uint16))
    assert np.array_equal(written["B"].view(np.uint16), big.astype(np.float16).view(np.uint16))
    from ampconv.passes.apply import EAGER_MAX_ELEMENTS

    assert w.size <= EAGER_MAX_ELEMENTS < big.size
