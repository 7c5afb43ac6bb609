"""``validate`` reads each model once and infers types at most once per model.

Every session runs the file itself or a copy derived from the one loaded
model (``Model.clone()``), so emulation and localization never edit the model
as written and never reload it.
"""

from __future__ import annotations

import collections

import numpy as np
import onnx.shape_inference
import onnx_ir as ir
import pytest
import validate_models as vm

from ampconv.validation import ValidateOptions, validate
from ampconv.numerics import modelio


@pytest.fixture
def counted(monkeypatch):
    """Count ``modelio.load`` per path and ONNX shape-inference runs; keep the loaded models."""
    counts = collections.Counter()
    loaded = {}
    load, infer = modelio.load, onnx.shape_inference.infer_shapes

    def counting_load(path):
        counts[path] += 1
        loaded[path] = load(path)
        return loaded[path]

    def counting_infer(*args, **kwargs):
        counts["infer_shapes"] += 1
        return infer(*args, **kwargs)

    monkeypatch.setattr(modelio, "load", counting_load)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", counting_infer)
    return counts, loaded


def _overflow(tmp_path, **options):
    ref, conv = vm.overflow_pair(tmp_path)  # no value_info: intermediates need inference
    npz = tmp_path / "in.npz"
    np.savez(npz, **vm.overflow_inputs())
    return ref, conv, validate(ref, conv, ValidateOptions(inputs=(str(npz),), **options))


def _unchanged(model) -> bool:
    """No derivation reached the model as loaded: no emulation names, no exposed outputs."""
    names = [v.name for v in modelio.iter_values(model)] + [n.name for n in model.graph]
    return not any("__ampconv_emu" in (name or "") for name in names) and len(model.graph.outputs) == 1


def test_emulate_with_localization_loads_once_and_infers_once_per_model(tmp_path, counted):
    counts, loaded = counted
    ref, conv, result = _overflow(tmp_path, backend="emulate", localize=True)
    assert not result.passed and result.localization.node == "scale_up"
    assert counts == {ref: 1, conv: 1, "infer_shapes": 2}
    assert _unchanged(loaded[ref]) and _unchanged(loaded[conv])


def test_emulate_without_localization_infers_each_model_once(tmp_path, counted):
    # The converted model's types for emulation, the reference's for the floor model (validate.floor).
    counts, loaded = counted
    ref, conv, result = _overflow(tmp_path, backend="emulate")
    assert not result.passed and result.localization is None
    assert counts == {ref: 1, conv: 1, "infer_shapes": 2}
    assert _unchanged(loaded[ref]) and _unchanged(loaded[conv])


def test_without_the_floor_emulate_infers_the_converted_model_only(tmp_path, counted):
    counts, loaded = counted
    ref, conv, result = _overflow(tmp_path, backend="emulate", floor=False)
    assert not result.passed and result.localization is None
    assert counts == {ref: 1, conv: 1, "infer_shapes": 1}
    assert _unchanged(loaded[conv])


def test_native_runs_the_files_and_infers_only_for_the_floor(tmp_path, counted):
    counts, _ = counted
    ref, conv, _ = _overflow(tmp_path, backend="native")
    assert counts == {ref: 1, conv: 1, "infer_shapes": 1}
    ref, conv, _ = _overflow(tmp_path, backend="native", floor=False)
    assert counts == {ref: 2, conv: 2, "infer_shapes": 1}


@pytest.mark.parametrize("backend", ["emulate", "native"])
def test_bfloat16_outputs_derive_every_copy_from_one_load(tmp_path, counted, backend):
    counts, loaded = counted
    ref, conv = vm.bf16_output_pair(tmp_path, factor=1.5)  # bf16 output: the reference runs a wrapped copy
    result = validate(ref, conv, ValidateOptions(backend=backend, localize=True))
    assert not result.passed and result.localization.node == "mul"
    assert counts == {ref: 1, conv: 1, "infer_shapes": 2}
    assert _unchanged(loaded[ref]) and _unchanged(loaded[conv])
    assert loaded[ref].graph.outputs[0].dtype == loaded[conv].graph.outputs[0].dtype == ir.DataType.BFLOAT16


def _broken_pair(tmp_path):
    """A float32 MLP and a 'converted' copy no runtime loads: an fp16 activation meets a float32 weight."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    ref = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    conv = helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16, name="down"),
         helper.make_node("MatMul", ["x16", "w"], ["y16"], name="mm"),
         helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT, name="up")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    ref_path, conv_path = tmp_path / "ref.onnx", tmp_path / "conv.onnx"
    onnx.save(ref, str(ref_path))
    onnx.save(conv, str(conv_path))
    return ref_path, conv_path


@pytest.mark.parametrize("backend", ["emulate", "native", "auto"])
def test_a_converted_model_no_runtime_loads_is_refused_under_every_backend(tmp_path, backend):
    """Emulation retypes every tensor, so it would run (and pass) a model onnxruntime and the checker refuse."""
    from ampconv.errors import ConversionError

    ref, conv = _broken_pair(tmp_path)
    with pytest.raises(ConversionError, match=r"conv\.onnx: converted model fails onnx\.checker"):
        validate(ref, conv, ValidateOptions(backend=backend))


def test_the_cli_exits_1_and_says_the_model_does_not_load(tmp_path):
    from click.testing import CliRunner

    from ampconv_cli.main import cli

    ref, conv = _broken_pair(tmp_path)
    result = CliRunner().invoke(cli, ["validate", str(ref), str(conv)])
    assert result.exit_code == 1 and "converted model fails onnx.checker" in result.output
    assert "--backend emulate" not in result.output  # no advice that would pass a broken model


def test_a_missing_bfloat16_kernel_is_only_a_note_under_emulation(tmp_path):
    """The one refusal emulation excuses: the CPU provider has no kernel for the LOW type."""
    ref, conv = vm.bf16_output_pair(tmp_path, factor=1.5)
    result = validate(ref, conv, ValidateOptions(backend="emulate"))
    assert result.backend == "emulate"
