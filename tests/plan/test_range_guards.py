"""Rule family ``range`` (ampconv/plan/evidence.py) and the default preset's gray-but-guarded ops.

A once-black op (a normalization, a softmax, a reduction, Exp, Pow) follows
its neighbours like any gray op, and is kept float32 only on evidence found on
the model: a decomposed normalization's statistics, an fp16 sum over a long
static extent, a constant mask with a fully masked row. Each rule has a
positive and a negative case; none applies at O3, under ``--preset
mindspore``, or to an op a policy file made white.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import ampconv
import hazard_models as hm
from helpers import convert_text, decisions, model_from_text, save

# ------------------------------------------------------------------ guarded ops follow their neighbours
GUARDED_AFTER_MATMUL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 8] x, float[2, 8] g, float[2, 8] b) => (float[2, 8] y, float[2, 8] e, float[2, 1] m)
    <float[8, 8] w = {%s}, float[8] gamma = {1,1,1,1,1,1,1,1}, float[8] beta = {0,0,0,0,0,0,0,0}, float three = {3.0}> {
    h = MatMul (x, w)
    n = LayerNormalization <axis = -1> (h, gamma, beta)
    s = Softmax <axis = -1> (n)
    p = Pow (h, three)
    e = Exp (p)
    m = ReduceMean <axes = [-1]> (h)
    y = MatMul (s, w)
}
""" % ", ".join(str(0.01 * k) for k in range(64))


def test_once_black_ops_follow_a_low_producer(tmp_path):
    report, _ = convert_text(tmp_path, GUARDED_AFTER_MATMUL)
    d = decisions(report)
    for op in ("LayerNormalization", "Softmax", "Pow", "Exp", "ReduceMean"):
        node = next(n for n in report.nodes if n["op_type"] == op)
        assert (node["precision"], node["rule"]) == ("LOW", "gray-follow"), (op, node)
    assert report.casts_after == 4  # the float32 input and the three float32 outputs: no cast pair anywhere
    assert all(n["precision"] == "LOW" for n in d.values() if n["op_type"] == "MatMul")


def test_the_mindspore_preset_still_keeps_its_black_list(tmp_path):
    report, _ = convert_text(tmp_path, GUARDED_AFTER_MATMUL, preset="mindspore")
    ln = next(n for n in report.nodes if n["op_type"] == "LayerNormalization")
    assert (ln["precision"], ln["rule"]) == ("HIGH", "black")


# ------------------------------------------------------------------ range-statistics
RMS_NORM = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 8] x) => (float[2, 8] y) <float[8, 8] w = {%s}, float two = {2.0}, float eps = {1e-5}> {
    h = MatMul (x, w)
    sq = Pow (h, two)
    ms = ReduceMean <axes = [-1]> (sq)
    me = Add (ms, eps)
    rt = Sqrt (me)
    y = Div (h, rt)
}
""" % ", ".join(str(0.01 * k) for k in range(64))


def test_decomposed_layernorm_keeps_its_statistics_float32(tmp_path):
    """Without a float32 run's numbers (the run off), the spelling keeps the statistics float32."""
    src = hm.save(hm.decomposed_layernorm(), tmp_path, "ln")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(synthetic_run=False))
    d = decisions(report)
    assert d["mm"]["precision"] == "LOW"
    for name in ("mean1", "sub", "pow", "mean2", "sqrt", "div"):
        assert (d[name]["precision"], d[name]["rule"]) == ("HIGH", "range-statistics"), (name, d[name])
    assert "stash_type" in d["pow"]["reason"]


def test_decomposed_rms_norm_is_found_too(tmp_path):
    report, _ = convert_text(tmp_path, RMS_NORM, synthetic_run=False)
    rules = {n["op_type"]: n["rule"] for n in report.nodes}
    assert rules["Pow"] == rules["ReduceMean"] == rules["Sqrt"] == rules["Div"] == "range-statistics"
    assert rules["Add"] == "range-statistics"  # eps 1e-5 fits fp16: no constant pin first
    assert rules["MatMul"] == "white"


