"""One test (or a small parametrized group) per hazard of docs/hazards.md.

Each builds the hazard's tiny float32 model (``hazard_models``), converts it,
checks the result with the full onnx checker, runs it in onnxruntime (fp16) or
through emulated validation (bf16: the CPU provider has no bfloat16 kernels),
compares with the float32 original, and asserts the hazard's structure and the
report entries it promises.
"""

from __future__ import annotations

import json
import os

import hazard_models as hm
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T

import ampconv

pytest.importorskip("onnxruntime")

FLOAT, FP16, BF16 = T.FLOAT, T.FLOAT16, T.BFLOAT16


# ------------------------------------------------------------------ helpers
def convert(proto, folder, name, dtype="fp16", **config):
    """Save ``proto``, convert it; returns (src, dst, report). The result passes the full checker."""
    src = hm.save(proto, folder, name)
    dst = os.path.join(os.fspath(folder), f"{name}.{dtype}.onnx")
    report = ampconv.convert(src, dst, ampconv.Config(dtype=dtype, overwrite=True, **config))
    assert report.output == dst
    onnx.checker.check_model(dst, full_check=True)
    return src, dst, report


def emulated(src, dst, folder, feeds, **options):
    """Emulated validation of ``dst`` against ``src`` on one fixed sample."""
    npz = os.path.join(os.fspath(folder), f"{os.path.basename(dst)}.inputs.npz")
    np.savez(npz, **feeds)
    return ampconv.validate(src, dst, ampconv.ValidateOptions(backend="emulate", inputs=(npz,), **options))


def check_numerics(src, dst, folder, feeds, dtype, rtol=1e-2, atol=1e-2):
    """fp16: run both models in onnxruntime and compare; bf16: emulated validation must pass."""
    if dtype == "fp16":
        ref, got = hm.run(src, feeds), hm.run(dst, feeds)
        assert set(ref) == set(got)
        hm.assert_close(ref, got, rtol=rtol, atol=atol)
        return got
    result = emulated(src, dst, folder, feeds)
    assert result.passed, [o.to_dict() for o in result.outputs]
    assert result.backend == "emulate" and result.dtype == "bf16"
    return None


def main_types(dst):
    return hm.elem_types(hm.typed(dst).graph)


# ------------------------------------------------------------------ hazard 1
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_h01_existing_cast_to_float_on_low_path(tmp_path, dtype):
    src, dst, report = convert(hm.existing_cast(), tmp_path, "h01", dtype)
    low = hm.LOW_ELEM[dtype]
    typed = hm.typed(dst)
    assert hm.bad_casts(typed) == []
    assert hm.cast_chains(typed) == []
    types = hm.elem_types(typed.graph)
    made = hm.producers(typed.graph)
    # The LOW path runs through: Relu, Add and both MatMuls are LOW, nothing
    # widens in between; the only Cast to float32 left produces the output.
    for name in ("mm1", "relu", "add", "mm2"):
        assert hm.report_node(report, name)["precision"] == "LOW"
    relu = hm.node(typed.graph, "relu")
    assert types[relu.input[0]] == low and types[relu.output[0]] == low
    to_float = [n for n in hm.nodes_of(typed.graph, "Cast") if hm.attr(n, "to") == FLOAT]
    assert [n.output[0] for n in to_float] == ["y"]
    assert all(made[n.input[0]].op_type != "Cast" for n in to_float if n.input[0] in made)
    # Both original casts were retargeted (to=LOW) or removed, never kept as to=FLOAT.
    for name in ("cast_mid", "cast_in"):
        kept = [n for n in typed.graph.node if n.name == name]
        assert all(hm.attr(n, "to") == low for n in kept)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)}
    check_numerics(src, dst, tmp_path, feeds, dtype, rtol=5e-2, atol=5e-2)


