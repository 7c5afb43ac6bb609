"""One table of the load checks (issue 38, part 4): what the checker and the runtimes disagree on.

Every written output (fp16, bf16, fp16 with the bf16 fallback) of every sample model, of the bench
models that build without torch and of the issue's own models goes through every judge a user or
``ampconv validate`` meets: onnx.checker with its full check, onnxruntime's CPU session at each
optimization level (in a forked child: a crash is a verdict), the emulation ``validate`` runs, and the
floor it measures against. A model one judge refuses while another accepts it is a failure of
ampconv's, unless the input model is refused by that judge too. A missing bfloat16 kernel of the CPU
provider is no refusal (the graph resolves; the converter says so in a note): it reads "n/a".

The default suite runs the models that cover the judges' differences (a GRU, control flow, attention,
a decoder with its cache, the bf16 fallback's norms); the rest is ``slow``.
"""

from __future__ import annotations

import functools
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, Optional

import onnx
import pytest

import ampconv
from ampconv.core.lowtypes import low_type
from ampconv.errors import ConversionError
from ampconv.numerics import emulate as emulation
from ampconv.numerics import modelio, runners
from ampconv.reading.load import load_model
from ampconv.runtime.usersession import CRASHED, LOADS, REFUSED, session_verdict
from ampconv.runtime.verdict import ACCEPT, judge
from ampconv.validation import floor

import llm_models
import runtime_models

pytest.importorskip("onnxruntime")

ROOT = Path(__file__).resolve().parents[2]
LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED", "ORT_ENABLE_ALL")
OUTPUTS = {"fp16": dict(dtype="fp16"), "bf16": dict(dtype="bf16"), "fp16+bf16": dict(dtype="fp16", fallback_dtype="bf16")}
NA = "n/a"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------ the models
def _samples(folder: Path) -> Dict[str, Path]:
    """Every model ``make samples`` builds (``build_all`` and the README's examples), not their data folders."""
    build = _module(ROOT / "sample_models" / "build.py", "ampconv_sample_build")
    built = {**build.build_all(folder / "samples"), **build.build_readme_examples(folder / "samples")}
    return {name: path for name, path in built.items() if Path(path).suffix == ".onnx"}


def _bench(folder: Path) -> Dict[str, Path]:
    bf16_models = _module(ROOT / "bench" / "bf16_models.py", "ampconv_bench_bf16_models")
    models = {f"bench_{name}": Path(bf16_models.write(name, folder)[0]) for name in bf16_models.BUILDERS}
    chain = _module(ROOT / "bench" / "models.py", "ampconv_bench_models").build_chain(200)
    onnx.save(chain, str(folder / "chain_200.onnx"))
    models["bench_chain_200"] = folder / "chain_200.onnx"
    gpt = _module(ROOT / "sample_models" / "gpt.py", "ampconv_sample_gpt")
    models["gpt_small"] = gpt.build(folder / "gpt", gpt.GptSpec(layers=2, hidden=64, vocab=256), seed=0)
    return models


def _issue(folder: Path) -> Dict[str, Path]:
    return {"bigru_tagger": runtime_models.bigru_tagger(folder / "bigru.onnx"),
            "t5_decoder_step": llm_models.t5_decoder_step(folder / "t5.onnx", layers=1, score_scale=30000.0,
                                                          embed_scale=0.1)}


DEFAULT = ("mlp", "control_flow", "transformer", "lstm", "decoder", "bigru_tagger", "bench_gemma_rms_norm")
SLOW = ("audio", "cancel", "cnn", "constants", "conv", "external_data", "bench_mel_frontend",
        "bench_square_sum_layer_norm", "bench_chain_200", "gpt_small", "t5_decoder_step")


@functools.lru_cache(maxsize=1)
def _models() -> Dict[str, Path]:
    folder = Path(tempfile.mkdtemp(prefix="ampconv-load-table-"))
    return {**_samples(folder), **_bench(folder), **_issue(folder)}


# ------------------------------------------------------------------------------ the judges
def _checker(path: Path, _source: Path, _dtype: str) -> Optional[str]:
    try:
        onnx.checker.check_model(str(path), full_check=True)
    except Exception as exc:  # noqa: BLE001 - every refusal of the checker is a verdict
        return str(exc).splitlines()[0]
    return None


def _session(level: str) -> Callable[[Path, Path, str], Optional[str]]:
    def run(path: Path, _source: Path, dtype: str) -> Optional[str]:
        verdict = session_verdict(path, level)
        if verdict.kind == LOADS:
            return None
        if verdict.kind == REFUSED and dtype != "fp32":
            read = judge(ConversionError("refused", verdict.words, ConversionError.RUNTIME),
                         load_model(path, infer_types=True), dtype)
            if read.kind == ACCEPT:
                return NA  # the CPU provider has no bfloat16 kernel: the graph resolves
        return verdict.summary() if verdict.kind in (REFUSED, CRASHED) else NA
    return run


