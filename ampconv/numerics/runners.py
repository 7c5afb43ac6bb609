"""onnxruntime sessions for validation (onnxruntime is imported lazily).

The reference always runs on the CPU provider in float32 with graph
optimizations off, so its numbers are as close to the float32 spec as the
runtime allows. The converted model runs natively (CUDA when available) with
the runtime's default optimizations, as it would be deployed, or emulated on
the CPU provider with optimizations off (see emulate.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence

import numpy as np

from ampconv.errors import AmpconvError, RuntimeMissingError
from ampconv.runtime.installed import ProviderState, provider_state, runtime_words

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"

_NUMPY_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int16)": np.int16,
    "tensor(int8)": np.int8,
    "tensor(uint64)": np.uint64,
    "tensor(uint32)": np.uint32,
    "tensor(uint16)": np.uint16,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


def import_runtime():
    """Import onnxruntime or raise RuntimeMissingError with the install hint."""
    try:
        import onnxruntime
    except ImportError:
        raise RuntimeMissingError("validation") from None
    return onnxruntime


def cuda_available() -> bool:
    """Whether the installed onnxruntime offers the CUDA execution provider and it loads on this machine.

    onnxruntime-gpu lists CUDA on a machine without CUDA's libraries too; a
    session asked for it there prints the load errors and falls back to the
    CPU. Whether it loads is asked once, in a forked child whose words are
    captured (``ampconv.runtime.installed.provider_state``).
    """
    import_runtime()
    return cuda_state().loads


def cuda_state() -> ProviderState:
    """The CUDA provider's state: listed by the installed onnxruntime, loadable here, and why not."""
    return provider_state(CUDA)


@dataclasses.dataclass
class Runner:
    """One onnxruntime session plus the casts its declared input types need.

    ``aliases`` maps an output name of the model as written to the name the
    session's (derived) model gives that output, where they differ: a derived
    copy cannot name an output after a graph input it rounds or casts.
    ``source`` is the user's file a derived copy was made from; messages name
    it rather than the temporary copy.
    """

    path: str
    label: str
    provider: str
    session: object
    seconds: float = 0.0
    aliases: Mapping[str, str] = dataclasses.field(default_factory=dict)
    source: str | None = None

    def run(self, sample: Mapping[str, np.ndarray], names: Sequence[str] | None = None) -> dict:
        """Run one sample; returns ``{output name: numpy array}`` for ``names`` (all by default)."""
        feeds = {}
        for arg in self.session.get_inputs():
            if arg.name not in sample:
                raise AmpconvError(f"{self.source or self.path}: input {arg.name!r} was not provided")
            feeds[arg.name] = _as_declared(sample[arg.name], arg.type, self.source or self.path, arg.name)
        wanted = list(names) if names is not None else self.output_names()
        start = time.perf_counter()
        try:
            arrays = self.session.run([self.aliases.get(n, n) for n in wanted], feeds)
        except Exception as exc:  # noqa: BLE001 -- onnxruntime raises its own untyped errors
            raise AmpconvError(
                f"{self.source or self.path}: onnxruntime failed to run the {self.label}: {_one_line(exc)}"
            ) from None
        self.seconds += time.perf_counter() - start
        return dict(zip(wanted, arrays))

    def output_names(self) -> list[str]:
        """Declared output names of the model as written, in order."""
        back = {session_name: name for name, session_name in self.aliases.items()}
        return [back.get(o.name, o.name) for o in self.session.get_outputs()]


def _as_declared(array: np.ndarray, onnx_type: str, path: str, name: str) -> np.ndarray:
    # Cast numpy inputs to what this session declares (float32 data fed to an
    # fp16 input is rounded here, exactly as a caller of the model would).
    dtype = _NUMPY_TYPES.get(onnx_type)
    if dtype is None:
        raise AmpconvError(f"{path}: input {name!r} has type {onnx_type}, which validation cannot feed")
    return np.ascontiguousarray(np.asarray(array).astype(dtype, copy=False))


def _one_line(exc: BaseException) -> str:
    """The first line of onnxruntime's error, in ampconv's words where it has some (an IR it cannot read)."""
    lines = [line for line in runtime_words(str(exc)).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def make_session(
    path: str,
    label: str,
    provider: str,
    optimize: bool,
    aliases: Mapping[str, str] | None = None,
    source: str | None = None,
) -> Runner:
    """Build a session from a model path (never from bytes: models may exceed 2 GB).

    ``aliases`` and ``source``: see ``Runner``.
    """
    ort = import_runtime()
    options = ort.SessionOptions()
    # Fatal only: onnxruntime's error lines would repeat, on stderr, the
    # failure that ampconv reports as one line.
    options.log_severity_level = 4
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimize else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    providers = [provider] if provider == CPU else [provider, CPU]
    try:
        session = ort.InferenceSession(path, sess_options=options, providers=providers)
    except Exception as exc:  # noqa: BLE001 -- onnxruntime raises its own untyped errors
        raise AmpconvError(f"{source or path}: onnxruntime cannot load the {label}: {_one_line(exc)}") from None
    return Runner(
        path=path, label=label, provider=session.get_providers()[0], session=session,
        aliases=dict(aliases or {}), source=source,
    )
