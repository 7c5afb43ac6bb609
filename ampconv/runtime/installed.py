"""The installed onnxruntime: which build it is, which providers load here, its kernels, the newest IR it reads.

Some of these questions can kill the process that asks them. onnxruntime-gpu
on a machine without CUDA's libraries (a CI runner) lists the CUDA provider;
asking for its kernel registry (``get_all_opkernel_def``) then loads the
provider's library, fails, prints two raw error lines and dies of SIGSEGV.
Creating a session with the provider prints the same load errors before
onnxruntime falls back to the CPU. So both questions are asked in a forked
child (``isolated.run_isolated``) whose stderr is captured: a death is an
answer ("the kernel query died of SIGSEGV"), the library the loader could not
find is read from the captured words, and nothing of onnxruntime's reaches
the user's terminal. The newest IR version it reads is asked in this process
(a refused model raises; nothing is printed at the session's fatal-only
severity).

Each answer is kept per installed runtime (``Installed.key``: its version and
location), so a process asks each question once (a child costs a fork and
the query: 0.1-0.6 s for the kernel registry on 2 cores, 0.5 s for a CUDA
provider that cannot load). A provider whose library this process already
mapped (a CUDA session ran here) loads, and is not asked of a child: CUDA
does not work in a child forked after it started.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import tempfile
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, List, Optional, Tuple

from ampconv.core.domains import normalize_domain
from ampconv.runtime.isolated import IsolatedFailure, run_isolated

CPU = "CPUExecutionProvider"
# A child that has not answered in this long is killed: creating a CUDA session on a real GPU takes seconds.
CHILD_TIMEOUT_S = 60.0

# (provider, domain, op) -> [(first opset, last opset, every type its constraints list)]
KernelRegistry = Dict[Tuple[str, str, str], List[Tuple[int, int, FrozenSet[str]]]]


@dataclasses.dataclass(frozen=True)
class Installed:
    """Which onnxruntime is installed: its distribution (``onnxruntime-gpu``), version, folder and listed providers."""

    package: str
    version: str
    location: str
    listed: Tuple[str, ...]  # ``get_available_providers()``: what the build offers, not what loads here

    @property
    def key(self) -> Tuple[str, str]:
        """What the cached answers are kept under: the version and the folder."""
        return self.version, self.location

    @property
    def words(self) -> str:
        """How messages name it: ``onnxruntime-gpu 1.31.1``."""
        return f"{self.package} {self.version}"


@dataclasses.dataclass(frozen=True)
class ProviderState:
    """Whether an execution provider is listed by the installed runtime and loads on this machine, and why not."""

    provider: str
    listed: bool
    loads: bool
    why: str = ""  # when it does not load: "libcublasLt.so.13 missing", "no CUDA device", "not in this build"

    def words(self) -> str:
        """One line for a summary: ``CUDA provider listed but not loadable here: libcublasLt.so.13 missing``."""
        short = self.provider.replace("ExecutionProvider", "")
        if self.loads:
            return f"{short} provider loads here"
        if not self.listed:
            return f"{short} provider not in the installed runtime"
        return f"{short} provider listed but not loadable here" + (f": {self.why}" if self.why else "")


@dataclasses.dataclass(frozen=True)
class KernelAnswer:
    """The kernel registry, or why it could not be read (``failure``; the registry is then empty)."""

    registry: KernelRegistry
    failure: Optional[str] = None


@functools.lru_cache(maxsize=1)
def installed() -> Optional[Installed]:
    """The installed onnxruntime, or None when it cannot be imported."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    location = str(Path(ort.__file__).resolve().parent)
    try:
        listed = tuple(ort.get_available_providers())
    except Exception:  # noqa: BLE001 - a broken build lists nothing
        listed = ()
    return Installed(_distribution(location, ort.__version__), ort.__version__, location, listed)


def _distribution(location: str, version: str) -> str:
    """The distribution that installed the package at ``location``: read from the dist-info folders beside it.

    ``onnxruntime`` and ``onnxruntime-gpu`` install the same package; their
    ``*.dist-info`` folders say which (importlib.metadata would scan every
    installed distribution: 0.3 s).
    """
    names = []
    for info in sorted(Path(location).parent.glob("onnxruntime*.dist-info")):
        name, _, found = info.name[: -len(".dist-info")].rpartition("-")
        if found == version:
            names.append(name.replace("_", "-"))
    return " + ".join(names) if names else "onnxruntime"