# An RMSNorm over an embedding table: the values come from the model's weights (token ids index them), so the
# synthetic run saw the model's own numbers. %s: the table's scale.
EMBEDDED_RMS_NORM = """<ir_version: 8, opset_import: ["" : 17]>
g (int64[1, 6] ids) => (float[1, 6, 8] y)
    <float[16, 8] table = {%s}, float two = {2.0}, float eps = {1e-5}, float[8, 8] w = {%s}> {
    h = Gather (table, ids)
    sq = Pow (h, two)
    ms = ReduceMean <axes = [-1]> (sq)
    me = Add (ms, eps)
    rt = Sqrt (me)
    n = Div (h, rt)
    y = MatMul (n, w)
}
"""


def _embedded_norm(scale: float) -> str:
    values = np.random.default_rng(0).standard_normal(128) * scale
    return EMBEDDED_RMS_NORM % (", ".join(f"{v:.4f}" for v in values), ", ".join(["0.1"] * 64))


def test_statistics_the_synthetic_run_saw_fit_with_room_follow_the_gray_rule(tmp_path):
    """Numbers over shapes: squares of the model's own weights, seen far below float16's max, run LOW."""
    report, _ = convert_text(tmp_path, _embedded_norm(0.05))
    rules = {n["op_type"]: (n["precision"], n["rule"]) for n in report.nodes}
    assert all(rule != "range-statistics" for _precision, rule in rules.values()), rules
    assert rules["Pow"][0] == rules["ReduceMean"][0] == rules["Div"][0] == "LOW"
    assert report.casts_after == 1  # the float32 output only: no cast pair around the statistics
    near = {n["op_type"]: n for n in convert_text(tmp_path, _embedded_norm(40.0))[0].nodes}
    assert (near["Pow"]["precision"], near["Pow"]["rule"]) == ("HIGH", "range-statistics")  # the negative case


def test_statistics_the_synthetic_run_saw_near_the_maximum_stay_float32(tmp_path):
    """The same norm over a table 800x larger (|x| to ~120, squares ~1e4: within 4x in |x| of 65504): float32."""
    report, _ = convert_text(tmp_path, _embedded_norm(40.0))
    pow_node = next(n for n in report.nodes if n["op_type"] == "Pow")
    assert (pow_node["precision"], pow_node["rule"]) == ("HIGH", "range-statistics")
    assert "synthetic float32 run saw its squares reach" in pow_node["reason"]


def test_statistics_scaled_by_a_float_input_hold_to_the_envelope(tmp_path):
    """A random sample does not know a float input's real range (hazard 5: |x| ~ 3e4), but it knows how far the
    squares it saw fit may grow: they run LOW, and the envelope names them and where they stop holding."""
    report, _ = convert_text(tmp_path, RMS_NORM)
    pow_node = next(n for n in report.nodes if n["op_type"] == "Pow")
    assert (pow_node["precision"], pow_node["rule"]) == ("LOW", "gray-follow")
    (entry,) = report.envelope
    assert entry["input"] == "x" and entry["limited_by"] == pow_node["name"]
    assert 4 * entry["sample_max"] < entry["holds_to"] < 3e4  # room the run saw, short of hazard 5's inputs
    ranged, _ = convert_text(tmp_path, RMS_NORM, input_ranges={"x": (-3e4, 3e4)})
    pow_node = next(n for n in ranged.nodes if n["op_type"] == "Pow")
    assert pow_node["precision"] == "HIGH" and pow_node["rule"] in ("data-overflow", "data-envelope")