# ------------------------------------------------------------------ hazard 2
@pytest.mark.parametrize("variant", ["scales", "empty"])
def test_h02_resize_scales_roi_sizes(tmp_path, variant):
    src, dst, report = convert(hm.resize(variant), tmp_path, f"h02_{variant}")
    proto = onnx.load(dst)
    types = main_types(dst)
    resize = hm.nodes_of(proto.graph, "Resize")
    assert len(resize) == 1
    resize = resize[0]
    assert hm.report_node(report, "resize")["precision"] == "LOW"
    assert types[resize.input[0]] == FP16 and types[resize.output[0]] == FP16
    scales = hm.const_input(proto.graph, resize.input[2])
    assert scales.data_type == FLOAT
    if variant == "scales":
        assert resize.input[1] == ""  # the omitted roi stays omitted
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(scales), [1, 1, 2, 2])
        assert len(resize.input) == 3
    else:
        roi = hm.const_input(proto.graph, resize.input[1])
        assert list(roi.dims) == [0] and list(scales.dims) == [0]
        sizes = hm.const_input(proto.graph, resize.input[3])
        assert sizes.data_type == T.INT64
        np.testing.assert_array_equal(onnx.numpy_helper.to_array(sizes), [1, 2, 8, 8])
    # No Cast sits on the scales/roi/sizes inputs.
    made = hm.producers(proto.graph)
    assert all(made.get(name) is None for name in resize.input[1:] if name)
    feeds = {"x": np.random.default_rng(2).standard_normal((1, 2, 4, 4)).astype(np.float32)}
    out = check_numerics(src, dst, tmp_path, feeds, "fp16")
    assert out["y"].shape == (1, 2, 8, 8)


# ------------------------------------------------------------------ hazard 3
def test_h03_shared_initializer_low_and_forced_high(tmp_path):
    src, dst, report = convert(hm.shared_initializer(), tmp_path, "h03", keep_fp32=("^add_keep$",))
    assert hm.report_node(report, "mm")["precision"] == "LOW"
    keep = hm.report_node(report, "add_keep")
    assert keep["precision"] == "HIGH" and keep["rule"] == "user-keep-fp32"
    fates = [f for f in report.initializers if f["name"] == "w"]
    assert len(fates) == 1 and fates[0]["fate"] == "duplicated"
    assert fates[0]["bytes_before"] == 64 and fates[0]["bytes_after"] == 64 + 32
    proto = onnx.load(dst)
    mm = hm.node(proto.graph, "mm")
    add = hm.node(proto.graph, "add_keep")
    original = onnx.numpy_helper.to_array(hm.shared_initializer().graph.initializer[0])
    w_low = hm.const_input(proto.graph, mm.input[1])
    w_high = hm.const_input(proto.graph, add.input[1])
    assert w_low.data_type == FP16 and w_high.data_type == FLOAT
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(w_high), original)
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(w_low), original.astype(np.float16))
    # Exactly two copies: the tied weight is not cloned per consumer.
    assert len([t for t in proto.graph.initializer if t.name.startswith("w")]) == 2
    feeds = {"x": np.random.default_rng(3).standard_normal((4, 4)).astype(np.float32)}
    check_numerics(src, dst, tmp_path, feeds, "fp16")


# ------------------------------------------------------------------ hazard 4
def test_h04_adjacent_black_nodes_one_boundary_cast(tmp_path):
    mix = tmp_path / "black_chain.json"
    mix.write_text(json.dumps(hm.BLACK_CHAIN_MIXLIST))
    src, dst, report = convert(hm.black_chain(), tmp_path, "h04", mixlists=(str(mix),))
    for name in ("pow", "reduce_sum", "sqrt"):
        node = hm.report_node(report, name)
        assert (node["precision"], node["rule"]) == ("HIGH", "black")
    assert (hm.report_node(report, "mul")["precision"], hm.report_node(report, "mul")["rule"]) == ("LOW", "white")
    typed = hm.typed(dst)
    types = hm.elem_types(typed.graph)
    # No LOW tensor between the BLACK nodes.
    for tensor in ("p", "s", "n"):
        assert types[tensor] == FLOAT, tensor
    casts = hm.nodes_of(typed.graph, "Cast")
    boundary = [c for c in casts if c.input[0] == "n"]
    assert len(boundary) == 1 and hm.attr(boundary[0], "to") == FP16
    # Exactly one cast at the BLACK->WHITE boundary plus the float32 output.
    assert len(casts) == 2 and sorted(hm.attr(c, "to") for c in casts) == sorted([FP16, FLOAT])
    assert hm.cast_chains(typed) == []
    x = np.random.default_rng(4).uniform(200, 300, (2, 4)).astype(np.float32)
    got = check_numerics(src, dst, tmp_path, {"x": x}, "fp16")
    assert np.isfinite(got["y"]).all()
    assert emulated(src, dst, tmp_path, {"x": x}).passed


# ------------------------------------------------------------------ hazard 5
def _layernorm_input():
    rng = np.random.default_rng(5)
    signs = np.where(rng.random((2, 8)) < 0.5, -1.0, 1.0)
    return (signs * rng.uniform(2.9e4, 3.1e4, (2, 8))).astype(np.float32)


