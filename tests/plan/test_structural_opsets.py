"""Where a node's or the graph's own slots limit what its subgraph or producer may be.

If/Loop/Scan slots obey their schema at the model's opset, like any op's. If
and Loop admit bfloat16 outputs and loop-carried values only from opset 16
(Scan from its own bfloat16 opset). Before that a bf16 output or state fails
onnx.checker however the subgraphs are planned, so the node keeps them float32
(rule ``hard-schema``, the reason naming op, type and opset) and the subgraph
values that flow out are cast up inside the branch or body.

Main-graph outputs under ``--no-keep-io-types`` are LOW, except an output whose
values are known not to fit the LOW type: it stays float32, with a warning.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import ampconv

from helpers import convert_text, run

W = ", ".join(["0.5"] * 16)


def _if_model(opset: int) -> str:
    return f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g (bool c, float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {{{W}}}> {{
        y = If (c) <
            then_branch = t () => (float[2, 4] a) {{ a = MatMul (x, w) }},
            else_branch = e () => (float[2, 4] b) {{ wx = MatMul (x, w) b = Relu (wx) }}
        >
    }}
    """


def _loop_model(opset: int) -> str:
    return f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {{{W}}}, int64 n = {{3}}, bool t = {{1}}> {{
        h = MatMul (x, w)
        y = Loop (n, t, h) <body = body (int64 i, bool c, float[2, 4] acc) => (bool co, float[2, 4] out) {{
            co = Identity (c)
            out = MatMul (acc, w)
        }}>
    }}
    """


def _scan_model(opset: int) -> str:
    return f"""<ir_version: 8, opset_import: ["" : {opset}]>
    g (float[4] s0, float[3, 4] xs) => (float[4] s, float[3, 4] ys) <float[4, 4] w = {{{W}}}> {{
        s, ys = Scan <num_scan_inputs = 1, body = body (float[4] acc, float[4] xi) => (float[4] nacc, float[4] yi) {{
            sum = Add (acc, xi)
            nacc = MatMul (sum, w)
            yi = Identity (nacc)
        }}> (s0, xs)
    }}
    """


def _node(report, op_type):
    return next(n for n in report.nodes if n["op_type"] == op_type)


def _check_loads(tmp_path, report, model):
    onnx.checker.check_model(model, full_check=True)
    # The converter's own load check ran: a clean load, or the bf16 CPU-kernel note.
    assert report.output is not None
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(tmp_path / "model.out.onnx"), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 -- onnxruntime CPU lacks many bf16 kernels
        assert "NOT_IMPLEMENTED" in str(exc) or "Could not find an implementation" in str(exc), exc


def _float_interface(model):
    """Element types of every subgraph output and every If/Loop/Scan output in the main graph."""
    types = {}
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                for out in attr.g.output:
                    types[f"{attr.name}:{out.name}"] = out.type.tensor_type.elem_type
    return types


@pytest.mark.parametrize("level", ["O2", "O3"])
@pytest.mark.parametrize("build, op_type", [(_if_model, "If"), (_loop_model, "Loop")])
def test_bf16_blocked_before_opset_16(tmp_path, level, build, op_type):
    report, model = convert_text(tmp_path, build(13), level=level, dtype="bf16")
    _check_loads(tmp_path, report, model)
    node = _node(report, op_type)
    assert node["precision"] == "HIGH" and node["rule"] == "hard-schema"
    assert op_type in node["reason"] and "bfloat16" in node["reason"] and "opset 13" in node["reason"]
    assert "allowed from opset 16" in node["reason"]
    # The MatMuls inside still run LOW; what leaves the subgraph is cast up there.
    assert any(n["op_type"] == "MatMul" and n["graph"] != "main" and n["precision"] == "LOW" for n in report.nodes)
    floats = {v for v in _float_interface(model).values() if v != onnx.TensorProto.BOOL}
    assert floats == {onnx.TensorProto.FLOAT}


def test_bf16_blocked_scan_before_its_bf16_opset(tmp_path):
    report, model = convert_text(tmp_path, _scan_model(11), level="O3", dtype="bf16", keep_opset=True)
    _check_loads(tmp_path, report, model)
    node = _node(report, "Scan")
    assert node["rule"] == "hard-schema" and "Scan" in node["reason"] and "opset 11" in node["reason"]
    assert set(_float_interface(model).values()) == {onnx.TensorProto.FLOAT}


def test_blocked_loop_still_computes(tmp_path):
    report, model = convert_text(tmp_path, _loop_model(13), level="O2", dtype="fp16")
    # float16 was always allowed: only bf16 is blocked before opset 16.
    assert _node(report, "Loop")["rule"] == "structural"
    report, model = convert_text(tmp_path, _loop_model(13), level="O2", dtype="bf16")
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    try:
        (y,) = run(tmp_path / "model.out.onnx", {"x": x})
    except Exception as exc:  # noqa: BLE001 -- no bf16 MatMul kernel on the CPU provider
        assert "NOT_IMPLEMENTED" in str(exc) or "implementation" in str(exc), exc
        return
    (ref,) = run(tmp_path / "model.onnx", {"x": x})
    np.testing.assert_allclose(y, ref, rtol=5e-2, atol=5e-2)


@pytest.mark.parametrize("build, op_type", [(_if_model, "If"), (_loop_model, "Loop"), (_scan_model, "Scan")])
def test_bf16_allowed_from_opset_16(tmp_path, build, op_type):
    report, model = convert_text(tmp_path, build(16), level="O3", dtype="bf16")
    _check_loads(tmp_path, report, model)
    node = _node(report, op_type)
    assert node["rule"] == "structural" and node["precision"] == "LOW"
    assert onnx.TensorProto.BFLOAT16 in set(_float_interface(model).values())


# ------------------------------------------------- outputs under --no-keep-io-types
def _plan(tmp_path, text, **config):
    """The converter's plan for ``text`` (what report.warnings is filled from)."""
    import ampconv
    from ampconv.reading.load import load_model
    from ampconv.plan import Planner
    from ampconv.policy import load_policy
    from ampconv.reading.prepare import infer_types, name_nodes
    from helpers import model_from_text, save

    path = save(model_from_text(text), tmp_path / "plan.onnx")
    model = load_model(path)
    name_nodes(model)
    infer_types(model)
    cfg = ampconv.Config(**config)
    policy = load_policy(preset=cfg.preset, level=cfg.level, block_ops=cfg.block_ops, target=cfg.target)
    return Planner(model, policy, cfg.plan_options).run()