def test_statistics_calibration_data_saw_fit_with_room_run_low(tmp_path):
    """Real samples speak for a float input's range: seen with room, the statistics follow the gray rule."""
    src = save(model_from_text(RMS_NORM), tmp_path / "m.onnx")
    folder = tmp_path / "cal"
    folder.mkdir()
    rng = np.random.default_rng(1)
    for i in range(2):
        np.savez(folder / f"s{i}.npz", x=rng.standard_normal((2, 8)).astype(np.float32))
    report = ampconv.convert(src, tmp_path / "out.onnx",
                             ampconv.Config(calibration_data=(str(folder),), overwrite=True))
    assert all(n["rule"] != "range-statistics" for n in report.nodes)
    big = tmp_path / "cal_big"
    big.mkdir()
    np.savez(big / "s0.npz", x=(rng.standard_normal((2, 8)) * 3e3).astype(np.float32))
    report = ampconv.convert(src, tmp_path / "out2.onnx", ampconv.Config(calibration_data=(str(big),), overwrite=True))
    assert {n["rule"] for n in report.nodes if n["op_type"] in ("Pow", "Sqrt")} <= {"range-statistics", "data-overflow"}
    assert all(n["precision"] == "HIGH" for n in report.nodes if n["op_type"] in ("Pow", "Sqrt"))


def test_a_plain_mean_or_square_is_no_normalization(tmp_path):
    text = RMS_NORM.replace("y = Div (h, rt)", "y = Mul (rt, h)").replace("me = Add (ms, eps)", "me = Add (ms, ms)")
    text = text.replace("(h, rt)", "(h, rt)")
    plain = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 8] x) => (float[2, 1] y, float[2, 8] z) <float[8, 8] w = {%s}, float two = {2.0}> {
        h = MatMul (x, w)
        y = ReduceMean <axes = [-1]> (h)
        z = Pow (h, two)
    }""" % ", ".join(str(0.01 * k) for k in range(64))
    report, _ = convert_text(tmp_path, plain)
    assert {n["op_type"]: n["rule"] for n in report.nodes} == {
        "MatMul": "white", "ReduceMean": "gray-follow", "Pow": "gray-follow"}


def test_range_rules_do_not_apply_at_o3_or_to_ops_a_file_made_white(tmp_path):
    report, _ = convert_text(tmp_path, RMS_NORM, level="O3")
    assert all(n["rule"] == "level-O3" for n in report.nodes)
    mix = tmp_path / "white.json"
    mix.write_text(json.dumps({"white-list": {"to-add": ["Pow", "ReduceMean", "Sqrt", "Div", "Add"]}}))
    report, _ = convert_text(tmp_path, RMS_NORM, mixlists=(str(mix),))
    assert all(n["precision"] == "LOW" for n in report.nodes)


# ------------------------------------------------------------------ range-reduction
def _reduction(size: int, op: str = "ReduceSum") -> str:
    return f"""<ir_version: 8, opset_import: ["" : 18]>
    g (float[1, {size}] x) => (float[1, 1] y) <int64[1] axes = {{1}}> {{
        h = Relu (x)
        y = {op} <keepdims = 1> (h, axes)
    }}"""


def test_a_long_fp16_sum_stays_float32(tmp_path):
    # The analysis alone (no float32 run: it would see the sum's headroom, test_numbers_ranges.py).
    report, _ = convert_text(tmp_path, _reduction(20000), keep_io_types=False, synthetic_run=False)
    node = next(n for n in report.nodes if n["op_type"] == "ReduceSum")
    assert (node["precision"], node["rule"]) == ("HIGH", "range-reduction")
    assert "20000 values" in node["reason"] and "3.28" in node["reason"]


@pytest.mark.parametrize("size,op,dtype", [(100, "ReduceSum", "fp16"), (20000, "ReduceSum", "bf16"),
                                           (100, "ReduceSumSquare", "fp16")])
def test_a_short_sum_or_a_bf16_sum_runs_low(tmp_path, size, op, dtype):
    report, _ = convert_text(tmp_path, _reduction(size, op), keep_io_types=False, dtype=dtype)
    node = next(n for n in report.nodes if n["op_type"] == op)
    assert node["precision"] == "LOW" and node["rule"] == "gray-follow"


def test_a_sum_of_squares_has_the_shorter_limit(tmp_path):
    report, _ = convert_text(tmp_path, _reduction(512, "ReduceSumSquare"), keep_io_types=False, synthetic_run=False)
    node = next(n for n in report.nodes if n["op_type"] == "ReduceSumSquare")
    assert (node["precision"], node["rule"]) == ("HIGH", "range-reduction") and "RMS |x|" in node["reason"]


def test_a_sum_over_an_unknown_extent_follows_its_neighbours(tmp_path):
    text = _reduction(20000).replace("float[1, 20000] x", "float[1, n] x")
    report, _ = convert_text(tmp_path, text, keep_io_types=False)
    assert next(n for n in report.nodes if n["op_type"] == "ReduceSum")["precision"] == "LOW"


def test_the_extent_of_an_intermediate_value_is_inferred(tmp_path):
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 100] x) => (float[1, 1] y) <int64[1] axes = {1}, int64[2] shape = {1, 10000}, int64[2] reps = {1, 100}> {
        t = Tile (x, reps)
        y = ReduceSum <keepdims = 1> (t, axes)
    }"""
    report, _ = convert_text(tmp_path, text, keep_io_types=False, synthetic_run=False)
    assert next(n for n in report.nodes if n["op_type"] == "ReduceSum")["rule"] == "range-reduction"