def provider_state(provider: str) -> ProviderState:
    """Whether ``provider`` loads here; a provider the runtime lists is tried in a forked child, once per runtime."""
    found = installed()
    if found is None:
        return ProviderState(provider, listed=False, loads=False, why="onnxruntime is not installed")
    if provider not in found.listed:
        return ProviderState(provider, listed=False, loads=False, why=f"not in {found.words}")
    if provider == CPU:
        return ProviderState(provider, listed=True, loads=True)
    return _provider_state(found.key, provider)


@functools.lru_cache(maxsize=None)
def _provider_state(key: Tuple[str, str], provider: str) -> ProviderState:
    """``provider_state`` of a listed provider, asked of the runtime ``key`` names (the installed one)."""
    if _mapped_here(provider):  # a session of this process loaded it: it loads (and CUDA may not survive a fork)
        return ProviderState(provider, listed=True, loads=True)
    loads, failure, words = ask_in_child(_session_places_on, provider, _tiny_model())
    if loads:
        return ProviderState(provider, listed=True, loads=True)
    return ProviderState(provider, listed=True, loads=False, why=load_failure(words) or failure or "")


def _mapped_here(provider: str) -> bool:
    """Whether this process has the provider's library mapped (Linux: ``/proc/self/maps``), so it loaded here.

    A process that already ran a CUDA session must not answer from a forked
    child: CUDA does not work in a child forked after it started.
    """
    library = "libonnxruntime_providers_" + provider.replace("ExecutionProvider", "").lower()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            return any(library in line for line in maps)
    except OSError:
        return False


def _session_places_on(provider: str, model: bytes) -> bool:
    """In the child: whether a session asked for ``provider`` (then the CPU) got it."""
    import onnxruntime as ort

    session = ort.InferenceSession(model, providers=[provider, CPU])
    return provider in session.get_providers()


def _tiny_model(ir_version: int = 7) -> bytes:
    """An Identity model of one float, at ``ir_version`` (every onnxruntime reads IR 7)."""
    from onnx import TensorProto, helper

    value = [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in ("x", "y")]
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", value[:1], value[1:])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = ir_version
    return model.SerializeToString()


def kernel_answer() -> KernelAnswer:
    """Every kernel the installed onnxruntime registers, asked in a forked child once per runtime."""
    found = installed()
    if found is None:
        return KernelAnswer({}, "onnxruntime is not installed")
    return _kernel_answer(found.key)


@functools.lru_cache(maxsize=None)
def _kernel_answer(key: Tuple[str, str]) -> KernelAnswer:
    """``kernel_answer`` of the runtime ``key`` names (the installed one)."""
    registry, failure, words = ask_in_child(_read_kernels)
    if failure is None and registry is not None:
        return KernelAnswer(registry)
    missing = load_failure(words)
    return KernelAnswer({}, f"the kernel query {failure}" + (f" ({missing})" if missing else ""))


def kernel_rows() -> Iterator[Tuple[str, str, str, Tuple[int, int], Dict[str, List[str]]]]:
    """onnxruntime's ``get_all_opkernel_def`` in this process: ``(provider, domain, op, (first, last),
    {variable: types})`` per kernel, the domain normalized (``""`` for ``ai.onnx``).

    Each execution provider the wheel was built with registers its kernels
    here (the CPU wheel: the CPU provider alone; onnxruntime-gpu adds CUDA's,
    and dies of SIGSEGV where a provider's libraries are missing: ask it in a
    child, as ``kernel_answer`` does).
    """
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

    for kernel in ort_state.get_all_opkernel_def():
        yield (kernel.provider, normalize_domain(kernel.domain), kernel.op_name, tuple(kernel.version_range),
               {name: sorted(types) for name, types in kernel.type_constraints.items()})


def _read_kernels() -> KernelRegistry:
    """In the child: ``kernel_rows`` as (provider, domain, op) -> version ranges and the types they take."""
    registry: KernelRegistry = {}
    for provider, domain, op, (first, last), constraints in kernel_rows():
        types = frozenset(t for listed in constraints.values() for t in listed)
        registry.setdefault((provider, domain, op), []).append((first, last, types))
    return registry


