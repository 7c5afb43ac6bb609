"""``fallback_dtype="bf16"`` (issue 32): bf16 where a guard finds the values do not fit fp16, fp16 elsewhere.

Models: ``bench/bf16_models.py`` (a mel front end, a Square -> ReduceSum layer
norm, a Gemma-style RMSNorm, each with calibration samples) and a few of the
hazard builders.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import numpy as np
import onnx
import onnx_ir as ir
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

import ampconv
from ampconv.errors import UsageError
from ampconv.runtime.facts import OnnxRuntimeFacts
from ampconv.validation import ValidateOptions, validate
from bench import bf16_models
import hazard_models

FALLBACK = "FALLBACK"


def _convert(tmp_path, name, data=True, dry_run=False, **config):
    src, folder = bf16_models.write(name, tmp_path)
    dst = tmp_path / f"{name}_{'_'.join(f'{k}{v}' for k, v in sorted(config.items()))}.onnx"
    extra = {"calibration_data": (folder,)} if data else {}
    report = ampconv.convert(src, dst, ampconv.Config(overwrite=True, **extra, **config), dry_run=dry_run)
    return src, folder, dst, report


def _decisions(report):
    return {n["name"]: (str(n["precision"]), n["rule"], n["reason"]) for n in report.to_dict()["nodes"]}


def _float_nodes(report):
    return [d for d in _decisions(report).values() if d[0] != "NONE"]


def _typed(path) -> ir.Model:
    """The written model with every value's type inferred (the writer declares no value_info)."""
    return ir.from_proto(onnx.shape_inference.infer_shapes(onnx.load(str(path))))


def _passes_emulation(src, dst, folder) -> bool:
    result = validate(src, str(dst), ValidateOptions(inputs=(folder,), backend="emulate"))
    return result.passed


# ------------------------------------------------------------------ default: today's plans exactly
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_fallback_float32_keeps_todays_plans(tmp_path, dtype):
    """``fallback_dtype="float32"`` (the default) plans exactly as without the option: same precision, rule, reason.

    (Checked once against the commit before this feature on 19 models x 2 dtypes: 972 decisions identical.)
    """
    models = {style: hazard_models.spelled_layer_norm(style) for style in ("jax2tf", "keras", "hand")}
    models.update({name: getattr(hazard_models, name)() for name in (
        "decomposed_layernorm", "edge_constants", "control_flow", "dtype_ops", "shared_initializer", "black_chain")})
    models["attention"] = hazard_models.attention(-1e9)
    models.update({name: build()[0] for name, build in bf16_models.BUILDERS.items()})
    for name, model in models.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        plain = ampconv.convert(path, tmp_path / "a.onnx", ampconv.Config(dtype=dtype, overwrite=True), dry_run=True)
        default = ampconv.convert(path, tmp_path / "b.onnx", ampconv.Config(dtype=dtype, fallback_dtype="float32",
                                                                             overwrite=True), dry_run=True)
        assert _decisions(plain) == _decisions(default), name
        assert all(d[0] != FALLBACK for d in _decisions(default).values())


def test_fallback_changes_nothing_where_no_guard_speaks(tmp_path):
    """Where no range guard keeps a node float32, the fallback plans exactly as fp16 alone (negative case)."""
    from ampconv.plan.fallback import RANGE_RULES

    checked = 0
    for name in ("black_chain", "shared_initializer", "dtype_ops", "control_flow", "interface", "resize"):
        build = getattr(hazard_models, name)
        model = build("scales") if name == "resize" else build()
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, path)
        plain = ampconv.convert(path, tmp_path / "a.onnx", ampconv.Config(overwrite=True), dry_run=True)
        if any(d[1] in RANGE_RULES for d in _decisions(plain).values()):
            continue
        fallback = ampconv.convert(path, tmp_path / "b.onnx", ampconv.Config(fallback_dtype="bf16", overwrite=True),
                                   dry_run=True)
        assert _decisions(fallback) == _decisions(plain), name
        checked += 1
    assert checked >= 3


# ------------------------------------------------------------------ the three models of the issue
def test_mel_frontend_runs_low_and_passes_emulation(tmp_path):
    """Power spectrum ~1e9: fp16 alone keeps almost every node float32; with the bf16 fallback >= 80% run LOW."""
    src, folder, dst, report = _convert(tmp_path, "mel_frontend", fallback_dtype="bf16")
    floats = _float_nodes(report)
    low = [d for d in floats if d[0] in ("LOW", FALLBACK)]
    assert len(low) / len(floats) >= 0.8, floats
    assert any(d[0] == FALLBACK for d in floats)
    assert _passes_emulation(src, dst, folder)
    _, _, _, plain = _convert(tmp_path, "mel_frontend")
    plain_low = [d for d in _float_nodes(plain) if d[0] == "LOW"]
    assert len(plain_low) < len(low)


