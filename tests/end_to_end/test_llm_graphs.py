"""LLM decoder graphs as exporters write them (issue 27): onnxruntime's own ops, caches, rotary, tied embeddings."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import ampconv
from ampconv.core.dimexpr import evaluate_dim
from ampconv.errors import ModelLoadError, UsageError
from ampconv.core.heavy_ops import is_outer_product
from ampconv.runtime.loadcheck import checker_error
from ampconv.runtime.contrib_schemas import default_domain_ops
from ampconv.plan.bounds import semantic_bound
from ampconv.plan.kvcache import find_cache_pairs
from ampconv.runtime.schema import op_info, type_ties
from ampconv.validation.decode import decode_roles, greedy_decode

from tests.helpers import elem_types, model_from_text, run, save
from tests.llm_models import decode_feeds, decode_step, genai_block, int4_block, with_default_domain_op


def test_onnxruntime_default_domain_ops_are_known():
    assert "SimplifiedLayerNormalization" in default_domain_ops()
    assert "LayerNormalization" not in default_domain_ops()  # onnx.defs defines it


def test_checker_leaves_onnxruntime_default_domain_ops_to_onnxruntime(tmp_path):
    src = genai_block(tmp_path / "genai.onnx")
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(str(src), full_check=True)
    assert checker_error(src, full=True) is None
    assert not list(tmp_path.glob(".checker-copy*")), "the checker's copies are removed"


def test_checker_still_judges_the_rest_of_such_a_graph(tmp_path):
    src = genai_block(tmp_path / "genai.onnx")
    proto = onnx.load(str(src))
    proto.graph.node[2].input[1] = "no_such_value"  # the MatMul reads an undefined value
    onnx.save(proto, str(src))
    error = checker_error(src, full=False)
    assert error is not None and "no_such_value" in str(error)


def test_genai_graph_converts_loads_and_validates(tmp_path):
    src = genai_block(tmp_path / "genai.onnx")
    dst = tmp_path / "genai.fp16.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    by_name = {n["name"]: n for n in report.nodes}
    assert by_name["norm0"]["precision"] == "LOW"
    ids = np.array([[1, 5, 7]], np.int64)
    reference, converted = run(src, {"input_ids": ids})[0], run(dst, {"input_ids": ids})[0]
    assert np.abs(reference - converted).max() < 0.05
    result = ampconv.validate(src, dst)
    assert result.passed


def test_an_op_nobody_defines_is_still_refused(tmp_path):
    src = with_default_domain_op(tmp_path / "bogus.onnx", "NoSuchOpAnywhere")
    with pytest.raises(ModelLoadError):
        ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(overwrite=True))
    assert not (tmp_path / "out.onnx").exists()


# ----------------------------------------------------------------- rotary tables: bounded voters
def _plan_of(tmp_path, src, **config):
    report = ampconv.convert(src, tmp_path / "plan.onnx", ampconv.Config(overwrite=True, **config))
    return {n["name"]: n for n in report.nodes}, report


def test_rotary_multiplies_stay_low_and_the_tables_are_cast_once(tmp_path):
    nodes, report = _plan_of(tmp_path, decode_step(tmp_path / "d.onnx"))
    assert nodes["rotary_cos"]["precision"] == "HIGH"  # its argument needs float32
    for name in ("q_mul_cos", "q_mul_sin", "k_mul_cos", "k_mul_sin"):
        assert (nodes[name]["precision"], nodes[name]["rule"]) == ("LOW", "gray-narrow"), nodes[name]
    assert "bounded by |x| <= 1" in nodes["q_mul_cos"]["reason"]
    assert nodes["cos_unsqueeze"]["precision"] == "LOW"  # the cast moved up to the table
    assert nodes["q_rope_add"]["precision"] == "LOW"


def test_an_unbounded_float32_voter_still_promotes(tmp_path):
    src = model_from_text("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[2, 4] x, float[4, 4] w) => (float[2, 4] y) {
        mm = MatMul (x, w)
        e = Exp (x)
        y = Mul (mm, e)
    }""")
    _, report = _plan_of(tmp_path, save(src, tmp_path / "m.onnx"), block_ops=("Exp",))
    mul = next(n for n in report.nodes if n["op_type"] == "Mul")
    assert (mul["precision"], mul["rule"]) == ("HIGH", "gray-promote")


