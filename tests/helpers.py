"""Shared test helpers: build tiny models from ONNX text, convert, inspect, run."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List

import numpy as np
import onnx
import onnx.parser

import ampconv
from ampconv.runtime.facts import OnnxRuntimeFacts


def model_from_text(text: str) -> onnx.ModelProto:
    """Parse ONNX text (``<ir_version: 8, opset_import: [...]> graph (...) {...}``)."""
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def save(model: onnx.ModelProto, path: Path) -> Path:
    """Save a ModelProto and return the path."""
    onnx.save(model, str(path))
    return path


def convert_text(tmp_path: Path, text: str, **config) -> tuple:
    """Save ``text`` as a model, convert it, return (report, output ModelProto)."""
    src = save(model_from_text(text), tmp_path / "model.onnx")
    dst = tmp_path / "model.out.onnx"
    config.setdefault("overwrite", True)
    report = ampconv.convert(src, dst, ampconv.Config(**config))
    return report, onnx.load(str(dst))


class NoGpuTable(OnnxRuntimeFacts):
    """onnxruntime's facts without the recorded CUDA kernel table (``hard-gpu-kernel`` silent): tests of the
    load check's pins use it where CUDA's table would keep their bf16 node float32 first."""

    def gpu_low_kernel(self, provider, domain, op_type, opset, type_string):
        return None


def decisions(report) -> Dict[str, dict]:
    """node name -> report entry."""
    return {n["name"]: n for n in report.nodes}


def elem_types(model: onnx.ModelProto) -> Dict[str, int]:
    """tensor name -> element type, from inputs, outputs, value_info, initializers.

    Type inference runs first: a converted model declares value_info only where
    its input did (ampconv.writing.writer), so intermediate types come from inference.
    """
    types = {}
    model = onnx.shape_inference.infer_shapes(model)
    g = model.graph
    for v in list(g.input) + list(g.output) + list(g.value_info):
        types[v.name] = v.type.tensor_type.elem_type
    for t in g.initializer:
        types[t.name] = t.data_type
    return types


def ops(model: onnx.ModelProto, op_type: str) -> List[onnx.NodeProto]:
    """Nodes of one op type in the main graph."""
    return [n for n in model.graph.node if n.op_type == op_type]


def run(path, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    """Run a model on the CPU provider with optimizations off."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)



def _gpt_module():
    """``sample_models/gpt.py`` (the repository root is on the tests' import path: setup.cfg ``pythonpath``)."""
    from sample_models import gpt

    return gpt


def tiny_gpt_spec():
    """The small GPT the I/O tests build: 2 layers of hidden 64, weights in external data."""
    return _gpt_module().GptSpec(layers=2, hidden=64, vocab=500, max_positions=64)


def build_tiny_gpt(tmp_path: Path, layout: str = "single", spec=None, name: str = "gpt") -> Path:
    """Write the GPT decoder (``tiny_gpt_spec`` by default) under ``tmp_path/layout``; returns the model path."""
    return _gpt_module().build(tmp_path / layout, spec or tiny_gpt_spec(), layout=layout, seed=1, name=name)