@pytest.mark.parametrize("name,statistics", [
    ("square_sum_layer_norm", ("sum_sq", "mean_sq")),
    ("gemma_rms_norm", ("norm/pow", "norm/mean", "norm/add_eps", "norm/sqrt", "norm/div")),
])
def test_norm_statistics_run_bf16_not_float32(tmp_path, name, statistics):
    """The statistics that overflow fp16 run bf16 (rule and reason kept, the type named), and pass emulation."""
    src, folder, dst, report = _convert(tmp_path, name, fallback_dtype="bf16")
    decisions = _decisions(report)
    for node in statistics:
        assert decisions[node][0] == FALLBACK, (node, decisions[node])
    assert not [n for n, d in decisions.items() if d[0] == "HIGH"], decisions
    assert any("bfloat16 has float32's range" in d[2] for d in decisions.values())
    _, _, _, plain = _convert(tmp_path, name, release=False)  # the planner's own decisions, before the release
    assert all(_decisions(plain)[node][0] == "HIGH" for node in statistics)  # today: float32
    assert _passes_emulation(src, dst, folder)
    written = _typed(dst)
    types = {v.dtype for node in written.graph for v in node.outputs}
    assert ir.DataType.BFLOAT16 in types and ir.DataType.FLOAT16 in types


def test_disagreeing_voters_seen_inside_fp16_run_fp16(tmp_path):
    """Sub(mean of squares: bf16, seen at ~1.3e3; mean^2: fp16) runs fp16 with the bf16 input cast down: fp16's
    precision where the run saw the values fit (gray-narrow); without data it would run bf16."""
    _, _, _, report = _convert(tmp_path, "square_sum_layer_norm", dry_run=True, fallback_dtype="bf16")
    variance = _decisions(report)["variance"]
    assert variance[:2] == ("LOW", "gray-narrow") and "inside float16's range" in variance[2]
    _, _, _, blind = _convert(tmp_path, "square_sum_layer_norm", data=False, dry_run=True, fallback_dtype="bf16",
                              synthetic_run=False)
    assert _decisions(blind)["variance"][:2] == (FALLBACK, "gray-promote")  # no numbers: bf16 holds both


def test_synthetic_run_finds_the_rms_norm_overflow(tmp_path):
    """Without calibration data the default synthetic float32 run is the evidence: the same statistics run bf16."""
    _, _, _, report = _convert(tmp_path, "gemma_rms_norm", data=False, dry_run=True, fallback_dtype="bf16")
    decisions = _decisions(report)
    assert decisions["norm/mean"][0] == FALLBACK and decisions["norm/mean"][1] in ("data-overflow", "range-statistics")


def test_casts_between_fp16_and_bf16_are_direct(tmp_path):
    """One Cast from fp16 to bf16 (and back), never through float32."""
    _, _, dst, _ = _convert(tmp_path, "gemma_rms_norm", fallback_dtype="bf16")
    model = _typed(dst)
    casts = [n for n in model.graph if n.op_type == "Cast"]
    direct = [(n.inputs[0].dtype, ir.DataType(n.attributes["to"].value)) for n in casts]
    assert (ir.DataType.FLOAT16, ir.DataType.BFLOAT16) in direct
    assert (ir.DataType.BFLOAT16, ir.DataType.FLOAT16) in direct
    for node in casts:  # no fp16 -> float32 -> bf16 chain
        producer = node.inputs[0].producer()
        assert not (producer is not None and producer.op_type == "Cast"
                    and ir.DataType(node.attributes["to"].value) in (ir.DataType.BFLOAT16, ir.DataType.FLOAT16))