# ------------------------------------------------------------------ range-mask
def test_a_softmax_over_a_mask_with_a_fully_masked_row_stays_float32(tmp_path):
    src = hm.save(hm.attention(-1e9), tmp_path, "att")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(dtype="bf16"))
    softmax = decisions(report)["softmax"]
    assert (softmax["precision"], softmax["rule"]) == ("HIGH", "range-mask") and "row 3" in softmax["reason"]


def test_a_causal_mask_without_a_full_row_lets_the_softmax_run_low(tmp_path):
    model = hm.attention(-1e9)
    mask = onnx.numpy_helper.to_array(hm.initializer(model.graph, "mask")).copy()
    mask[3, :3] = 0.0  # the last row sees its first keys: no row is fully masked
    for i, tensor in enumerate(model.graph.initializer):
        if tensor.name == "mask":
            model.graph.initializer[i].CopyFrom(onnx.numpy_helper.from_array(mask, "mask"))
    src = hm.save(model, tmp_path, "causal")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(dtype="bf16"))
    assert decisions(report)["softmax"]["precision"] == "LOW"


# ------------------------------------------------------------------ contrib ops: schemas, types, coverage
def _skip_layernorm_model(domain: str = "com.microsoft", op: str = "SkipLayerNormalization") -> onnx.ModelProto:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((8, 8)).astype(np.float32) * 0.3, "w")
    gamma = numpy_helper.from_array(np.ones(8, np.float32), "gamma")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node(op, ["h", "x", "gamma"], ["n"], domain=domain, name="sln"),
        helper.make_node("MatMul", ["n", "w"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 8])], [w, gamma])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(domain, 1)],
                             ir_version=8)


def test_a_fused_norm_converts_and_the_ops_after_it_are_typed(tmp_path):
    path = save(_skip_layernorm_model(), tmp_path / "sln.onnx")
    report = ampconv.convert(path, tmp_path / "out.onnx", ampconv.Config(keep_io_types=False))
    d = decisions(report)
    assert [d[n]["precision"] for n in ("mm", "sln", "mm2")] == ["LOW", "LOW", "LOW"]
    assert report.casts_after == 0
    assert not any("no schema" in n for n in report.notes)


def test_without_runtime_schemas_the_summary_says_why_and_warns(tmp_path, monkeypatch):
    import ampconv.runtime.contrib_schemas as rs
    import ampconv.runtime.schema as schema

    monkeypatch.setattr(rs, "_registry", lambda: {})
    schema._schema.cache_clear()
    schema.op_info.cache_clear()
    try:
        path = save(_skip_layernorm_model(), tmp_path / "sln.onnx")
        report = ampconv.convert(path, tmp_path / "out.onnx", ampconv.Config())
    finally:
        schema._schema.cache_clear()
        schema.op_info.cache_clear()
    d = decisions(report)
    assert d["sln"]["rule"] == "hard-no-schema" and d["mm2"]["rule"] == "hard-unknown-type"
    (note,) = [n for n in report.notes if "no schema is known" in n]
    assert "1 node(s) of domain com.microsoft (SkipLayerNormalization)" in note
    assert "1 node(s) reading their outputs" in note and "install onnxruntime" in note


