"""onnxruntime-gpu on a machine without CUDA (issue 41), played in the CPU environment.

onnxruntime-gpu lists the CUDA provider there, but the provider cannot load:
asking for the kernel registry kills the process (SIGSEGV) and a CUDA session
prints raw load errors. These tests stand in for that runtime (a question
that crashes its child, a provider that fails to load, a runtime at an older
IR) and check that each is a fact said once in ampconv's words, never a death
and never onnxruntime's own lines. ``tests/gpu_wheel/`` runs the same
commands against the real wheel (``make test-gpu-wheel``).
"""

from __future__ import annotations

import os
import signal

import onnx
import pytest

import ampconv
from ampconv.errors import ModelLoadError, UnsupportedModelError
from ampconv.numerics import runners
from ampconv.runtime import installed
from ampconv.runtime.facts import CPU, CUDA, RuntimeFacts
from ampconv.runtime.installed import Installed, ProviderState
from ampconv.runtime.target import choose_target
from ampconv.validation import ValidateOptions, validate
from conftest import tiny_mlp

# What onnxruntime-gpu 1.31.1 prints when libonnxruntime_providers_cuda.so cannot find its CUDA libraries.
LOAD_ERROR = (
    "\x1b[1;31m2026-11-28 07:41:42.4 [E:onnxruntime:Default, provider_bridge_ort.cc:2202 operator()] "
    "Failed to load library /site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so with error: "
    "libcublasLt.so.13: cannot open shared object file: No such file or directory\x1b[m\n"
)
RAW = ("[E:onnxruntime", "[W:onnxruntime", "provider_bridge_ort", "Failed to load library", "ONNXRuntimeError")
MISSING = "libcublasLt.so.13 missing"


def _prints_the_load_error_and_dies():
    os.write(2, LOAD_ERROR.encode())
    os.kill(os.getpid(), signal.SIGSEGV)


def _prints_the_load_error_and_falls_back(provider, model):
    os.write(2, LOAD_ERROR.encode())
    return False


def _no_raw_line(capfd) -> str:
    out, err = capfd.readouterr()
    assert not any(word in out + err for word in RAW), err
    return err


def test_a_child_that_dies_is_an_answer_and_its_words_are_read_not_shown(capfd):
    answer, failure, words = installed.ask_in_child(_prints_the_load_error_and_dies)
    assert answer is None and failure == "died of SIGSEGV"
    assert installed.load_failure(words) == MISSING
    _no_raw_line(capfd)
    answer, failure, _ = installed.ask_in_child(sum, (1, 2))  # negative: a child that answers
    assert (answer, failure) == (3, None)


def test_load_failure_names_the_library_the_provider_needs_not_its_own():
    assert installed.load_failure(LOAD_ERROR) == MISSING
    cuda = "CUDA failure 100: no CUDA-capable device is detected ; GPU=0"
    assert installed.load_failure(cuda) == "no CUDA-capable device is detected"
    assert installed.load_failure("nothing of the kind") is None


def test_a_kernel_query_that_crashes_is_a_fact(monkeypatch):
    monkeypatch.setattr(installed, "_read_kernels", _prints_the_load_error_and_dies)
    answer = installed._kernel_answer(("0.0-crash", "/nowhere"))  # a runtime of its own: a fresh answer
    assert answer.registry == {} and answer.failure == f"the kernel query died of SIGSEGV ({MISSING})"


def test_the_installed_kernel_registry_is_asked_in_a_child_and_kept():
    answer = installed.kernel_answer()
    assert answer.failure is None and any(provider == CPU for provider, _, _ in answer.registry)
    assert installed.kernel_answer() is answer  # asked once per installed runtime


def test_a_provider_that_cannot_load_is_said_with_the_missing_library(monkeypatch, capfd):
    monkeypatch.setattr(installed, "_session_places_on", _prints_the_load_error_and_falls_back)
    state = installed._provider_state(("0.0-noload", "/nowhere"), CUDA)
    assert state == ProviderState(CUDA, listed=True, loads=False, why=MISSING)
    assert state.words() == f"CUDA provider listed but not loadable here: {MISSING}"
    _no_raw_line(capfd)
    monkeypatch.setattr(installed, "_session_places_on", lambda provider, model: True)
    assert installed._provider_state(("0.0-loads", "/nowhere"), CUDA).loads  # negative: it loads


@pytest.fixture()
def gpu_wheel_without_cuda(monkeypatch):
    """The installed runtime reads as onnxruntime-gpu on a machine without CUDA's libraries."""
    fake = Installed("onnxruntime-gpu", "0.0-test", "/fake/onnxruntime", ("TensorrtExecutionProvider", CUDA, CPU))
    monkeypatch.setattr(installed, "installed", lambda: fake)
    monkeypatch.setattr(installed, "_read_kernels", _prints_the_load_error_and_dies)
    monkeypatch.setattr(installed, "_session_places_on", _prints_the_load_error_and_falls_back)
    return fake


def _mlp(tmp_path, ir_version=8):
    model = tiny_mlp()
    model.ir_version = ir_version
    path = tmp_path / f"mlp_ir{ir_version}.onnx"
    onnx.save(model, path)
    return path


def _cuda_notes(report):
    return [note for note in report.notes if "CUDA provider" in note]


def test_bf16_on_the_gpu_wheel_without_cuda_says_once_what_could_not_be_asked(tmp_path, gpu_wheel_without_cuda,
                                                                                capfd):
    report = ampconv.convert(_mlp(tmp_path), tmp_path / "out.onnx", ampconv.Config(dtype="bf16"))
    (note,) = _cuda_notes(report)
    assert note.startswith(f"CUDA provider listed but not loadable here: {MISSING}; whether its bfloat16 kernels")
    _no_raw_line(capfd)
    fp16 = ampconv.convert(_mlp(tmp_path), tmp_path / "out16.onnx", ampconv.Config())
    assert _cuda_notes(fp16) == []  # negative: nothing was asked of CUDA, nothing is said