def test_h05_decomposed_layernorm_without_its_range_is_named_by_the_envelope(tmp_path):
    """No converter knows the input's range without data: the synthetic run's N(0, 1) sample saw the squares fit,
    so they run LOW, and the envelope tells the user they stop holding short of inputs near 3e4 (issue 37)."""
    _src, _dst, report = convert(hm.decomposed_layernorm(), tmp_path, "h05_blind")
    (entry,) = report.envelope
    assert entry["input"] == "x" and entry["holds_to"] < 2.9e4
    assert entry["limited_by"] in hm.LAYERNORM_NODES and "envelope: fp16 holds while |x| <=" in report.summary()


def test_h05_decomposed_layernorm_stays_float32(tmp_path):
    """Told the inputs' range (or given samples), the statistics stay float32 and nothing is NaN."""
    src, dst, report = convert(hm.decomposed_layernorm(), tmp_path, "h05", input_ranges={"x": (-3.1e4, 3.1e4)})
    for name in hm.LAYERNORM_NODES:
        assert hm.report_node(report, name)["precision"] == "HIGH", name
    types = main_types(dst)
    for tensor in ("mu", "d", "d2", "var", "ve", "sd", "y"):
        assert types[tensor] == FLOAT, tensor
    eps = [c for c in report.constants if c["tensor"] == "eps"]
    assert len(eps) == 1 and eps[0]["underflow"] == 1 and eps[0]["consumer"] == "add_eps"
    x = _layernorm_input()
    got = check_numerics(src, dst, tmp_path, {"x": x}, "fp16")
    assert not np.isnan(got["y"]).any()


def test_h05_decomposed_layernorm_forced_low_is_localized(tmp_path):
    src, dst, report = convert(hm.decomposed_layernorm(), tmp_path, "h05_o3", level="O3")
    assert hm.report_node(report, "pow")["precision"] == "LOW"
    result = emulated(
        src, dst, tmp_path, {"x": _layernorm_input()}, localize=True, decisions=report.decisions_by_node()
    )
    assert not result.passed
    loc = result.localization
    # Pow squares values near 3e4 (~9e8): the first node whose LOW output leaves tolerance.
    assert loc is not None and loc.node == "pow" and loc.op_type == "Pow"
    assert loc.precision == "LOW" and loc.rule.startswith("level-O3") and loc.new_nonfinite > 0


# ------------------------------------------------------------------ hazard 6
F32_LOWEST = float(np.finfo(np.float32).min)


@pytest.mark.parametrize(
    "mask_value,dtype,out_of_range,clamp",
    [
        (-1e9, "fp16", True, False),
        (F32_LOWEST, "fp16", True, False),
        (-1e9, "fp16", True, True),
        (F32_LOWEST, "bf16", True, False),
        (-1e9, "bf16", False, False),
    ],
    ids=["1e9-fp16", "lowest-fp16", "1e9-fp16-clamp", "lowest-bf16", "1e9-bf16"],
)
def test_h06_attention_mask_fully_masked_row(tmp_path, mask_value, dtype, out_of_range, clamp):
    src, dst, report = convert(hm.attention(mask_value), tmp_path, "h06", dtype, clamp=clamp)
    add = hm.report_node(report, "add_mask")
    notes = [c for c in report.constants if c["tensor"] == "mask"]
    proto = onnx.load(dst)
    add_node = hm.node(proto.graph, "add_mask")
    mask = hm.const_input(proto.graph, add_node.input[1])
    values = onnx.numpy_helper.to_array(mask).astype(np.float32)
    if out_of_range:
        # Reported, naming the consumer and the remedy taken.
        assert len(notes) == 1 and notes[0]["consumer"] == "add_mask" and notes[0]["overflow"] == 10
        action = notes[0]["action"]
        if action == "consumer kept float32":
            assert (add["precision"], add["rule"]) == ("HIGH", "hard-constant") and "mask" in add["reason"]
            assert mask.data_type == FLOAT
            original = hm.initializer(hm.attention(mask_value).graph, "mask")
            np.testing.assert_array_equal(hm.bits(mask), hm.bits(original))
        else:  # stored LOW with a finite fill (clamped or a mask-specific fill)
            assert "clamp" in action or "mask" in action, action
            assert add["precision"] == "LOW" and mask.data_type == hm.LOW_ELEM[dtype]
            assert np.isfinite(values).all()
            fills = values[values != 0]
            assert fills.size == 10 and len(set(fills.tolist())) == 1 and fills[0] <= -1e4
    else:  # -1e9 fits bfloat16's range: nothing to pin or report
        assert add["precision"] == "LOW" and notes == []
        assert np.isfinite(values).all()
    assert not clamp or notes  # clamping is reported too
    assert hm.report_node(report, "softmax")["precision"] == "HIGH"
    rng = np.random.default_rng(6)
    feeds = {n: rng.standard_normal((1, 4, 8)).astype(np.float32) for n in ("q", "k", "v")}
    # Emulated validation rounds every LOW tensor as fp16/bf16 hardware would: all rows
    # match float32 (the fully masked row averages v uniformly) and nothing is NaN.
    result = emulated(src, dst, tmp_path, feeds)
    assert result.passed, [o.to_dict() for o in result.outputs]
    assert all(o.worst.new_nonfinite == 0 for o in result.outputs)
    if dtype == "fp16":
        # Natively on the CPU provider: no NaN anywhere; the rows with a visible key
        # match float32. (The CPU provider computes a LOW Add in float32 and drops the
        # cast pair, so a finite LOW fill does not swamp the scores of the fully
        # masked row there as it does in real fp16 arithmetic; emulation covers it.)
        ref, got = hm.run(src, feeds), hm.run(dst, feeds)
        assert np.isfinite(got["y"]).all()
        np.testing.assert_allclose(got["y"][0, :3], ref["y"][0, :3], rtol=1e-2, atol=1e-2)
        if add["precision"] == "HIGH":
            np.testing.assert_allclose(got["y"][0, 3], feeds["v"][0].mean(axis=0), rtol=1e-2, atol=1e-2)