def test_schema_without_bf16_keeps_float32(tmp_path):
    """At an opset whose schema does not take bf16 (Add-7, Pow-12), the guarded nodes stay float32 (negative)."""
    model, _ = bf16_models.gemma_rms_norm()
    model.opset_import[0].version = 12
    model.graph.node[4].ClearField("input")
    model.graph.node[4].input.extend(["sq"])  # ReduceMean-11 takes its axes as an attribute
    model.graph.node[4].attribute.extend([onnx.helper.make_attribute("axes", [-1])])
    path = tmp_path / "op12.onnx"
    onnx.save(model, path)
    report = ampconv.convert(path, tmp_path / "o.onnx", ampconv.Config(fallback_dtype="bf16", keep_opset=True,
                                                                       overwrite=True), dry_run=True)
    decisions = _decisions(report)
    assert decisions["norm/add_eps"][0] == "HIGH"
    assert decisions["norm/pow"][0] == "HIGH" and "only from opset" in decisions["norm/pow"][2]
    warning = next(w for w in report.warning_texts() if "run float32, not bfloat16" in w)
    target = int(re.search(r"opset=(\d+)", warning).group(1))
    upgraded = ampconv.convert(path, tmp_path / "u.onnx", ampconv.Config(fallback_dtype="bf16", opset=target,
                                                                         overwrite=True), dry_run=True)
    assert _decisions(upgraded)["norm/pow"][0] == FALLBACK  # the opset the warning names converts it


def test_precision_rules_stay_float32(tmp_path):
    """A user's keep_fp32 is a precision choice, not range: it stays float32 under the fallback (negative)."""
    _, _, _, report = _convert(tmp_path, "gemma_rms_norm", dry_run=True, fallback_dtype="bf16",
                               keep_fp32=("norm/mean",))
    decisions = _decisions(report)
    assert decisions["norm/mean"][:2] == ("HIGH", "user-keep-fp32")
    assert decisions["norm/pow"][0] == FALLBACK


def test_emulation_rounds_each_tensor_to_its_own_type(tmp_path):
    """The emulated copy of a mixed model rounds bf16 tensors through bf16 and fp16 tensors through fp16."""
    from ampconv.numerics.emulate import emulate

    _, _, dst, _ = _convert(tmp_path, "gemma_rms_norm", fallback_dtype="bf16")
    model = ir.load(str(dst))
    emulate(model)
    targets = {ir.DataType(n.attributes["to"].value) for n in model.graph if n.op_type == "Cast"}
    assert {ir.DataType.BFLOAT16, ir.DataType.FLOAT16, ir.DataType.FLOAT} <= targets


# ------------------------------------------------------------------ options
def test_config_refuses_pointless_or_unknown_fallback():
    with pytest.raises(UsageError, match="fallback_dtype"):
        ampconv.Config(dtype="bf16", fallback_dtype="bf16")
    with pytest.raises(UsageError, match="fallback_dtype"):
        ampconv.Config(fallback_dtype="fp8")
    assert ampconv.Config(fallback_dtype="bfloat16").fallback_dtype == "bf16"
    assert ampconv.Config(fallback_dtype="fp32").fallback_dtype == "float32"


def test_cli_flag_and_its_one_line_error(tmp_path):
    src, folder = bf16_models.write("gemma_rms_norm", tmp_path)
    cli = [sys.executable, "-m", "ampconv"]
    bad = subprocess.run(cli + ["convert", src, "-o", str(tmp_path / "x.onnx"), "--dtype", "bf16",
                                "--fallback-dtype", "bf16"], capture_output=True, text=True)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "--fallback-dtype" in bad.stderr and not (tmp_path / "x.onnx").exists()
    good = subprocess.run(cli + ["convert", src, "-o", str(tmp_path / "y.onnx"), "--fallback-dtype", "bf16",
                                 "--calibration-data", folder], capture_output=True, text=True)
    assert good.returncode == 0, good.stderr
    assert "bf16" in good.stdout + good.stderr
    assert np.isfinite(np.load(pathlib.Path(folder) / "sample_0.npz")["x"]).all()


def test_report_and_page_show_three_classes(tmp_path):
    """The summary line, the op table, the JSON summary and the page count fp16, bf16 and float32 apart."""
    from ampconv.report.html.columns import page_data

    _, _, _, report = _convert(tmp_path, "gemma_rms_norm", fallback_dtype="bf16")
    text = report.summary()
    assert "4 LOW, 7 bf16 (fallback where fp16 overflows), 0 HIGH" in text
    assert "LOW  bf16  HIGH" in text
    data = report.to_dict()
    assert data["summary"]["nodes_fallback"] == 7 and data["fallback_dtype"] == "bf16"
    page = page_data(data)
    assert page["summary"]["counts"]["FALLBACK"] == 7
    assert "7 in bf16" in page["verdict"]["detail"]
    assert {row["op"]: row["FALLBACK"] for row in page["ops"]}["ReduceMean"] == 1
    _, _, _, plain = _convert(tmp_path, "gemma_rms_norm")
    assert "fallback_dtype" not in plain.to_dict() and "nodes_fallback" not in plain.to_dict()["summary"]
    assert "FALLBACK" not in page_data(plain.to_dict())["summary"]["counts"]