def max_ir_version() -> Optional[int]:
    """The newest IR version the installed onnxruntime reads (None: not installed, or it would not say)."""
    found = installed()
    return None if found is None else _max_ir_version(found.key)


@functools.lru_cache(maxsize=None)
def _max_ir_version(key: Tuple[str, str]) -> Optional[int]:
    """Asked in this process: a session of a model at IR 10**6 raises "max supported IR version: N"."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # the refusal is read from the exception, not printed
    try:
        ort.InferenceSession(_tiny_model(10 ** 6), options, providers=[CPU])
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer
        refusal = ir_refusal(str(exc))
        return refusal[1] if refusal is not None else None
    return None


_IR_REFUSAL = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")


def ir_refusal(text: str) -> Optional[Tuple[int, int]]:
    """(the model's IR version, the newest the runtime reads) when ``text`` is onnxruntime's IR refusal."""
    match = _IR_REFUSAL.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def ir_words(model_ir: int, max_ir: int) -> str:
    """One line for a model the installed runtime cannot read: which runtime reads which IR."""
    found = installed()
    runtime = found.words if found is not None else "the installed onnxruntime"
    return f"IR version {model_ir} is newer than {runtime} reads (IR versions up to {max_ir})"


def unreadable_ir(model_ir: Optional[int]) -> Optional[str]:
    """``ir_words`` when the installed onnxruntime cannot read a model at IR ``model_ir``; None when it can."""
    newest = max_ir_version()
    if model_ir is None or newest is None or model_ir <= newest:
        return None
    return ir_words(model_ir, newest)


def runtime_words(text: str) -> str:
    """onnxruntime's refusal ``text`` in ampconv's words where it has some (the IR refusal), else as it is."""
    refusal = ir_refusal(text)
    return ir_words(*refusal) if refusal is not None else text


# dlopen's words for a library it cannot find; onnxruntime quotes them after the provider's own library.
_MISSING_LIBRARY = re.compile(r"([\w.+-]+\.so[\w.]*): cannot open shared object file")
_CUDA_FAILURE = re.compile(r"CUDA failure \d+: ([^;\n\]]+)")


def load_failure(words: str) -> Optional[str]:
    """What onnxruntime's captured stderr says stopped a provider from loading, in a few words (None: nothing)."""
    missing = _MISSING_LIBRARY.search(words)
    if missing:
        return f"{missing.group(1)} missing"
    cuda = _CUDA_FAILURE.search(words)
    return cuda.group(1).strip() if cuda else None


def ask_in_child(question, *args) -> Tuple[object, Optional[str], str]:
    """``question(*args)`` in a forked child with its stdout and stderr captured: (answer, failure, words).

    ``failure`` is None when the child answered; else how it failed ("died of
    SIGSEGV", "raised ...") and ``answer`` is None. ``words`` is what the
    child printed (onnxruntime's own log lines), for the caller to read, never
    to show.
    """
    if not hasattr(os, "fork"):  # no child to ask (Windows): asked here, and its words go where they go
        return question(*args), None, ""
    with tempfile.TemporaryFile() as capture:
        try:
            answer, failure = run_isolated(_captured, capture.fileno(), question, *args, timeout=CHILD_TIMEOUT_S), None
        except IsolatedFailure as exc:
            answer, failure = None, str(exc).replace("the run ", "")
        except Exception as exc:  # noqa: BLE001 - the question's own error is an answer too
            text = str(exc).strip().splitlines()
            answer, failure = None, f"raised {type(exc).__name__}" + (f": {text[0][:200]}" if text else "")
        capture.seek(0)
        words = capture.read().decode("utf-8", errors="replace")
    return answer, failure, words


def _captured(fd: int, question, *args):
    """In the child: ``question(*args)`` with fds 1 and 2 sent to ``fd``."""
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    return question(*args)


__all__ = ["CPU", "Installed", "KernelAnswer", "ProviderState", "ask_in_child", "installed", "ir_refusal",
           "ir_words", "kernel_answer", "load_failure", "max_ir_version", "provider_state", "runtime_words",
           "unreadable_ir"]