# ------------------------------------------------------------------ hazard 7
def _edge_feeds():
    return {"x": np.random.default_rng(7).uniform(-1, 1, (1, 8)).astype(np.float32)}


def _stored(dst, node_name):
    proto = onnx.load(dst)
    node = hm.node(proto.graph, node_name)
    return hm.const_input(proto.graph, node.input[1])


def test_h07_constants_fp16_pinned_and_reported(tmp_path):
    # Outputs LOW (keep_io_types keeps the input only): with float32 outputs, the Adds beside the pinned ones would read the
    # float32 Cast of h the pinned ones need and run float32 to save their output Casts (gray-sink), and the
    # constants this test reads would never be stored LOW.
    src, dst, report = convert(hm.edge_constants(), tmp_path, "h07", keep_io_types=("x",))
    by_tensor = {c["tensor"]: c for c in report.constants}
    # 7e4 overflows: reported, consumer kept float32, the constant untouched.
    edge = by_tensor["edge"]
    assert edge["consumer"] == "add_edge" and edge["overflow"] == 1 and edge["underflow"] == 1
    assert edge["action"] == "consumer kept float32" and "7e+04" in edge["detail"]
    node = hm.report_node(report, "add_edge")
    assert (node["precision"], node["rule"]) == ("HIGH", "hard-constant") and "edge" in node["reason"]
    stored = _stored(dst, "add_edge")
    assert stored.data_type == FLOAT
    np.testing.assert_array_equal(hm.bits(stored), hm.EDGE_VALUES.view(np.uint32))
    # 1e-9 underflows: reported; added to the output, it changes it by less than the output's own fp16
    # rounding (plan/effect.py: an addition however spelled, issue 37), so the Add runs LOW, stored rounded.
    tiny = by_tensor["tiny"]
    assert tiny["consumer"] == "add_tiny" and tiny["underflow"] == 1 and tiny["overflow"] == 0
    assert "round to 0" in tiny["detail"] and hm.report_node(report, "add_tiny")["precision"] == "LOW"
    assert tiny["action"].startswith("stored rounded (added to add_tiny's output")
    # In-range values (65504, +-0, +-inf, nan) are stored LOW exactly.
    assert "keep" not in by_tensor and hm.report_node(report, "add_keep")["precision"] == "LOW"
    keep = _stored(dst, "add_keep")
    assert keep.data_type == FP16
    values = onnx.numpy_helper.to_array(keep)
    assert values[1] == np.float16(65504) and float(values[1]) == 65504.0
    assert values[2] == 0 and not np.signbit(values[2]) and values[3] == 0 and np.signbit(values[3])
    assert values[4] == np.inf and values[5] == -np.inf and np.isnan(values[6])
    np.testing.assert_array_equal(hm.bits(keep), hm.KEEP_VALUES.astype(np.float16).view(np.uint16))
    check_numerics(src, dst, tmp_path, _edge_feeds(), "fp16")


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_h07_float32_subnormals_in_a_constant_never_keep_its_consumer_float32(tmp_path, dtype):
    """A bias holding training leftovers such as -9e-42 (subnormal in float32 itself) is stored LOW.

    A published table detector kept all four of its heavy ops float32 for such values. Negative: the
    normal-float32 1e-9 of ``tiny`` still keeps its Add float32 in fp16 (test above).
    """
    from onnx import helper as oh

    bias = np.array([0.5, -9.02e-42, 1.12e-41, 0.25, -0.125, 0.0, 3e-39, 1.0], dtype=np.float32)
    graph = oh.make_graph(
        [oh.make_node("MatMul", ["x", "eye"], ["h"], name="mm"), oh.make_node("Add", ["h", "bias"], ["y"], name="add")],
        "g", [oh.make_tensor_value_info("x", T.FLOAT, [1, 8])], [oh.make_tensor_value_info("y", T.FLOAT, [1, 8])],
        [onnx.numpy_helper.from_array(np.eye(8, dtype=np.float32), "eye"), onnx.numpy_helper.from_array(bias, "bias")],
    )
    proto = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 22)])
    src, dst, report = convert(proto, tmp_path, f"sub_{dtype}", dtype=dtype)
    assert hm.report_node(report, "add")["precision"] == "LOW"
    (record,) = [c for c in report.constants if c["tensor"] == "bias"]
    assert record["underflow"] >= 2 and "float32 subnormals" in record["action"]
    check_numerics(src, dst, tmp_path, _edge_feeds(), dtype)