def test_semantic_bounds_follow_op_meaning():
    model = ir.from_proto(model_from_text("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[4] x) => (float[4] a, float[4] b, float[4] c, float[4] d) {
        s = Sin (x)
        a = Neg (s)
        t = Tanh (x)
        b = Mul (s, t)
        c = Mul (s, x)
        d = Exp (x)
    }"""))
    bound = {v.name: semantic_bound(v) for v in model.graph.outputs}
    assert bound == {"a": 1.0, "b": 1.0, "c": None, "d": None}


# ----------------------------------------------------------------- the KV cache
def test_cache_pairs_found_by_structure(tmp_path):
    model = ir.load(str(decode_step(tmp_path / "d.onnx")))
    pairs = find_cache_pairs(model.graph)
    assert [(p.past, p.present, p.via) for p in pairs] == [
        ("past_key", "present_key", "Concat"), ("past_value", "present_value", "Concat")]


def test_an_input_concatenated_but_not_returned_is_no_cache():
    model = ir.from_proto(model_from_text("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[1, 4] past, float[1, 4] new) => (float[1, 8] y) {
        joined = Concat <axis = 1> (past, new)
        y = Relu (joined)
    }"""))
    assert find_cache_pairs(model.graph) == ()


def test_cache_pairs_through_an_attention_op_and_an_if_branch():
    model = ir.from_proto(model_from_text("""<ir_version: 8, opset_import: ["" : 18, "com.microsoft" : 1]>
    g (float[1, 2, 4] q, float[1, 1, 3, 2] past_k, float[1, 1, 3, 2] past_v, int32[1] lens, int32 total, bool cond)
      => (float[1, 2, 4] out, float[1, 1, 5, 2] present_k, float[1, 1, 5, 2] present_v, float[1, 2, 4] branch_out) {
        out, present_k, present_v = com.microsoft.GroupQueryAttention <num_heads = 2, kv_num_heads = 1>
            (q, q, q, past_k, past_v, lens, total)
        branch_out = If (cond) <
            then_branch = t () => (float[1, 2, 4] r) { r = Identity (q) },
            else_branch = e () => (float[1, 2, 4] r2) { r2 = Concat <axis = 1> (q, q) }
        >
    }"""))
    pairs = find_cache_pairs(model.graph)
    assert [(p.past, p.present, p.via) for p in pairs] == [
        ("past_k", "present_k", "GroupQueryAttention"), ("past_v", "present_v", "GroupQueryAttention")]


