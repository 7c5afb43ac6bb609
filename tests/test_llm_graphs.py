"""LLM decoder graphs as exporters write them (issue 27): onnxruntime's own ops, caches, rotary, tied embeddings."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import ampconv
from ampconv.errors import ModelLoadError
from ampconv.loadcheck import checker_error, runtime_only_default_ops

from tests.helpers import run
from tests.llm_models import genai_block, with_default_domain_op


def test_onnxruntime_default_domain_ops_are_known():
    assert "SimplifiedLayerNormalization" in runtime_only_default_ops()
    assert "LayerNormalization" not in runtime_only_default_ops()  # onnx.defs defines it


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