def test_h07_constants_fp16_clamped_only_when_asked(tmp_path):
    src, dst, report = convert(hm.edge_constants(), tmp_path, "h07c", clamp=True)
    edge = [c for c in report.constants if c["tensor"] == "edge"]
    assert len(edge) == 1 and "clamp" in edge[0]["action"]
    assert edge[0]["overflow"] == 1 and edge[0]["underflow"] == 1
    assert "round to 0" in edge[0]["detail"]  # the flushed 1e-9 is named too
    assert hm.report_node(report, "add_edge")["precision"] == "LOW"
    stored = _stored(dst, "add_edge")
    assert stored.data_type == FP16
    values = onnx.numpy_helper.to_array(stored)
    np.testing.assert_array_equal(values[:3], np.array([30000, 65504, 65504], np.float16))
    # 1e-9 is raised to the smallest float16 subnormal (--clamp-small raise, the default); zeros stay.
    assert values[3] == np.float16(2.0**-24) and not np.signbit(values[3])
    assert edge[0]["clamped"] == 1 and edge[0]["raised"] == 1 and edge[0]["flushed"] == 0
    assert values[4] == 0 and not np.signbit(values[4]) and values[5] == 0 and np.signbit(values[5])
    assert values[6] == np.inf and np.isnan(values[7])
    # --clamp covers too small values too: the tiny constant is raised, its consumer LOW.
    assert hm.report_node(report, "add_tiny")["precision"] == "LOW"
    assert onnx.numpy_helper.to_array(_stored(dst, "add_tiny"))[0] == np.float16(2.0**-24)
    ref, got = hm.run(src, _edge_feeds()), hm.run(dst, _edge_feeds())
    hm.assert_close(ref, got, names=("y_keep", "y_tiny"))
    # 7e4 was clamped to 65504: the sums near the top of the range stay finite near 65504.
    np.testing.assert_allclose(got["y_all"][0, 1:3], [65504.0, 65504.0], rtol=1e-3)


def test_h07_constants_bf16_round_to_nearest_even(tmp_path):
    src, dst, report = convert(hm.edge_constants(), tmp_path, "h07b", "bf16")
    assert report.constants == []  # everything fits bfloat16 (no subnormal flushed)
    for node, name in (("add_edge", "edge"), ("add_keep", "keep"), ("add_tiny", "tiny"), ("mul_ties", "ties")):
        assert hm.report_node(report, node)["precision"] == "LOW"
        stored = _stored(dst, node)
        assert stored.data_type == BF16, name
        original = onnx.numpy_helper.to_array(hm.initializer(hm.edge_constants().graph, name)).reshape(-1)
        expected = original.astype(ml_dtypes.bfloat16).view(np.uint16)
        np.testing.assert_array_equal(hm.bits(stored), expected, err_msg=name)
    ties = hm.bits(_stored(dst, "mul_ties"))
    # Halfway cases go to the even neighbour: 1.00390625 -> 1.0, 1.01171875 -> 1.015625.
    assert list(ties[:2]) == [0x3F80, 0x3F82] and ties[4] == 0xBF80 and ties[7] == 0x0002
    edge = hm.bits(_stored(dst, "add_edge"))
    assert edge[4] == 0x0000 and edge[5] == 0x8000 and edge[6] == 0x7F80 and (edge[7] & 0x7F80) == 0x7F80
    check_numerics(src, dst, tmp_path, _edge_feeds(), "bf16")


