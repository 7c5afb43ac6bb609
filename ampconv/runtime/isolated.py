"""Run a step that executes the user's model in a forked child, so a crash of the runtime is an answer, not an end.

onnxruntime's kernels are native code: on inputs a model was never meant
for (the default synthetic run's random data, symbolic axes at 1) one can
divide an integer by zero and raise SIGFPE, which no ``try`` catches: the
whole conversion would die with "Floating point exception" and write
nothing, the user none the wiser. ``run_isolated`` forks, runs the step in the
child, and reads its pickled result back; a child killed by a signal, or
silent past the timeout, raises ``IsolatedFailure`` with the words a note can
quote, and the caller carries on without that step's evidence.

A fork copies the parent's memory lazily, so a child costs a few
milliseconds, not the half second a new interpreter takes. Where ``os.fork``
is missing (Windows) the step runs in this process, as before.
"""

from __future__ import annotations

import faulthandler
import gc
import os
import pickle
import select
import signal
import time
from typing import Any, Callable, Optional

# A step that does not answer in this long is killed (the synthetic run is made for models that run in seconds).
DEFAULT_TIMEOUT_S = 120.0


class IsolatedFailure(RuntimeError):
    """The isolated step's child died (a signal), hung past its timeout, or sent back nothing readable.

    ``signal_number`` is the signal that killed the child (None otherwise);
    ``timed_out`` says it was killed here for its timeout.
    """

    def __init__(self, message: str, signal_number: Optional[int] = None, timed_out: bool = False) -> None:
        super().__init__(message)
        self.signal_number = signal_number
        self.timed_out = timed_out

    def __reduce__(self):
        return (IsolatedFailure, (str(self), self.signal_number, self.timed_out))

    @property
    def crashed(self) -> bool:
        """Whether the child died of its own fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT), not killed from outside."""
        return self.signal_number in CRASH_SIGNALS


# Signals a process raises on itself when its native code fails. SIGKILL is not
# one: the kernel's out-of-memory killer and this module's timeout send it.
CRASH_SIGNALS = frozenset(
    getattr(signal, name) for name in ("SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT") if hasattr(signal, name)
)


def run_isolated(step: Callable[..., Any], *args: Any, timeout: Optional[float] = DEFAULT_TIMEOUT_S) -> Any:
    """``step(*args)`` computed in a forked child; its exception is raised here as it was raised there.

    ``step``'s result and exceptions must pickle (``step`` itself need not: the
    child is a fork). A child killed by a signal, or past ``timeout`` seconds
    (None: no limit), raises ``IsolatedFailure`` naming it.
    """
    if not hasattr(os, "fork"):
        return step(*args)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, send, leave without running the parent's cleanup
        os.close(read_end)
        faulthandler.disable()  # a crash is the parent's to report, in a note: no traceback dump on stderr
        # What the parent left as cyclic garbage is the parent's to collect: an onnxruntime session in it,
        # finalized here, joins thread pools the fork did not copy and dies of SIGSEGV mid-step (seen
        # after a failed validation in the same process). The child never collects what it inherited.
        gc.freeze()
        try:
            try:
                payload = pickle.dumps((True, step(*args)))
            except BaseException as exc:  # noqa: BLE001 - every outcome is sent back to the parent
                payload = pickle.dumps((False, _picklable(exc)))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        finally:
            os._exit(0)
    os.close(write_end)
    data, timed_out = _read_all(read_end, timeout)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _pid, status = os.waitpid(pid, 0)
    if timed_out:
        raise IsolatedFailure(f"did not finish in {timeout:g} s", timed_out=True)
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        raise IsolatedFailure(f"the run died of {signal_name(number)}", signal_number=number)
    try:
        ok, value = pickle.loads(data)
    except Exception as exc:  # noqa: BLE001 - an unreadable answer is a failure of the step, said as such
        raise IsolatedFailure(f"sent back no readable result ({type(exc).__name__})") from None
    if ok:
        return value
    raise value


def _read_all(fd: int, timeout: Optional[float]):
    """Everything the child writes to ``fd`` until it closes it, or (what came, True) once ``timeout`` passes."""
    chunks = []
    deadline = None if timeout is None else time.monotonic() + timeout
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return b"".join(chunks), True
            ready, _, _ = select.select([pipe], [], [], left)
            if not ready:
                continue
            chunk = pipe.read(1 << 20)
            if not chunk:
                return b"".join(chunks), False
            chunks.append(chunk)


def signal_name(number: int) -> str:
    """The name of signal ``number`` (SIGSEGV), or ``signal N`` for one Python does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` if it pickles, else a RuntimeError with its words."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")


__all__ = ["CRASH_SIGNALS", "DEFAULT_TIMEOUT_S", "IsolatedFailure", "run_isolated", "signal_name"]