def test_a_model_whose_heavy_ops_all_stay_float32_is_a_warning(tmp_path):
    path = save(_skip_layernorm_model(domain="example.custom", op="Mystery"), tmp_path / "m.onnx")
    report = ampconv.convert(path, tmp_path / "out.onnx", ampconv.Config(keep_fp32=("^mm$",)))
    assert any("none of the 2 heavy op(s)" in w and "no faster" in w for w in report.warnings), report.warnings
    note = next(n for n in report.notes if "example.custom" in n)
    assert "no installed library defines this domain" in note
    # Negative: one heavy op LOW is no such warning.
    report = ampconv.convert(path, tmp_path / "out2.onnx", ampconv.Config())
    assert not any("heavy op" in w for w in report.warnings)


def test_embed_layer_normalization_takes_no_bfloat16(tmp_path):
    from ampconv.runtime.schema import op_info

    info = op_info("com.microsoft", "EmbedLayerNormalization", 1)
    assert info.known and "tensor(bfloat16)" not in info.allowed(info.main_type())
    assert "tensor(float16)" in info.allowed(info.main_type())
    skip = op_info("com.microsoft", "SkipLayerNormalization", 1)
    assert skip.output_type(1) == "U" and skip.allowed("U") == frozenset({"tensor(float)"})


def test_a_reported_constant_read_by_a_float32_consumer_is_not_called_rounded(tmp_path):
    """The summary, the report and the file agree: a weight whose reader stays float32 is not 'stored rounded'."""
    values = ", ".join(["1e-9"] + [str(0.5 + k) for k in range(127)])  # one value flushes to 0: reported only
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 128] x) => (float[2, 128] y) <float[128] w = {%s}> {
        y = Add (x, w)
    }""" % values
    kept, _ = convert_text(tmp_path, text)  # x is a float32 input: the Add follows it, float32
    (record,) = kept.constants
    assert "unrounded" in record["action"] and "stored rounded" not in kept.summary()
    assert [f["fate"] for f in kept.initializers if f["name"] == "w"] in ([], ["HIGH"])
    lowered, _ = convert_text(tmp_path, text, keep_io_types=False)  # x is LOW: so is the Add
    (record,) = lowered.constants
    assert record["action"].startswith("stored rounded") and "stored rounded" in lowered.summary()


GPT2_ATTENTION = """<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 4, 8] x) => (float[1, 4, 8] y)
    <float[8, 8] w = {%s}, float zero = {0.0}, float lowest = {-3.4028234663852886e38}, float scale = {0.35},
     bool[1, 6, 6] causal = {%s}, int64[1] s0 = {0}, int64[1] s4 = {4}, int64[1] ax1 = {1}, int64[1] ax2 = {2}> {
    h = MatMul (x, w)
    kt = Transpose <perm = [0, 2, 1]> (h)
    qk = MatMul (h, kt)
    sc = Mul (qk, scale)
    sc32 = Cast <to = 1> (sc)
    full = Where (causal, zero, lowest)
    rows = Slice (full, s0, s4, ax1)
    mask = Slice (rows, s0, s4, ax2)
    masked = Add (sc32, mask)
    p = Softmax <axis = -1> (masked)
    p32 = Cast <to = 1> (p)
    y = MatMul (p32, h)
}""" % (", ".join(str(0.01 * k) for k in range(64)),
        ", ".join("1" if c <= r else "0" for r in range(6) for c in range(6)))


def test_a_sliced_causal_mask_and_exported_casts_leave_the_attention_low(tmp_path):
    """GPT-2's export: a float32-lowest causal mask sliced to the sequence, and Cast(to=float) around the softmax.

    The mask fill reaches the Softmax through two Slices (a mask path), so it is stored as a finite LOW
    fill; the exported Cast(to=float) nodes are retargeted LOW, and the free chain between them (Where,
    Slice, Add, Softmax) follows them: no cast pair around the attention.
    """
    report, _ = convert_text(tmp_path, GPT2_ATTENTION)
    by_op = {}
    for n in report.nodes:
        by_op.setdefault(n["op_type"], set()).add(n["precision"])
    for op in ("MatMul", "Where", "Slice", "Add", "Softmax", "Cast"):
        assert by_op[op] == {"LOW"}, (op, [n for n in report.nodes if n["op_type"] == op])
    assert any("attention-mask fill" in c["action"] for c in report.constants)
    assert report.casts_after == 2  # the float32 input and output only


def test_a_free_chain_that_only_feeds_shape_arithmetic_stays_float32(tmp_path):
    """Negative of the rule above: a Cast(to=int64) is no LOW consumer (hazard 8)."""
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 6] x) => (float[2, 6] y) <float one = {1.0}> {
        s = Shape (x)
        f = Cast <to = 1> (s)
        same = Div (f, one)
        i = Cast <to = 7> (same)
        y = Reshape (x, i)
    }"""
    report, _ = convert_text(tmp_path, text, keep_io_types=False)
    d = {n["op_type"]: n for n in report.nodes if n["op_type"] in ("Div",)}
    assert d["Div"]["precision"] == "HIGH"