# ------------------------------------------------------------------ hazard 8
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_h08_shape_arithmetic_in_float_is_exact(tmp_path, dtype):
    src, dst, report = convert(hm.shape_in_float(), tmp_path, "h08", dtype)
    for name in ("to_float", "div", "floor"):
        assert hm.report_node(report, name)["precision"] == "HIGH", name
    assert hm.report_node(report, "mm")["precision"] == "LOW"
    proto = onnx.load(dst)
    types = main_types(dst)
    for tensor in ("shp_f", "q", "fl"):
        assert types[tensor] == FLOAT, tensor
    to_float = hm.node(proto.graph, "to_float")
    assert hm.attr(to_float, "to") == FLOAT
    np.testing.assert_array_equal(onnx.numpy_helper.to_array(hm.const_input(proto.graph, "divisor")), [2.0, 0.5])
    x = np.random.default_rng(8).standard_normal((2, 4099)).astype(np.float32)
    got = check_numerics(src, dst, tmp_path, {"x": x}, dtype, rtol=5e-2, atol=5e-2)
    if got is not None:
        assert got["y"].shape == (3, 1)
    if dtype == "fp16":
        # The shape subgraph alone, evaluated as converted, gives [1, 8198] exactly.
        shape_model = onnx.utils.Extractor(hm.typed(dst)).extract_model(["x"], ["shp_i"])
        shape_path = os.path.join(tmp_path, "h08_shape.onnx")
        onnx.save(shape_model, shape_path)
        assert hm.run(shape_path, {"x": x})["shp_i"].tolist() == [1, 8198]


# ------------------------------------------------------------------ hazard 9
def test_h09_control_flow_casts_inside_subgraphs(tmp_path):
    mix = tmp_path / "softmax_black.json"
    mix.write_text(json.dumps(hm.SOFTMAX_BLACK_MIXLIST))
    src, dst, report = convert(hm.control_flow(), tmp_path, "h09", mixlists=(str(mix),))
    assert hm.report_node(report, "then_gemm")["precision"] == "LOW"
    assert hm.report_node(report, "then_gemm")["graph"] == "then_branch"
    assert hm.report_node(report, "else_softmax")["precision"] == "HIGH"
    assert hm.report_node(report, "body_resize")["precision"] == "LOW"
    typed = hm.typed(dst)
    main = typed.graph
    by_name = {g.name: g for g in hm.graphs(typed)}
    then_g, else_g, body = by_name["then_branch"], by_name["else_branch"], by_name["loop_body"]
    # Casts live inside the subgraphs that need them, never on the captured value outside.
    assert [c.input[0] for c in hm.nodes_of(else_g, "Cast")] == ["a"]
    assert len(hm.nodes_of(then_g, "Cast")) == 1
    assert [c.input[0] for c in hm.nodes_of(body, "Cast")] == ["ru"]
    assert all(c.input[0] not in ("a", "u") for c in hm.nodes_of(main, "Cast"))
    # Branch output types agree.
    then_out = then_g.output[0].type.tensor_type.elem_type
    else_out = else_g.output[0].type.tensor_type.elem_type
    assert then_out == else_out == FLOAT
    # Resize scales stay float32 (the initializer in the outer graph).
    resize = hm.nodes_of(body, "Resize")[0]
    assert hm.const_input(main, resize.input[2]).data_type == FLOAT
    assert {**hm.elem_types(main), **hm.elem_types(body)}[resize.input[0]] == FP16
    assert hm.bad_casts(typed) == [] and hm.cast_chains(typed) == []
    rng = np.random.default_rng(9)
    base = {
        "x": rng.standard_normal((2, 4)).astype(np.float32),
        "s": rng.standard_normal((1, 1, 2, 2)).astype(np.float32),
        "acc0": rng.standard_normal((1, 1, 4, 4)).astype(np.float32),
    }
    for cond in (True, False):
        check_numerics(src, dst, tmp_path, dict(base, c=np.array(cond)), "fp16")