def test_level_auto_says_why_its_target(tmp_path, gpu_wheel_without_cuda):
    report = ampconv.convert(_mlp(tmp_path), tmp_path / "out.onnx", ampconv.Config(level="auto"), dry_run=True)
    assert (f"level auto: target cuda (onnxruntime-gpu 0.0-test installed; the CUDA provider cannot load here: "
            f"{MISSING}) -> O2") in report.notes
    given = ampconv.convert(_mlp(tmp_path), tmp_path / "o.onnx", ampconv.Config(level="auto", target="cpu"),
                            dry_run=True)
    assert any(note.startswith("level auto: target cpu -> O0") for note in given.notes)  # named: no reason


def test_the_cli_on_the_gpu_wheel_without_cuda_prints_no_onnxruntime_line(tmp_path, gpu_wheel_without_cuda,
                                                                          cli_runner, capfd):
    from ampconv_cli.main import cli

    result = cli_runner.invoke(cli, ["convert", str(_mlp(tmp_path)), "--dtype", "bf16", "--level", "auto",
                                     "-o", str(tmp_path / "out.onnx")])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("cannot load here") == 1  # the level's reason, once
    assert result.stderr.count("not loadable here") == 1  # the kernel notes that could not be checked, once
    _no_raw_line(capfd)


def test_validation_runs_on_the_cpu_when_cuda_is_listed_but_cannot_load(tmp_path, monkeypatch):
    converted = tmp_path / "out.onnx"
    ampconv.convert(_mlp(tmp_path), converted, ampconv.Config())
    monkeypatch.setattr(runners, "provider_state", lambda provider: ProviderState(provider, True, False, MISSING))
    result = validate(str(_mlp(tmp_path)), str(converted), ValidateOptions(samples=1))
    assert result.backend == "emulate" and result.provider == CPU
    assert (f"CUDA provider listed but not loadable here: {MISSING}; the converted model ran on the CPU "
            "(backend emulate)") in result.notes
    monkeypatch.undo()
    plain = validate(str(_mlp(tmp_path)), str(converted), ValidateOptions(samples=1))
    assert not any("not loadable" in note for note in plain.notes)  # negative: the CPU wheel lists no CUDA


def test_a_model_at_an_ir_the_runtime_cannot_read_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(installed, "max_ir_version", lambda: 9)  # a runtime that reads IR 9 at most
    with pytest.raises(UnsupportedModelError) as caught:
        ampconv.convert(_mlp(tmp_path, ir_version=10), tmp_path / "out.onnx", ampconv.Config())
    words = f"IR version 10 is newer than {installed.installed().words} reads (IR versions up to 9)"
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "out.onnx").exists()
    ampconv.convert(_mlp(tmp_path, ir_version=9), tmp_path / "ok.onnx", ampconv.Config())  # negative: IR 9 reads
    assert (tmp_path / "ok.onnx").exists()
    with pytest.raises(ModelLoadError, match="IR version 10 is newer than"):
        validate(str(_mlp(tmp_path, ir_version=10)), str(tmp_path / "ok.onnx"))


def test_onnxruntime_s_ir_refusal_reads_in_ampconv_s_words():
    raw = ("[ONNXRuntimeError] : 1 : FAIL : /onnxruntime_src/onnxruntime/core/graph/model.cc:256 onnxruntime::Model::"
           "Model(...) Unsupported model IR version: 14, max supported IR version: 13")
    assert installed.runtime_words(raw) == (f"IR version 14 is newer than {installed.installed().words} reads "
                                            "(IR versions up to 13)")
    assert installed.runtime_words("some other refusal") == "some other refusal"
    assert installed.max_ir_version() >= 8  # the installed runtime says, asked in this process


class _ListsCudaThatCannotLoad(RuntimeFacts):
    """A stand-in runtime given through the Config: it lists CUDA, which does not load here."""

    name = "stand-in"

    def listed_providers(self):
        return (CUDA, CPU)

    def provider_state(self, provider):
        if provider == CUDA:
            return ProviderState(CUDA, listed=True, loads=False, why="libcudnn.so.9 missing")
        return ProviderState(provider, listed=True, loads=True)


def test_a_stand_in_runtime_through_the_config_is_asked_not_the_installed_one(tmp_path):
    standin = _ListsCudaThatCannotLoad()
    assert choose_target(None, standin).name == "cuda"
    report = ampconv.convert(_mlp(tmp_path), tmp_path / "out.onnx",
                             ampconv.Config(dtype="bf16", runtime=standin, level="auto"), dry_run=True)
    assert "level auto: target cuda (stand-in installed; the CUDA provider cannot load here: libcudnn.so.9 " \
           "missing) -> O2" in report.notes
    (note,) = [n for n in report.notes if "whether its bfloat16 kernels" in n]
    assert note.startswith("CUDA provider listed but not loadable here: libcudnn.so.9 missing")


def test_a_provider_this_process_already_loaded_is_not_asked_of_a_child(monkeypatch):
    """A process that ran a CUDA session has the provider's library mapped: it loads, and a forked child
    (where CUDA does not work after a fork) is not asked."""
    mapped_here = installed._mapped_here
    assert not mapped_here("NoSuchExecutionProvider")  # negative: no such library is mapped in this process
    monkeypatch.setattr(installed, "_mapped_here", lambda provider: provider == CUDA)
    monkeypatch.setattr(installed, "ask_in_child", lambda *args: pytest.fail("a child was asked"))
    assert installed._provider_state(("0.0-mapped", "/nowhere"), CUDA).loads