def test_repo_audio_frontend_runs_low_with_its_calibration_data(tmp_path):
    """tests/data_models.audio_frontend (fp16 alone: 6 of 15 LOW) runs >= 80% LOW with the fallback and passes."""
    import data_models

    src, calibration = data_models.MODELS["audio_frontend"].save_with_calibration(tmp_path, 8)
    dst = tmp_path / "fb.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(fallback_dtype="bf16", calibration_data=(str(calibration),)))
    floats = _float_nodes(report)
    assert sum(d[0] in ("LOW", FALLBACK) for d in floats) / len(floats) >= 0.8
    assert _passes_emulation(src, dst, str(calibration))


def _loud_conv(tmp_path):
    """A Conv at opset 17 whose outputs (~1e5) overflow fp16, with samples; bf16 Conv needs opset 22."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    weights = [numpy_helper.from_array((rng.standard_normal((8, 1, 3, 3)) * 300).astype(np.float32), "w"),
               numpy_helper.from_array(np.full((1, 8, 1, 1), 1e-5, np.float32), "scale")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Mul", ["r", "scale"], ["y"], name="rescale")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path, data = tmp_path / "conv.onnx", tmp_path / "conv_data"
    onnx.save(model, path)
    data.mkdir()
    for k in range(3):
        np.savez(data / f"s{k}.npz", x=(100 * rng.standard_normal((1, 1, 16, 16))).astype(np.float32))
    return path, data


def test_default_upgrade_reaches_the_opset_a_bf16_heavy_op_needs(tmp_path):
    """The fallback follows the upgrade rule: a Conv that overflows fp16 upgrades 17 -> 22 and runs bf16."""
    path, data = _loud_conv(tmp_path)
    report = ampconv.convert(path, tmp_path / "o.onnx", ampconv.Config(fallback_dtype="bf16",
                                                                       calibration_data=(str(data),)))
    assert _decisions(report)["conv"][0] == FALLBACK
    assert any("upgraded from opset 17 to 22" in n for n in report.note_texts())
    assert onnx.load(tmp_path / "o.onnx").opset_import[0].version == 22
    kept = ampconv.convert(path, tmp_path / "k.onnx", ampconv.Config(fallback_dtype="bf16", keep_opset=True,
                                                                     calibration_data=(str(data),)))
    assert _decisions(kept)["conv"][0] == "HIGH"  # keep_opset: no upgrade, float32, and a warning says why
    assert any("opset=22" in w for w in kept.warning_texts())


def test_localization_of_a_mixed_model_blames_fp16_overflow_not_bf16(tmp_path):
    """Loud inputs the synthetic run never saw overflow the fp16 DFT: localization names the fp16 nodes and
    leaves the bf16 ones (which hold the range) out of its --keep-fp32 fix."""
    src, _ = bf16_models.write("mel_frontend", tmp_path)
    dst = tmp_path / "m.onnx"
    report = ampconv.convert(src, dst, ampconv.Config(fallback_dtype="bf16"))  # synthetic run: quiet inputs
    fallback_nodes = {n for n, d in _decisions(report).items() if d[0] == FALLBACK}
    assert fallback_nodes
    result = validate(src, str(dst), ValidateOptions(backend="emulate", input_ranges={"frames": (-30000, 30000)},
                                                     localize=True))
    assert not result.passed
    cause = result.localization.cause
    assert cause["node"] == "dft_real" and cause["nodes"]
    assert not set(cause["nodes"]) & fallback_nodes


def test_constant_guard_under_the_fallback(tmp_path):
    """A constant beyond fp16 (1e6) or flushed by it (a factor of 1e-10 throughout) runs its consumer bf16; a
    float32-lowest fill that bf16 cannot hold either keeps it float32 (negative). A 1e-10 *added* changes the
    output by less than its own fp16 rounding (plan/effect.py): stored rounded, the Add runs fp16."""
    from onnx import TensorProto, helper, numpy_helper

    def one(value, op="Add", others=(1, 2, 3)):
        nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
                 helper.make_node(op, ["h", "c"], ["y"], name="add")]
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                                  [numpy_helper.from_array(np.eye(4, dtype=np.float32), "w"),
                                   numpy_helper.from_array(np.array([value, *others], np.float32), "c")])
        path = tmp_path / f"c{abs(hash((value, op)))}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
        report = ampconv.convert(path, tmp_path / "o.onnx", ampconv.Config(fallback_dtype="bf16", overwrite=True),
                                 dry_run=True)
        return _decisions(report)["add"]

    big, tiny, lowest = one(1e6), one(1e-10, "Mul", (1e-10,) * 3), one(float(np.finfo(np.float32).min))
    assert big[:2] == (FALLBACK, "hard-constant") and "float16 overflows" in big[2]
    assert tiny[:2] == (FALLBACK, "hard-constant") and "float16 flushes them" in tiny[2]
    assert lowest[:2] == ("HIGH", "hard-constant")
    assert one(1e-10)[0] == "LOW"


def test_missing_cpu_kernel_inside_an_expanded_bf16_function_is_accepted(tmp_path):
    """onnxruntime's CPU provider expands a bf16 Attention and names the missing kernel's node '': that is the
    fallback node's deployment fact (as under dtype bf16), not a reason to fail the conversion."""
    import warnings

    import onnx.backend.test.case.node as node_cases

    name = "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        case = next(c for c in node_cases.collect_testcases() if c.name == name)
    src = tmp_path / "attention.onnx"
    onnx.save(case.model, src)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(fallback_dtype="bf16"))
    assert report.count(FALLBACK) == 1  # the Attention: the synthetic run saw it overflow fp16
    assert any("no bfloat16 kernel" in note for note in report.note_texts())
    assert (tmp_path / "o.onnx").exists()