def test_merged_decoder_cache_inside_an_if_branch():
    model = ir.from_proto(model_from_text("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[1, 3] past, float[1, 1] new, bool use_cache) => (float[1, 4] present) {
        present = If (use_cache) <
            then_branch = t () => (float[1, 4] joined) { joined = Concat <axis = 1> (past, new) },
            else_branch = e () => (float[1, 4] fresh) { fresh = Concat <axis = 1> (new, new, new, new) }
        >
    }"""))
    assert [(p.past, p.present) for p in find_cache_pairs(model.graph)] == [("past", "present")]


def test_kv_cache_low_keeps_the_cache_low_and_ids_untouched(tmp_path):
    src = decode_step(tmp_path / "d.onnx")
    dst = tmp_path / "d.low.onnx"
    keep = ampconv.convert(src, tmp_path / "d.keep.onnx", ampconv.Config(overwrite=True))
    low = ampconv.convert(src, dst, ampconv.Config(overwrite=True, kv_cache="low"))
    types = elem_types(onnx.load(str(dst)))
    assert types["past_key"] == types["present_value"] == onnx.TensorProto.FLOAT16
    assert types["input_ids"] == types["position_ids"] == onnx.TensorProto.INT64
    assert types["logits"] == onnx.TensorProto.FLOAT  # keep_io_types still keeps the rest
    rules = {d["name"]: d["rule"] for d in low.interface}
    assert rules["past_key"] == rules["present_key"] == "io-kv-cache"
    nodes = {n["name"]: n for n in low.nodes}
    assert nodes["key_cache_concat"]["precision"] == "LOW"
    assert low.casts_after < keep.casts_after
    assert low.kv_cache["types"] == ["float16"] and keep.kv_cache["types"] == ["float32"]
    assert "kv_cache='low'" in keep.summary() and "KV cache: 2 past/present pair(s)" in low.summary()
    feeds = decode_feeds()
    reference = run(src, feeds)
    converted = run(dst, {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in feeds.items()})
    assert np.abs(reference[0] - converted[0]).max() < 0.05


def test_kv_cache_bytes_per_step_evaluate_derived_dimensions(tmp_path):
    src = decode_step(tmp_path / "d.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx",
                             ampconv.Config(overwrite=True, kv_cache="low", shapes={"past_sequence_length": 32}))
    per_tensor = 1 * 2 * 16 * 2  # batch x heads x head_dim x float16 bytes, per cache position
    assert report.kv_cache["bytes_read"] == 2 * 32 * per_tensor
    assert report.kv_cache["bytes_written"] == 2 * (32 + 1) * per_tensor  # past_sequence_length + seq, seq at 1
    assert report.kv_cache["unset"] == ["seq"]


def test_a_model_without_a_cache_reports_none(tmp_path):
    report = ampconv.convert(genai_block(tmp_path / "g.onnx"), tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    assert report.kv_cache is None and "KV cache" not in report.summary()


def test_kv_cache_option_is_checked():
    with pytest.raises(UsageError, match="kv_cache"):
        ampconv.Config(kv_cache="fp16")


# ----------------------------------------------------------------- weights read by selections
def test_a_large_embedding_read_only_by_a_gather_is_stored_low(tmp_path):
    src = decode_step(tmp_path / "d.onnx", vocab=1024, hidden=32)
    nodes, report = _plan_of(tmp_path, src)
    assert (nodes["embed_gather"]["precision"], nodes["embed_gather"]["rule"]) in (
        ("LOW", "transparent-weight"), ("LOW", "transparent-shared"), ("LOW", "free-low"))
    fates = {i["name"]: i["fate"] for i in report.initializers}
    assert fates["embed"] == "LOW"


def test_a_selection_from_a_small_or_unfit_weight_stays_float32(tmp_path):
    for table in (np.full((4, 8), 0.5, np.float32), np.full((64, 512), 1e6, np.float32)):
        graph = onnx.helper.make_graph(
            [onnx.helper.make_node("Gather", ["table", "ids"], ["rows"], name="select"),
             onnx.helper.make_node("Exp", ["rows"], ["y"], name="exp")], "g",
            [onnx.helper.make_tensor_value_info("ids", onnx.TensorProto.INT64, [3])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
            [onnx.numpy_helper.from_array(table, "table")])
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)], ir_version=8)
        nodes, _ = _plan_of(tmp_path, save(model, tmp_path / "sel.onnx"))
        assert nodes["select"]["precision"] == "HIGH", nodes["select"]


# ----------------------------------------------------------------- schemas onnxruntime alone defines
def test_twin_type_variables_of_onnxruntime_ops_move_together():
    assert ("T", "V") in type_ties("", "SimplifiedLayerNormalization", 21)
    assert ("T_CACHE", "T") in type_ties("com.microsoft", "GroupQueryAttention", 1)
    info = op_info("", "SimplifiedLayerNormalization", 21)
    assert info.input_type(0) == info.output_type(0)
    assert type_ties("com.microsoft", "SkipSimplifiedLayerNormalization", 1) == ()  # U is float32 only


# ----------------------------------------------------------------- dimension expressions
@pytest.mark.parametrize("dim, sizes, expected", [
    ("past_sequence_length + 1", {"past_sequence_length": 32}, 33),
    ("s0 + s1", {"s0": 3}, 4),
    ("2*s//3", {"s": 9}, 6),
    ("total_sequence_length", {}, 1),
    (7, {}, 7),
    ("__import__('os')", {}, 1),
])
def test_dimension_expressions(dim, sizes, expected):
    assert evaluate_dim(dim, sizes) == expected


def test_random_inputs_agree_on_derived_dimensions(tmp_path):
    from ampconv.core.shapespec import resolve_shape
    from ampconv.numerics.modelio import InputSpec

    spec = InputSpec("attention_mask", ir.DataType.INT64, (1, "past_sequence_length + 1"))
    assert resolve_shape(spec, {"past_sequence_length": (8,)}) == (1, 9)


# ----------------------------------------------------------------- weight-only quantized graphs
def test_int4_weights_pass_through_with_activations_low(tmp_path):
    src = int4_block(tmp_path / "q.onnx")
    dst = tmp_path / "q.fp16.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    nodes = {n["name"]: n for n in report.nodes}
    assert nodes["embed"]["precision"] == nodes["proj"]["precision"] == "LOW"
    written = {t.name: t.data_type for t in onnx.load(str(dst)).graph.initializer}
    assert written["embed_q"] == written["proj_q"] == onnx.TensorProto.UINT8  # untouched
    assert written["embed_scales"] == written["proj_scales"] == onnx.TensorProto.FLOAT16
    assert report.casts_after == 1  # the output only
    ids = np.array([[3, 9, 27]], np.int64)
    assert np.abs(run(src, {"input_ids": ids})[0] - run(dst, {"input_ids": ids})[0]).max() < 1e-2


def test_activation_quantization_ops_stay_float32(tmp_path):
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("DynamicQuantizeMatMul", ["x", "w", "w_scale", "w_zero"], ["y"], name="dqmm",
                               domain="com.microsoft")], "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.numpy_helper.from_array(np.ones((4, 3), np.int8), "w"),
         onnx.numpy_helper.from_array(np.array([0.1], np.float32), "w_scale"),
         onnx.numpy_helper.from_array(np.array([0], np.int8), "w_zero")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18),
                                                         onnx.helper.make_opsetid("com.microsoft", 1)], ir_version=8)
    nodes, _ = _plan_of(tmp_path, save(model, tmp_path / "dq.onnx"))
    assert nodes["dqmm"]["precision"] != "LOW"  # its float32-only slots leave nothing to convert


# ----------------------------------------------------------------- greedy decoding as LLM users judge it
def test_greedy_decode_of_a_converted_step_agrees(tmp_path):
    src = decode_step(tmp_path / "d.onnx")
    dst = tmp_path / "d.low.onnx"
    ampconv.convert(src, dst, ampconv.Config(overwrite=True, kv_cache="low"))
    result = greedy_decode(str(src), str(dst), decode_feeds(), steps=6)
    assert result.steps == 6 and len(result.reference_tokens) == 6
    assert result.passed and result.agreed == 6, result.summary()
    assert result.summary() == "greedy decode: 6/6 tokens agree"


def test_greedy_decode_finds_a_real_divergence(tmp_path):
    src = decode_step(tmp_path / "d.onnx", seed=0)
    other = decode_step(tmp_path / "other.onnx", seed=5)  # other weights: another model, not rounding
    result = greedy_decode(str(src), str(other), decode_feeds(), steps=6, backend="native")
    assert result.agreed < 6 and not result.passed
    assert "not a near-tie" in result.summary()


def test_decode_roles_are_read_by_structure(tmp_path):
    roles = decode_roles(ir.load(str(decode_step(tmp_path / "d.onnx"))))
    assert (roles.token, roles.logits) == ("input_ids", "logits")
    assert dict(roles.cache) == {"past_key": "present_key", "past_value": "present_value"}
    assert roles.others == ("position_ids",)
    with pytest.raises(UsageError, match="KV cache"):
        decode_roles(ir.load(str(genai_block(tmp_path / "g.onnx"))))


# ----------------------------------------------------------------- rotary angles from integer positions
_ANGLE_MODEL = """<ir_version: 8, opset_import: ["" : 18]>
g (%s pos, float[1, 4, 8] x) => (float[1, 4, 8] y) <float[1, 4] inv_freq = {1.0, 0.1, 0.01, 0.001},
                                                   float[8, 8] w = {%s}> {
    posf = Cast <to = 1> (pos)
    angle = MatMul (posf, inv_freq)
    twice = Concat <axis = -1> (angle, angle)
    c = Cos (twice)
    h = MatMul (x, w)
    y = Mul (h, c)
}"""


def test_a_rotary_angle_made_from_positions_stays_float32(tmp_path):
    text = _ANGLE_MODEL % ("int64[1, 4, 1]", ", ".join(["0.1"] * 64))
    _, report = _plan_of(tmp_path, save(model_from_text(text), tmp_path / "a.onnx"))
    matmuls = [n for n in report.nodes if n["op_type"] == "MatMul"]
    angle, projection = matmuls  # file order: the angle, then x @ w
    assert (angle["precision"], angle["rule"]) == ("HIGH", "range-phase")
    assert "multiple of 4 rad" in angle["reason"]
    assert projection["precision"] == "LOW"
    mul = next(n for n in report.nodes if n["op_type"] == "Mul")
    assert (mul["precision"], mul["rule"]) == ("LOW", "gray-narrow")  # the table is cast down once


def test_an_angle_from_float_data_follows_the_usual_rules(tmp_path):
    text = _ANGLE_MODEL % ("float[1, 4, 1]", ", ".join(["0.1"] * 64))
    _, report = _plan_of(tmp_path, save(model_from_text(text), tmp_path / "f.onnx"))
    assert all(n["rule"] != "range-phase" for n in report.nodes)


# ----------------------------------------------------------------- merged decoders: the model inside an If
_MERGED = """<ir_version: 8, opset_import: ["" : 18]>
g (bool use_cache, float[2, 8] x) => (float[2, 8] y, float[2, 8] s) <float[8, 8] w = {%s}, int64[1] last = {-1}> {
    y, s = If (use_cache) <
        then_branch = t () => (float[2, 8] y, float[2, 8] s) {
            y = MatMul (x, w)
            s = Relu (y)
        },
        else_branch = e () => (float[2, 8] y, float[2, 8] s) {
            y = MatMul (x, w)
            h = Mul (y, y)
            m = ReduceMean (h, last)
            v = Add (m, m)
            r = Sqrt (v)
            s = Div (y, r)
        }
    >
}"""


def test_a_branch_output_named_as_the_if_output_converts_without_pins(tmp_path):
    src = save(model_from_text(_MERGED % ", ".join(["0.1"] * 64)), tmp_path / "merged.onnx")
    dst = tmp_path / "merged.fp16.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    assert report.runtime_pins == []
    nodes = [n for n in report.nodes if n["op_type"] == "MatMul"]
    assert all(n["precision"] == "LOW" for n in nodes)
    feeds = {"use_cache": np.array(True), "x": np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)}
    for flag in (True, False):
        feeds["use_cache"] = np.array(flag)
        expected, got = run(src, feeds), run(dst, feeds)
        assert np.abs(expected[0] - got[0]).max() < 1e-2


def test_a_normalization_inside_a_branch_keeps_its_statistics_float32(tmp_path):
    src = save(model_from_text(_MERGED % ", ".join(["0.1"] * 64)), tmp_path / "merged.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(overwrite=True, synthetic_run=False))
    in_else = {n["op_type"]: n for n in report.nodes if n["op_type"] in ("ReduceMean", "Sqrt")}
    assert all(n["precision"] == "HIGH" and n["rule"] == "range-statistics" for n in in_else.values()), in_else


# ----------------------------------------------------------------- what counts as heavy work
def test_an_outer_product_matmul_is_no_heavy_work():
    assert is_outer_product("MatMul", "", 1)
    assert not is_outer_product("MatMul", "", 64)
    assert not is_outer_product("MatMul", "", None)
    assert not is_outer_product("Gemm", "", 1)


def test_the_rotary_outer_product_is_not_counted_among_heavy_ops(tmp_path):
    text = _ANGLE_MODEL % ("int64[1, 4, 1]", ", ".join(["0.1"] * 64))
    report = ampconv.convert(save(model_from_text(text), tmp_path / "a.onnx"), tmp_path / "o.onnx",
                             ampconv.Config(overwrite=True))
    assert (report.figures["heavy_nodes"], report.figures["heavy_low"]) == (1, 1)  # x @ w only


def test_the_summary_says_who_runs_onnxruntime_own_ops(tmp_path):
    report = ampconv.convert(genai_block(tmp_path / "g.onnx"), tmp_path / "o.onnx", ampconv.Config(overwrite=True))
    assert any("onnxruntime's own ops in the default domain (SimplifiedLayerNormalization)" in n
               for n in report.notes)
    plain = ampconv.convert(decode_step(tmp_path / "d.onnx"), tmp_path / "d.o.onnx", ampconv.Config(overwrite=True))
    assert not any("onnxruntime's own ops" in n for n in plain.notes)


def test_validate_decodes_a_decoder_greedily(tmp_path):
    src = decode_step(tmp_path / "d.onnx")
    dst = tmp_path / "d.low.onnx"
    ampconv.convert(src, dst, ampconv.Config(overwrite=True, kv_cache="low"))
    result = ampconv.validate(src, dst)
    assert result.passed and result.decode is not None and result.decode.steps == 8
    assert "greedy decode: 8/8 tokens agree" in result.summary_line()
    assert result.to_dict()["decode"]["passed"] is True


def test_validate_of_a_model_without_a_cache_decodes_nothing(tmp_path):
    src = genai_block(tmp_path / "g.onnx")
    dst = tmp_path / "g.fp16.onnx"
    ampconv.convert(src, dst, ampconv.Config(overwrite=True))
    result = ampconv.validate(src, dst)
    assert result.decode is None and "greedy decode" not in result.summary_line()


def test_an_unset_derived_dimension_is_noted_by_the_symbol_to_set():
    """A mask of ``past_sequence_length + 1`` beside a cache of ``past_sequence_length``: one note, one flag that works."""
    from ampconv.numerics.modelio import InputSpec
    from ampconv.core.shapespec import resolve_all as _resolve_all
    from ampconv.errors import command_line_text, spell_parameters

    specs = [InputSpec("attention_mask", ir.DataType.INT64, (1, "past_sequence_length + 1")),
             InputSpec("past", ir.DataType.FLOAT, (1, 2, "past_sequence_length", 8))]
    _shapes, notes = _resolve_all(specs, {})
    notes = tuple(spell_parameters(note, command_line_text) for note in notes)  # as the command line prints it
    assert notes == ("dimension 'past_sequence_length' (input attention_mask, past) is not set: random data uses "
                     "size 1 there; pass --shape past_sequence_length:N for the size the model will see",)
    assert _resolve_all(specs, {"past_sequence_length": (4,)}) == (
        {"attention_mask": (1, 5), "past": (1, 2, 4, 8)}, ())
