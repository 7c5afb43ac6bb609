"""Values beyond the fallback type (issue 38, part 2): every value a rewrite puts into a type fits that type.

float32's lowest value (-3.4028e38, the mask fill HF's T5 multiplies an inverted mask by) overflows
bfloat16 (max 3.3895e38). Stored there plainly it is -inf, and ``(1 - 1) * -inf`` is NaN: a T5 decoder
step converted with ``--fallback-dtype bf16`` gave NaN logits. The cause is fixed where it was made (a
mask fill stored in the fallback type becomes that type's mask value, -1e30, as under ``--dtype bf16``;
a node that reads values beyond bfloat16 from a float32 node stays float32), and the invariant is
checked on the rewritten model whatever path made a constant (``invariants.values_beyond``).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import numpy_helper

import ampconv
from ampconv.passes import apply as apply_pass
from ampconv.passes.invariants import Rounding, rounded, values_beyond
from ampconv.validation.decode import greedy_decode

import llm_models

pytest.importorskip("onnxruntime")

# A T5 step whose cross-attention scores pass float16's range on the synthetic run: the nodes that apply
# the mask run bfloat16 under the fallback, the mask fill's Mul among them.
T5 = dict(layers=1, score_scale=30000.0, embed_scale=0.1)


def _t5(tmp_path):
    src = llm_models.t5_decoder_step(tmp_path / "t5.onnx", **T5)
    return src, llm_models.t5_decoder_feeds(layers=1)


def _initializer(path, name):
    model = onnx.load(str(path))
    return next(t for t in model.graph.initializer if t.name == name or t.name.startswith(name + "__"))


def test_t5_decoder_with_the_bf16_fallback_decodes_as_float32_does(tmp_path):
    src, feeds = _t5(tmp_path)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(fallback_dtype="bf16"))
    fill = next(n for n in report.nodes if n["name"] == "decoder/mask_fill")
    assert fill["precision"] == "FALLBACK"  # the case: the mask fill's consumer runs bfloat16
    stored = _initializer(tmp_path / "out.onnx", "lowest")
    assert stored.data_type == onnx.TensorProto.BFLOAT16
    value = float(numpy_helper.to_array(stored).astype(np.float32).reshape(-1)[0])
    assert np.isfinite(value) and value == pytest.approx(-1e30, rel=0.01)  # bfloat16's mask value, not -inf
    record = next(c for c in report.constants if c["tensor"] == "lowest")
    assert "stored as -1e+30" in record["action"] and "bfloat16" in record["action"]
    decoded = greedy_decode(str(src), str(tmp_path / "out.onnx"), feeds, steps=8)
    assert decoded.agreed == 8, decoded.to_dict()
    assert decoded.reference_tokens[0] != 0  # argmax of a NaN row is 0: agreement is no accident


def test_the_invariant_keeps_the_reader_float32_when_a_path_forgets_the_fill(tmp_path, monkeypatch):
    """Negative case of the cause fix: a rewrite that stores the fill in bf16 plainly is caught on the model."""
    src, feeds = _t5(tmp_path)

    def forgetful(self, name, precision):
        clamp = self.clamp.get(name or "", False)
        return (clamp, self.limits) if precision == apply_pass.LOW else (False, self.limits)

    monkeypatch.setattr(apply_pass._Rewriter, "_clamp_of", forgetful)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(fallback_dtype="bf16"))
    fill = next(n for n in report.nodes if n["name"] == "decoder/mask_fill")
    assert (fill["precision"], fill["rule"]) == ("HIGH", "runtime-pin")
    assert "value check" in fill["reason"] and "lowest" in fill["reason"] and "bfloat16" in fill["reason"]
    model = onnx.load(str(tmp_path / "out.onnx"))
    for tensor in model.graph.initializer:
        if tensor.data_type in (onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16):
            assert np.isfinite(numpy_helper.to_array(tensor).astype(np.float32)).all(), tensor.name
    assert greedy_decode(str(src), str(tmp_path / "out.onnx"), feeds, steps=8).agreed == 8


def test_values_beyond_reads_each_rounded_constant_of_the_model():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([1]))
    graph = ir.Graph([x], [], nodes=[], name="g", opset_imports={"": 17})
    cases = {
        "plain_beyond": Rounding("bf16", peak=3.4028234e38),  # float32's lowest: beyond bfloat16
        "plain_inside": Rounding("bf16", peak=3.0e38),
        "fp16_beyond": Rounding("fp16", peak=70000.0),
        "clamped_to_other": Rounding("bf16", clamped_to="fp16"),
        "clamped_to_own": Rounding("bf16", clamped_to="bf16"),
    }
    for name, rounding in cases.items():
        # The check reads the recorded rounding, not the bytes: any tensor carries it.
        weight = ir.Value(name=name, type=ir.TensorType(ir.DataType.BFLOAT16), shape=ir.Shape([1]),
                          const_value=rounded(ir.Tensor(np.zeros(1, np.float32), name=name), rounding))
        graph.register_initializer(weight)
        graph.append(ir.node("Add", [x, weight], name=f"reads_{name}"))
    found = values_beyond(ir.Model(graph, ir_version=8), lambda source, tensor: None)
    assert set(found) == {"reads_plain_beyond", "reads_fp16_beyond", "reads_clamped_to_other"}
    assert "inf" in found["reads_plain_beyond"] and "float16" in found["reads_fp16_beyond"]


def test_a_fallback_reason_says_what_the_node_runs_in(tmp_path):
    """The norm statistics run bfloat16 under the fallback: their reason says so, and claims no float32."""
    src, _ = _t5(tmp_path)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(fallback_dtype="bf16"), dry_run=True)
    fallback = [n for n in report.nodes if n["precision"] == "FALLBACK" and n["rule"].startswith(("range", "data",
                                                                                               "hard"))]
    assert any(n["rule"] == "range-statistics" for n in fallback)
    for node in fallback:
        assert "runs bfloat16" in node["reason"], node
        assert "stay float32" not in node["reason"] and "kept float32" not in node["reason"], node
    plain = ampconv.convert(src, tmp_path / "plain.onnx", ampconv.Config(), dry_run=True)
    statistics = [n for n in plain.nodes if n["rule"] == "range-statistics"]
    assert statistics and all(n["precision"] == "HIGH" and "need float32's range" in n["reason"] for n in statistics)


def _filled(tmp_path, fill: float):
    """x -> Where(x > 0, fill, x) -> Add(., x) -> y: the Add reads what a float32 Where wrote."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Greater", ["x", "zero"], ["positive"], name="positive"),
             helper.make_node("Where", ["positive", "fill", "x"], ["filled"], name="where"),
             helper.make_node("Add", ["filled", "x"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
                              [numpy_helper.from_array(np.array(0, np.float32), "zero"),
                               numpy_helper.from_array(np.array(fill, np.float32), "fill")])
    path = tmp_path / f"filled{abs(hash(fill))}.onnx"
    onnx.save(onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    report = ampconv.convert(path, tmp_path / "o.onnx", ampconv.Config(fallback_dtype="bf16", overwrite=True),
                             dry_run=True)
    return next(n for n in report.nodes if n["name"] == "add")


def test_a_node_that_reads_values_beyond_bf16_from_float32_stays_float32(tmp_path):
    """float32's lowest read from a float32 node would be cast to -inf in bfloat16: the Add runs float32."""
    add = _filled(tmp_path, float(np.finfo(np.float32).min))
    assert (add["precision"], add["rule"]) == ("HIGH", "data-overflow")
    assert "beyond bfloat16's range too" in add["reason"] and "runs float32" in add["reason"]
    inside = _filled(tmp_path, -1e30)  # beyond float16, inside bfloat16: the fallback holds it
    assert (inside["precision"], inside["rule"]) == ("FALLBACK", "data-overflow")
    assert "runs bfloat16" in inside["reason"]