# ------------------------------------------------------------------ hazard 10
KEEP_CASES = [True, False, ("x1", "yc"), ("h", "w")]


@pytest.mark.parametrize("keep", KEEP_CASES, ids=["all", "none", "x1-yc", "h-w"])
def test_h10_keep_io_types_edge_cases(tmp_path, keep):
    src, dst, report = convert(hm.interface(), tmp_path, "h10", keep_io_types=keep)
    proto = onnx.load(dst)
    names = ("x1", "x2", "h", "w", "yc", "y")
    kept = set(names) if keep is True else set() if keep is False else set(keep)
    declared = {v.name: v.type.tensor_type.elem_type for v in list(proto.graph.input) + list(proto.graph.output)}
    assert [v.name for v in proto.graph.input] == ["x1", "x2"]
    assert [v.name for v in proto.graph.output] == ["h", "w", "yc", "y"]
    assert declared == {n: (FLOAT if n in kept else FP16) for n in names}
    # The output initializer: float32 for the interface and LOW for the MatMuls
    # (one copy each) when kept, a single LOW tensor when not.
    (fate,) = [f["fate"] for f in report.initializers if f["name"] == "w"]
    assert fate == ("duplicated" if "w" in kept else "LOW")
    rng = np.random.default_rng(10)
    feeds = {n: rng.standard_normal((2, 4)).astype(np.float32) for n in ("x1", "x2")}
    ref = hm.run(src, feeds)
    got = hm.run(dst, {n: a if n in kept else a.astype(np.float16) for n, a in feeds.items()})
    for name in ("h", "w", "yc", "y"):
        assert got[name].dtype == (np.float32 if name in kept else np.float16), name
    hm.assert_close(ref, got)
    # Converting the result again changes nothing.
    dst2 = os.path.join(tmp_path, "h10.again.onnx")
    again = ampconv.convert(dst, dst2, ampconv.Config(overwrite=True, keep_io_types=keep))
    assert again.unchanged
    with open(dst, "rb") as a, open(dst2, "rb") as b:
        assert a.read() == b.read()


# ------------------------------------------------------------------ hazard 11
def test_h11_external_data_written_beside_output(tmp_path):
    src_dir, out_dir = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    out_dir.mkdir()
    src = hm.external_mlp(src_dir)
    weights = src_dir / "ext.weights"
    before = weights.stat().st_size
    source_bytes = weights.read_bytes()
    dst = out_dir / "ext.fp16.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    assert report.output == str(dst)
    onnx.checker.check_model(str(dst), full_check=True)
    written = sorted(p.name for p in out_dir.iterdir())
    assert "ext.fp16.onnx" in written
    (data_name,) = [n for n in written if n != "ext.fp16.onnx"]
    data = out_dir / data_name
    assert data.stat().st_size == before // 2
    proto = onnx.load(str(dst), load_external_data=False)
    for tensor in proto.graph.initializer:
        assert tensor.data_location == onnx.TensorProto.EXTERNAL and tensor.data_type == FP16
        location = {e.key: e.value for e in tensor.external_data}["location"]
        assert location == data.name  # relative, beside the output
    assert weights.read_bytes() == source_bytes  # the input is untouched
    assert report.weight_bytes_after == report.weight_bytes_before // 2
    x = np.random.default_rng(11).standard_normal((2, 64)).astype(np.float32)
    hm.assert_close(hm.run(src, {"x": x}), hm.run(str(dst), {"x": x}))