def _emulation(path: Path, _source: Path, _dtype: str) -> Optional[str]:
    """The copy ``validate --backend emulate`` runs: built, written and loaded."""
    try:
        model = modelio.load(str(path))
        modelio.ensure_types(model)
        emulation.emulate(model, infer_types=False)
        with tempfile.TemporaryDirectory() as tmp:
            derived = modelio.save_derived(model, tmp, "emulated", modelio.wants_external(model, str(path)))
            runners.make_session(derived, "emulated model", runners.CPU, optimize=False)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def _floor(path: Path, source: Path, dtype: str) -> Optional[str]:
    """The floor ``validate`` measures against: the reference rounded to the output's LOW type, built and run-ready."""
    if dtype == "fp32":
        return NA
    try:
        model = modelio.load(str(source))
        modelio.ensure_types(model)
        floor.floor_model(model, low_type("bf16" if dtype == "bf16" else "fp16"))
        emulation.widen_bfloat16_io(model)
        with tempfile.TemporaryDirectory() as tmp:
            derived = modelio.save_derived(model, tmp, "floor", modelio.wants_external(model, str(source)))
            runners.make_session(derived, "floor model", runners.CPU, optimize=False)
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


JUDGES: Dict[str, Callable[[Path, Path, str], Optional[str]]] = {
    "onnx.checker (full)": _checker,
    **{f"onnxruntime {level}": _session(level) for level in LEVELS},
    "emulation": _emulation,
    "floor": _floor,
}


def table_row(path: Path, source: Path, dtype: str) -> Dict[str, Optional[str]]:
    """Each judge's word on the model file ``path`` (converted from ``source`` to ``dtype``): None accepts."""
    return {name: check(path, source, dtype) for name, check in JUDGES.items()}


@functools.lru_cache(maxsize=None)
def _input_row(name: str) -> Dict[str, Optional[str]]:
    source = _models()[name]
    return table_row(source, source, "fp32")


def disagreements(row: Dict[str, Optional[str]], input_row: Dict[str, Optional[str]]) -> Dict[str, str]:
    """The refusals of ``row`` that another judge contradicts and the input model does not share."""
    refused = {k: v for k, v in row.items() if v not in (None, NA)}
    accepted = [k for k, v in row.items() if v is None]
    if not refused or not accepted:
        return {}
    return {k: v for k, v in refused.items() if input_row.get(k) in (None, NA)}


def _check(name: str, output: str, tmp_path: Path) -> None:
    source = _models()[name]
    written = tmp_path / f"{name}.{output}.onnx"
    config = OUTPUTS[output]
    ampconv.convert(source, written, ampconv.Config(**config))
    row = table_row(written, source, config["dtype"] if output != "fp16+bf16" else "fp16")
    wrong = disagreements(row, _input_row(name))
    assert not wrong, f"{name} {output}: {wrong} while {[k for k, v in row.items() if v is None]} accept it"
    assert row["onnx.checker (full)"] is None or _input_row(name)["onnx.checker (full)"] is not None


@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("name", DEFAULT)
def test_every_judge_agrees_on_the_written_model(name, output, tmp_path):
    _check(name, output, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("output", sorted(OUTPUTS))
@pytest.mark.parametrize("name", SLOW)
def test_every_judge_agrees_on_the_written_model_slow(name, output, tmp_path):
    _check(name, output, tmp_path)


def test_the_table_covers_every_sample_and_torch_free_bench_model():
    assert set(DEFAULT) | set(SLOW) == set(_models())


def test_a_disagreement_is_told_from_a_refusal_the_input_shares():
    """The rule itself: a lone refusal is ampconv's; one the input shares, or a missing bf16 kernel, is not."""
    row = {"onnx.checker (full)": None, "onnxruntime ORT_ENABLE_ALL": "onnxruntime died of SIGSEGV", "floor": None}
    assert disagreements(row, {"onnxruntime ORT_ENABLE_ALL": None}) == {"onnxruntime ORT_ENABLE_ALL": row[
        "onnxruntime ORT_ENABLE_ALL"]}
    assert disagreements(row, {"onnxruntime ORT_ENABLE_ALL": "refused too"}) == {}
    assert disagreements({**row, "onnxruntime ORT_ENABLE_ALL": NA}, {}) == {}


def test_the_judges_catch_the_reported_crash(tmp_path):
    """Negative case: the BiGRU tagger written all float16 (as a converter without the users' check did)."""
    source = _models()["bigru_tagger"]
    written = runtime_models.bigru_tagger(tmp_path / "bigru16.onnx", dtype="fp16")
    row = table_row(written, source, "fp16")
    if row["onnxruntime ORT_ENABLE_ALL"] is None:
        pytest.skip("this onnxruntime does not crash on a float16 Transpose feeding a MatMul")
    assert "SIGSEGV" in row["onnxruntime ORT_ENABLE_ALL"]
    assert disagreements(row, _input_row("bigru_tagger")) == {"onnxruntime ORT_ENABLE_ALL": row[
        "onnxruntime ORT_ENABLE_ALL"]}
