"""The sample models build deterministically, pass the full checker and run in onnxruntime."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import onnx
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ort = pytest.importorskip("onnxruntime")

# Expected output shapes with every symbolic dimension fed as 2.
EXPECTED = {
    "mlp": {"logits": (2, 10)},
    "cnn": {"logits": (2, 10)},
    "transformer": {"output": (2, 16, 64)},
    "lstm": {"logits": (2, 8)},
    "control_flow": {"output": (2, 8), "upsampled": (3, 2, 16)},
    "external_data": {"logits": (2, 10)},
}


def _load_build_module():
    spec = importlib.util.spec_from_file_location("sample_build", ROOT / "sample_models" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return _load_build_module().build_all(tmp_path_factory.mktemp("samples"))


def _feeds(session, sign=1.0):
    rng = np.random.default_rng(1)
    feeds = {}
    for inp in session.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in inp.shape]
        feeds[inp.name] = (sign * np.abs(rng.standard_normal(shape))).astype(np.float32)
    return feeds


def test_builds_every_sample(samples):
    assert set(samples) == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_checks_and_runs(samples, name):
    path = samples[name]
    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    results = session.run(None, _feeds(session))
    assert {n: r.shape for n, r in zip(names, results)} == EXPECTED[name]
    assert all(np.isfinite(r).all() for r in results)


def _all_nodes(graph):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_node_has_a_unique_readable_name(samples, name):
    model = onnx.load(str(samples[name]), load_external_data=False)
    names = [n.name for n in _all_nodes(model.graph)]
    assert all(n.startswith("/") for n in names), names
    assert len(set(names)) == len(names)


def test_if_takes_both_branches(samples):
    session = ort.InferenceSession(str(samples["control_flow"]), providers=["CPUExecutionProvider"])
    pos = session.run(["output"], _feeds(session, 1.0))[0]
    neg = session.run(["output"], _feeds(session, -1.0))[0]
    assert not np.allclose(pos, -neg)


def test_external_data_is_external(samples):
    path = samples["external_data"]
    assert (path.parent / "external_data.onnx.data").stat().st_size > 10_000
    model = onnx.load(str(path), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def test_transformer_mask_is_float32_lowest(samples):
    model = onnx.load(str(samples["transformer"]))
    mask = next(t for t in model.graph.initializer if t.name == "causal_mask")
    values = onnx.numpy_helper.to_array(mask)
    assert values[0, 1] == np.finfo(np.float32).min and values[1, 0] == 0.0


def test_build_is_deterministic(samples, tmp_path):
    again = _load_build_module().build_all(tmp_path)
    for name, path in samples.items():
        assert path.read_bytes() == again[name].read_bytes(), name