# ------------------------------------------------------------------ hazard 12
@pytest.mark.parametrize(
    "dtype,check_runtime", [("fp16", True), ("fp16", False), ("bf16", True)], ids=["fp16", "fp16-no-ort-pins", "bf16"]
)
def test_h12_dtype_attribute_ops_and_float64(tmp_path, dtype, check_runtime):
    src, dst, report = convert(hm.dtype_ops(), tmp_path, "h12", dtype, check_runtime=check_runtime)
    low = hm.LOW_ELEM[dtype]
    typed = hm.typed(dst)
    types = hm.elem_types(typed.graph)
    assert hm.bad_casts(typed) == []
    for name in ("randlike", "eyelike"):
        node = hm.node(typed.graph, name)
        decided = hm.report_node(report, name)
        # dtype attribute and output type agree; LOW means rewritten, not cast after.
        assert hm.attr(node, "dtype") == types[node.output[0]]
        if decided["precision"] == "LOW":
            assert hm.attr(node, "dtype") == low
            assert not any(n.op_type == "Cast" and n.input[0] == node.output[0] for n in typed.graph.node)
        else:
            assert hm.attr(node, "dtype") == FLOAT
            assert decided["rule"] in ("runtime-pin", "hard-schema", "free-high", "gray-follow", "gray-promote")
            if decided["rule"] == "hard-schema":
                assert "bfloat16" in decided["reason"] or "bf16" in decided["reason"]
    if not check_runtime:  # nothing pinned by onnxruntime: the attribute itself is rewritten
        node = hm.node(typed.graph, "randlike")
        assert hm.report_node(report, "randlike")["precision"] == "LOW" and hm.attr(node, "dtype") == FP16
    # The float64 path is untouched.
    for name in ("dconst", "mul_double"):
        assert hm.report_node(report, name)["precision"] == "NONE"
    original = hm.const_input(hm.dtype_ops().graph, "dconst")
    stored = hm.const_input(typed.graph, "dconst")
    assert stored.data_type == T.DOUBLE and hm.bits(stored).tolist() == hm.bits(original).tolist()
    assert types["xd"] == T.DOUBLE and types["dm"] == T.DOUBLE
    mul = hm.node(typed.graph, "mul_double")
    assert list(mul.input) == ["xd", "dconst"]
    feeds = {
        "x": np.random.default_rng(12).standard_normal((4, 4)).astype(np.float32),
        "xd": np.array([0, 1, 0, 1, 1, 0, 1, 0], np.float64),
    }
    if check_runtime:
        got = check_numerics(src, dst, tmp_path, feeds, dtype)
    else:  # the CPU provider has no fp16 RandomNormalLike kernel: emulate
        got = None
        result = emulated(src, dst, tmp_path, feeds)
        assert result.passed, [o.to_dict() for o in result.outputs]
    if got is not None:
        assert got["dm"].dtype == np.float64
        np.testing.assert_array_equal(got["dm"], hm.run(src, feeds)["dm"])


def _as_identity(path, out_path):
    """Replace the custom op by an Identity so onnxruntime can run (and type-check) the graph."""
    proto = onnx.load(path)
    for node in proto.graph.node:
        if node.domain == hm.CUSTOM_DOMAIN:
            node.domain = ""
            node.op_type = "Identity"
    onnx.save(proto, out_path)
    return out_path


def test_h12_unknown_custom_op_kept_high_and_reported(tmp_path):
    proto = hm.custom_op()
    src = hm.save(proto, tmp_path, "h12c", full_check=False)
    dst = os.path.join(tmp_path, "h12c.fp16.onnx")
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    assert report.output == dst
    onnx.checker.check_model(dst, full_check=True)
    mystery = hm.report_node(report, "mystery")
    assert mystery["precision"] == "HIGH" and mystery["rule"] == "hard-no-schema"
    assert hm.CUSTOM_DOMAIN in mystery["op_type"] and "Mystery" in mystery["reason"]
    assert hm.report_node(report, "mm1")["precision"] == "LOW"
    # dtypes agree: the custom op reads float32; whatever mm2 was planned, the
    # types known on its two inputs are one type (LOW on both, or float32 on both).
    converted = onnx.shape_inference.infer_shapes(onnx.load(dst))  # stops at the custom op (no schema)
    types = hm.elem_types(converted.graph)
    node = hm.node(converted.graph, "mystery")
    assert types[node.input[0]] == FLOAT
    mm2 = hm.node(converted.graph, "mm2")
    want = hm.LOW_ELEM["fp16"] if hm.report_node(report, "mm2")["precision"] == "LOW" else FLOAT
    assert {types.get(i) for i in mm2.input} - {None} == {want}
    # With the custom op standing in as an Identity, the converted graph type-checks and runs.
    ref_path = _as_identity(src, os.path.join(tmp_path, "h12c.ref_identity.onnx"))
    conv_path = _as_identity(dst, os.path.join(tmp_path, "h12c.conv_identity.onnx"))
    onnx.checker.check_model(conv_path, full_check=True)
    x = np.random.default_rng(13).standard_normal((2, 4)).astype(np.float32)
    hm.assert_close(hm.run(ref_path, {"x": x}), hm.run(conv_path, {"x": x}))
