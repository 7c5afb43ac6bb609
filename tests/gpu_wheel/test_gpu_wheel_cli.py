"""The CLI smoke test of the GPU wheel (issue 41): what a CI runner with onnxruntime-gpu and no GPU runs.

``make test-gpu-wheel`` builds a second, pinned environment that holds
onnxruntime-gpu and not the CPU wheel, and runs this file in it (with
``AMPCONV_GPU_WHEEL=1``, which makes the first test insist on that wheel).
Each command runs as a user runs it, in a process of its own: it must exit 0
and print no line of onnxruntime's own on stderr (provider-load errors,
their colour codes, the SIGSEGV of the kernel query). On a machine where the
CUDA provider cannot load, the summary must say so, once, in ampconv's words;
where it loads (a GPU lent), the same commands run and say nothing of it.

Bounded: six commands on two small models, each under ``COMMAND_TIMEOUT_S``
(about 10 s in all on 2 cores). ``make test`` runs it too, in the CPU
environment, where the same commands must pass and print nothing raw.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from bench import bf16_models
from sample_models.build import BUILDERS

COMMAND_TIMEOUT_S = 120
# Words only onnxruntime's own log lines carry: its logger's tags, its source files, its colour codes.
RAW = ("[E:onnxruntime", "[W:onnxruntime", "[I:onnxruntime", "provider_bridge_ort", "onnxruntime_pybind_state",
       "Failed to load library", "[ONNXRuntimeError]", "\x1b[1;31m", "\x1b[0;93m", "Segmentation fault")


def _cuda_state():
    from ampconv.runtime.installed import provider_state

    return provider_state("CUDAExecutionProvider")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The sample transformer and a model whose values overflow float16 (a Gemma-style RMSNorm), with its data."""
    folder = tmp_path_factory.mktemp("gpu_wheel")
    transformer = folder / "transformer.onnx"
    onnx.save(BUILDERS["transformer"](np.random.default_rng(0)), transformer)
    gemma, data = bf16_models.write("gemma_rms_norm", folder)
    return {"folder": folder, "transformer": transformer, "gemma": Path(gemma), "gemma_data": data}


def _ampconv(*args) -> str:
    """``ampconv ARGS`` in a process of its own: exit 0 and no raw onnxruntime line on stderr; returns stderr."""
    done = subprocess.run([sys.executable, "-m", "ampconv", *map(str, args)], capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    raw = [line for line in (done.stderr + done.stdout).splitlines() if any(word in line for word in RAW)]
    assert not raw, raw
    return done.stderr


def test_the_environment_holds_the_gpu_wheel_alone():
    from ampconv.runtime.installed import installed

    found = installed()
    assert found is not None
    if os.environ.get("AMPCONV_GPU_WHEEL") == "1":  # set by make test-gpu-wheel: the wheel it claims to test
        assert found.package == "onnxruntime-gpu", found
        assert "CUDAExecutionProvider" in found.listed


def test_convert_fp16(models):
    _ampconv("convert", models["transformer"], "-o", models["folder"] / "t.fp16.onnx", "--overwrite",
             "--report", models["folder"] / "t.fp16.json")


def test_convert_bf16_says_once_what_it_could_not_ask(models):
    stderr = _ampconv("convert", models["transformer"], "--dtype", "bf16", "-o", models["folder"] / "t.bf16.onnx",
                      "--overwrite")
    state = _cuda_state()
    if state.listed and not state.loads:
        assert stderr.count(f"{state.words()}; whether its bfloat16 kernels cover") == 1, stderr
    elif state.loads:  # a GPU lent: the registry answered, or the summary says once why it could not
        # onnxruntime-gpu's kernel query dies of SIGSEGV where TensorRT's libraries are missing, CUDA or not
        # (seen on an H200 with onnxruntime-gpu 1.31.1: "libnvinfer.so.10: cannot open shared object file").
        answered = "bfloat16 kernel in" in stderr
        told = stderr.count("whether its bfloat16 kernels cover") == 1 and "kernel registry could not be read" in stderr
        assert answered != told and "not loadable" not in stderr, stderr


def test_convert_fallback_bf16_on_a_model_that_overflows_fp16(models):
    out = models["folder"] / "g.fallback.onnx"
    stderr = _ampconv("convert", models["gemma"], "--fallback-dtype", "bf16", "--calibration-data",
                      models["gemma_data"], "-o", out, "--overwrite", "--report", models["folder"] / "g.json")
    report = json.loads((models["folder"] / "g.json").read_text())
    assert any(node["precision"] == "FALLBACK" for node in report["nodes"])  # nodes were written in bf16
    if _cuda_state().listed and not _cuda_state().loads:
        assert stderr.count("not loadable here") == 1, stderr


def test_validate(models):
    out = models["folder"] / "t.fp16.onnx"
    if not out.exists():
        _ampconv("convert", models["transformer"], "-o", out, "--overwrite")
    _ampconv("validate", models["transformer"], out)


def test_report_page(models):
    report = models["folder"] / "t.fp16.json"
    if not report.exists():
        _ampconv("convert", models["transformer"], "-o", models["folder"] / "t.fp16.onnx", "--overwrite",
                 "--report", report)
    _ampconv("report", report, "-o", models["folder"] / "t.fp16.html", "--overwrite")
    assert (models["folder"] / "t.fp16.html").stat().st_size > 0


def test_convert_level_auto_says_why_its_target(models):
    stderr = _ampconv("convert", models["transformer"], "--level", "auto", "-o", models["folder"] / "t.auto.onnx",
                      "--overwrite")
    state = _cuda_state()
    if state.listed:
        assert "level auto: target cuda (" in stderr and "-> O2" in stderr, stderr
        assert ("cannot load here" in stderr) == (not state.loads)
    else:
        assert "level auto: target cpu (" in stderr, stderr
