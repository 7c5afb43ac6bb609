"""Rule ``hard-constant`` on a ConstantOfShape's fill value: an attribute no consumer sees as a constant."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import convert_text, run

FILL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] W = {1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16}> {
    s = Shape (x)
    c = ConstantOfShape <value = float[1] {%s}> (s)
    m = Mul (c, x)
    y = MatMul (m, W)
}"""


def _decisions(report):
    return {n["op_type"]: (n["precision"], n["rule"]) for n in report.nodes}


@pytest.mark.parametrize("fill", ["1e6", "-3.4e38"])
def test_a_fill_beyond_the_low_range_keeps_it_and_its_readers_float32(tmp_path, fill):
    report, _ = convert_text(tmp_path, FILL % fill, level="O3")
    decided = _decisions(report)
    assert decided["ConstantOfShape"] == ("HIGH", "hard-constant")
    assert decided["Mul"] == ("HIGH", "hard-constant")
    assert "fill value" in next(n["reason"] for n in report.nodes if n["op_type"] == "ConstantOfShape")
    x = np.full((2, 4), 1e-3, np.float32)
    got, want = run(tmp_path / "model.out.onnx", {"x": x}), run(tmp_path / "model.onnx", {"x": x})
    assert np.isfinite(got[0]).all()
    np.testing.assert_allclose(got[0], want[0], rtol=1e-2)


@pytest.mark.parametrize("fill", ["2.5", "-65504"])
def test_a_fill_the_low_type_holds_converts(tmp_path, fill):
    report, _ = convert_text(tmp_path, FILL % fill, level="O3")
    decided = _decisions(report)
    assert decided["ConstantOfShape"][0] == "LOW" and decided["Mul"][0] == "LOW"
    assert "hard-constant" not in {rule for _, rule in decided.values()}


def test_bf16_holds_what_fp16_cannot(tmp_path):
    # ConstantOfShape takes bfloat16 from opset 20.
    report, _ = convert_text(tmp_path, (FILL % "1e6").replace('"" : 17', '"" : 20'), level="O3", dtype="bf16")
    assert _decisions(report)["ConstantOfShape"][0] == "LOW"
