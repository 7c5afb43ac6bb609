"""The session users build: onnxruntime at its default optimization level, built in a forked child.

``onnxruntime.InferenceSession(path)`` with default options optimizes the
graph at ORT_ENABLE_ALL before it runs. Its optimizers are native code, and
some die on graphs they were not written for: onnxruntime 1.32's NCHWc
transformer kills the process with SIGSEGV on a float16 Transpose feeding a
float16 MatMul, a model that loads at ORT_ENABLE_EXTENDED and below. No
``try`` catches that, so each such session is built in a forked child
(``isolated.run_isolated``): a crash there is a verdict on the model, not the
end of the conversion.

Which levels: ORT_ENABLE_ALL always (every user of the CPU provider gets it
by default); with ``--target cuda`` also ORT_ENABLE_EXTENDED, the highest
level whose optimizers also run for the CUDA provider (the level-3 layout
transformers are the CPU provider's), which this CPU-only check can build.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Optional, Tuple

from ampconv.runtime.isolated import IsolatedFailure, run_isolated
from ampconv.runtime.loadcheck import runtime_refusal

DEFAULT_LEVEL = "ORT_ENABLE_ALL"
CUDA_LEVEL = "ORT_ENABLE_EXTENDED"
# A session that is not built in this long is not a verdict: the check says it could not tell.
SESSION_TIMEOUT_S = 300.0

LOADS, REFUSED, CRASHED, UNCHECKED = "loads", "refused", "crashed", "unchecked"


def users_levels(target: Optional[str]) -> Tuple[str, ...]:
    """The optimization levels users of ``target`` (cpu, cuda; None: cpu) build sessions at, as checkable here."""
    return (DEFAULT_LEVEL, CUDA_LEVEL) if target == "cuda" else (DEFAULT_LEVEL,)


@dataclasses.dataclass(frozen=True)
class SessionVerdict:
    """What building a session of a file at ``level`` gave: ``kind`` loads, refused, crashed or unchecked.

    ``words``: onnxruntime's message (refused), how the child died (crashed),
    or why there is no verdict (unchecked: killed from outside, say by the
    out-of-memory killer, or past the timeout).
    """

    level: str
    kind: str
    words: str = ""

    @property
    def failed(self) -> bool:
        """Whether the session could not be built (a refusal or a crash)."""
        return self.kind in (REFUSED, CRASHED)

    def summary(self) -> str:
        """One line: what onnxruntime did at this level."""
        if self.kind == CRASHED:
            return f"onnxruntime {self.words} building its session at {self.level}"
        if self.kind == REFUSED:
            first = self.words.strip().splitlines()[0] if self.words.strip() else "refused"
            return f"onnxruntime refuses the model at {self.level}: {first[:300]}"
        if self.kind == UNCHECKED:
            return f"onnxruntime's session at {self.level} gave no verdict ({self.words})"
        return f"onnxruntime loads the model at {self.level}"


def session_verdict(path: Path, level: str, timeout: Optional[float] = SESSION_TIMEOUT_S) -> SessionVerdict:
    """Build an onnxruntime CPU session of ``path`` at ``level`` in a forked child, and say how it went."""
    try:
        refusal = run_isolated(runtime_refusal, Path(path), level, timeout=timeout)
    except IsolatedFailure as failure:
        if failure.crashed:
            return SessionVerdict(level, CRASHED, str(failure).replace("the run ", ""))
        return SessionVerdict(level, UNCHECKED, str(failure))
    return SessionVerdict(level, LOADS) if refusal is None else SessionVerdict(level, REFUSED, refusal)


__all__ = [
    "CRASHED", "CUDA_LEVEL", "DEFAULT_LEVEL", "LOADS", "REFUSED", "SESSION_TIMEOUT_S", "SessionVerdict",
    "UNCHECKED", "session_verdict", "users_levels",
]