OVERFLOW = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 4] y, float[8] r, float[2, 4] z) <float[4] big = {1e6, 2e6, 3e6, 4e6}, int64[1] flat = {8}> {
    y = Add (x, big)
    r = Reshape (y, flat)
    z = Softmax (x)
}
"""


def test_unkept_output_beyond_range_stays_float32(tmp_path):
    plan = _plan(tmp_path, OVERFLOW, level="O2", keep_io_types=False)
    report, model = convert_text(tmp_path, OVERFLOW, level="O2", keep_io_types=False)
    add = _node(report, "Add")
    assert add["precision"] == "HIGH" and add["rule"] == "hard-constant"
    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.output}
    # y and its reshape hold 1e6: cast down they would be inf. The Softmax output fits.
    assert declared == {"y": onnx.TensorProto.FLOAT, "r": onnx.TensorProto.FLOAT, "z": onnx.TensorProto.FLOAT16}
    assert len(plan.warnings) == 2
    for name, warning in zip(("y", "r"), plan.warnings):
        assert f"output {name!r} kept float32" in warning and "big" in warning and "inf" in warning
    assert report.warnings[-2:] == plan.warnings  # the user sees them: never silent
    x = np.ones((2, 4), np.float32)
    y, r, _ = run(tmp_path / "model.out.onnx", {"x": x.astype(np.float16)})
    assert np.isfinite(y).all() and np.isfinite(r).all()
    np.testing.assert_allclose(y, x + np.array([1e6, 2e6, 3e6, 4e6], np.float32))


def test_unkept_output_initializer_beyond_range_warns(tmp_path):
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y, float[2] w) <float[2] w = {1e6, 1}> {
        y = Relu (x)
    }
    """
    plan = _plan(tmp_path, text, level="O2", keep_io_types=False)
    (warning,) = plan.warnings
    assert "output 'w' kept float32" in warning and "inf" in warning
    report, model = convert_text(tmp_path, text, level="O2", keep_io_types=False)
    declared = {v.name: v.type.tensor_type.elem_type for v in model.graph.output}
    assert declared == {"y": onnx.TensorProto.FLOAT16, "w": onnx.TensorProto.FLOAT}


def test_unkept_black_output_still_low(tmp_path):
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 4] x) => (float[2, 4] y) <float[4] eps = {1e-12, 1e-12, 1e-12, 1e-12}> {
        s = Cos (x)
        y = Add (s, eps)
    }
    """
    plan = _plan(tmp_path, text, level="O2", keep_io_types=False)
    assert plan.warnings == []  # an underflow pin (an epsilon) does not make the result misfit
    report, model = convert_text(tmp_path, text, level="O2", keep_io_types=False)
    assert report.warnings == []
    assert _node(report, "Cos")["precision"] == "HIGH"
    assert model.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16


def test_loop_body_values_of_unknown_shape_and_public_output_shape_survive(tmp_path):
    """An expanded Range (Loop whose body declares untyped inputs/outputs) at O3: the output checks.

    The rewrite types body values it cannot give a shape (a retyped state, a cast before a
    body output): they are written untyped, as the input had them; a graph output whose cast
    the cleanup bypasses keeps its declared shape. Both are required by onnx.checker.
    """

    import corpus

    case = corpus._load_node_cases()["test_range_float16_type_positive_delta_expanded"]
    src = tmp_path / "range.onnx"
    onnx.save(case.model, str(src))
    for dtype in ("fp16", "bf16"):
        dst = tmp_path / f"range.{dtype}.onnx"
        report = ampconv.convert(src, dst, ampconv.Config(level="O3", dtype=dtype))
        onnx.checker.check_model(str(dst), full_check=True)
        written = onnx.load(str(dst))
        assert [d.dim_value for d in written.graph.output[0].type.tensor_type.shape.dim] == [2]
        assert report.output == str(dst)
