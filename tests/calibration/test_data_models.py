"""The data-aware fixtures of tests/data_models.py reproduce their failures.

For every model, on its own calibration data and under fp16 emulation at
``data_models.TOLERANCE``: float32 is finite, plain O2 fails, O0 passes, and
O2 with ``FIXES[name]`` kept float32 passes (each of those nodes is needed).
These are the premises bench/bench_tune.py and the tune tests rely on.
"""

from __future__ import annotations

import data_models as dm
import numpy as np
import onnx
import pytest

import ampconv
from ampconv.validation import ValidateOptions

NAMES = sorted(dm.MODELS)
SAMPLES = 8


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """name -> (model path, calibration folder), built once for the module."""
    root = tmp_path_factory.mktemp("data_models")
    found = {}
    for name, model in dm.MODELS.items():
        folder = root / name
        found[name] = (model.save(folder), str(folder / "calib"))
        model.write_calibration(folder / "calib", SAMPLES, seed=0)
    return found


def _passes(prepared, name: str, tmp_path, **config) -> bool:
    src, calib = prepared[name]
    dst = tmp_path / f"{name}.fp16.onnx"
    ampconv.convert(src, dst, ampconv.Config(dtype="fp16", overwrite=True, **config))
    rtol, atol = dm.TOLERANCE
    result = ampconv.validate(src, str(dst), ValidateOptions(inputs=(calib,), backend="emulate", rtol=rtol, atol=atol))
    return result.passed


def _keep(nodes) -> tuple[str, ...]:
    return tuple(f"^{n}$" for n in nodes)


@pytest.mark.parametrize("name", NAMES)
def test_model_is_a_clean_float32_fixture(name):
    model = dm.MODELS[name].build()
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == dm.IR_VERSION
    assert [(o.domain, o.version) for o in model.opset_import] == [("", dm.OPSET)]
    graphs = [model.graph] + [a.g for n in model.graph.node for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
    names = [n.name for g in graphs for n in g.node]
    assert all(names) and len(set(names)) == len(names)
    for value in list(model.graph.input) + list(model.graph.output):
        assert all(d.HasField("dim_value") for d in value.type.tensor_type.shape.dim), value.name
    for node in dm.FIXES[name]:
        assert node in names


@pytest.mark.parametrize("name", NAMES)
def test_calibration_samples_match_inputs_and_are_seeded(name, tmp_path):
    model = dm.MODELS[name].build()
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    first, again, other = (list(dm.calibration_samples(name, 2, seed)) for seed in (0, 0, 1))
    for sample in first:
        assert {k: list(v.shape) for k, v in sample.items()} == shapes
        assert all(v.dtype == np.float32 for v in sample.values())
    assert all(np.array_equal(a[k], b[k]) for a, b in zip(first, again) for k in a)
    assert not all(np.array_equal(a[k], b[k]) for a, b in zip(first, other) for k in a)
    paths = dm.write_calibration(name, tmp_path, 2, seed=0)
    assert [p.rsplit("/", 1)[-1] for p in paths] == ["sample_000.npz", "sample_001.npz"]
    with np.load(paths[1]) as stored:
        assert all(np.array_equal(stored[k], first[1][k]) for k in shapes)


@pytest.mark.parametrize("name", NAMES)
def test_float32_is_finite_on_calibration_data(name, prepared):
    import onnxruntime as ort

    session = ort.InferenceSession(prepared[name][0], providers=["CPUExecutionProvider"])
    for sample in dm.calibration_samples(name, SAMPLES, seed=0):
        for out in session.run(None, sample):
            assert np.isfinite(out).all()


@pytest.mark.parametrize("name", NAMES)
def test_plain_o2_fails_o0_passes(name, prepared, tmp_path):
    assert not _passes(prepared, name, tmp_path, level="O2")
    assert _passes(prepared, name, tmp_path, level="O0")


@pytest.mark.parametrize("name", NAMES)
def test_keeping_the_fix_nodes_float32_passes_and_each_is_needed(name, prepared, tmp_path):
    fix = dm.FIXES[name]
    assert _passes(prepared, name, tmp_path, level="O2", keep_fp32=_keep(fix))
    if len(fix) > 1:  # with one node, dropping it is plain O2 (tested above)
        for dropped in fix:
            assert not _passes(prepared, name, tmp_path, level="O2", keep_fp32=_keep(n for n in fix if n != dropped)), dropped
