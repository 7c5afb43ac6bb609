"""``--dry-run`` predicts what the real run does: the same casts and the same weight sizes."""

from __future__ import annotations

import ampconv
from helpers import build_tiny_gpt, model_from_text, save

# A weight in an initializer and one in a Constant node (PyTorch's exporter
# stores many weights that way), a Softmax (black list: casts around it).
TEXT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x) => (float[2,4] y) {
  w = Constant <value = float[4,4] {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1}> ()
  a = MatMul(x, w)
  b = MatMul(a, v)
  s = Softmax(b)
  y = Relu(s)
}
"""


def _with_initializer(text: str):
    import numpy as np
    import onnx.numpy_helper

    model = model_from_text(text.replace("g (float[2,4] x)", "g (float[2,4] x, float[4,4] v)"))
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.eye(4, dtype=np.float32), "v"))
    del model.graph.input[1]
    return model


def _counts(report):
    return (report.casts_before, report.casts_inserted, report.casts_removed, report.casts_after,
            report.weight_bytes_before, report.weight_bytes_after)


def test_dry_run_predicts_casts_and_weights_of_the_real_run(tmp_path):
    src = save(_with_initializer(TEXT), tmp_path / "m.onnx")
    plan = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(), dry_run=True)
    real = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config())
    assert not plan.output and real.output
    assert _counts(plan) == _counts(real)
    assert plan.casts_inserted > 0  # the Softmax needs casts around it
    assert plan.casts_before + plan.casts_inserted - plan.casts_removed == plan.casts_after


def test_constant_node_weights_count_in_the_weights_line(tmp_path):
    src = save(_with_initializer(TEXT), tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config())
    # Two 4x4 float32 weights (one initializer, one Constant node), both LOW afterwards.
    assert report.weight_bytes_before == 2 * 64
    assert report.weight_bytes_after == 2 * 32


def test_o0_dry_run_predicts_no_change(tmp_path):
    src = save(_with_initializer(TEXT), tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(level="O0"), dry_run=True)
    assert report.casts_inserted == 0 and report.weight_bytes_after == report.weight_bytes_before


def test_dry_run_matches_on_a_gpt_with_external_weights(tmp_path):
    src = build_tiny_gpt(tmp_path, layout="single")
    plan = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(), dry_run=True)
    real = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config())
    assert _counts(plan) == _counts(real)
    assert plan.weight_bytes_after < 0.6 * plan.weight_bytes_before