# ------------------------------------------------------------------ where the output runs as written
class _CudaRuntime(OnnxRuntimeFacts):
    """onnxruntime's facts with a CUDA provider whose registry lacks bf16 Sqrt (a stand-in for onnxruntime-gpu)."""

    name = "onnxruntime (test CUDA registry)"

    def __repr__(self):
        return "cuda-stand-in"  # names the test's output file

    def listed_providers(self):
        return ("CUDAExecutionProvider", *super().listed_providers())

    def kernel_providers(self):
        return super().kernel_providers() | {"CUDAExecutionProvider"}

    def has_kernel(self, provider, domain, op_type, opset, type_string):
        if provider == "CUDAExecutionProvider":
            return op_type != "Sqrt"
        return super().has_kernel(provider, domain, op_type, opset, type_string)


def test_bf16_nodes_without_a_cuda_kernel_are_named(tmp_path):
    """The target runtime's kernel registry says which bf16 nodes the GPU provider cannot run as written."""
    _, _, _, report = _convert(tmp_path, "gemma_rms_norm", dry_run=True, fallback_dtype="bf16")
    unasked = [n for n in report.notes if "could not be asked" in n]
    assert len(unasked) == 1 and "CUDA provider" in unasked[0]  # the CPU wheel has no CUDA registry
    _, _, _, plain = _convert(tmp_path, "gemma_rms_norm", dry_run=True, dtype="bf16")
    assert not any("CUDA provider" in n for n in plain.notes)  # negative: a plain bf16 conversion is not told
    # The stand-in comes through the Config, to this conversion alone (nothing switched process-wide).
    _, _, _, report = _convert(tmp_path, "gemma_rms_norm", dry_run=True, fallback_dtype="bf16",
                               runtime=_CudaRuntime())
    named = [n for n in report.notes if "no bfloat16 kernel" in n]
    assert len(named) == 1 and "(Sqrt)" in named[0] and named[0].startswith("1 of the ")


def test_the_kernel_registry_answers_per_provider_type_and_opset():
    from ampconv.runtime.facts import CPU, CUDA, ONNXRUNTIME

    assert CPU in ONNXRUNTIME.kernel_providers()
    assert ONNXRUNTIME.has_kernel(CPU, "", "Cast", 17, "tensor(bfloat16)") is True
    assert ONNXRUNTIME.has_kernel(CPU, "", "Relu", 17, "tensor(float)") is True
    assert ONNXRUNTIME.has_kernel(CPU, "", "NoSuchOp", 17, "tensor(float)") is False
    if CUDA not in ONNXRUNTIME.kernel_providers():
        assert ONNXRUNTIME.has_kernel(CUDA, "", "Relu", 17, "tensor(bfloat16)") is None  # not asked: not known