def test_statistics_guard_speaks_for_float16_only(tmp_path):
    """bfloat16 holds any square float32 does: a decomposed normalization follows the gray rule there."""
    src = tmp_path / "ln.onnx"
    onnx.save(hm.decomposed_layernorm(), str(src))
    rules = {}
    for dtype in ("fp16", "bf16"):
        report = ampconv.convert(src, tmp_path / f"ln.{dtype}.onnx",
                                 ampconv.Config(dtype=dtype, overwrite=True, synthetic_run=False))
        rules[dtype] = {n["rule"] for n in report.nodes}
    assert "range-statistics" in rules["fp16"]
    assert "range-statistics" not in rules["bf16"]


_GELU_TANH = """<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 64] x) => (float[4, 64] y) <float[64, 64] w = {%s}> {
    h = MatMul (x, w)
    half = Constant <value = float {0.5}> ()
    three = Constant <value = float {3.0}> ()
    k = Constant <value = float {%s}> ()
    one = Constant <value = float {1.0}> ()
    m = Mul (h, half)
    p = Pow (h, three)
    m1 = Mul (p, k)
    a = Add (h, m1)
    t = Tanh (a)
    a1 = Add (t, one)
    y = Mul (m, a1)
}"""


@pytest.mark.parametrize("factor, pinned", [("0.044715", False), ("1000.0", True)], ids=["gelu", "huge-factor"])
def test_a_constant_node_scales_a_cube_by_its_value(tmp_path, factor, pinned):
    """GPT-2's tanh GELU writes its coefficients as Constant nodes: they are numbers, not activations."""
    text = _GELU_TANH % (", ".join(["0.01"] * 64 * 64), factor)
    report, _ = convert_text(tmp_path, text, synthetic_run=False)
    rules = {n["rule"] for n in report.nodes}
    assert ("range-reduction" in rules) is pinned, rules


# ------------------------------------------------------------------ what the synthetic run speaks for
def test_values_scaled_by_user_data_exclude_cache_bounded_and_integer_paths():
    """Float input x reaches h and its sum; a softmax bounds; a Shape is an integer; the cache past is the model's."""
    import onnx_ir as ir

    from ampconv.plan.kvcache import find_cache_pairs
    from ampconv.plan.provenance import data_reach

    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 8] x, float[1, 4, 8] past, float[1, 1, 8] new) => (float[2, 8] y, float[1, 5, 8] present,
                                                                 int64[2] s, float[2, 8] p) {
        h = Relu (x)
        p = Softmax (h)
        s = Shape (h)
        present = Concat <axis = 1> (past, new)
        y = Add (h, h)
    }"""
    model = ir.serde.deserialize_model(model_from_text(text))
    graph = model.graph
    cache = {pair.past for pair in find_cache_pairs(graph)}
    assert cache == {"past"}
    reached = {v.name for v in data_reach(graph, [v for v in graph.inputs if v.name not in cache])}
    assert {"x", "new", "h", "y", "present"} <= reached
    assert not reached & {"past", "p", "s"}
