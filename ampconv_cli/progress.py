"""A byte progress bar for long writes, shown only where a person is watching.

``make_progress(quiet)`` yields a ``progress(done, total)`` callback for
``Config.progress``, or None when there is nothing to show: with ``-q``, or when
stderr is not a terminal (pipes, CI logs). The bar appears only once the work
has run for more than ``DELAY_S``: a small model converts in well under a
second, and a bar that flashes on and off is noise. The clock starts when the
block is entered (the conversion starts), not at the first byte: a model that
spent seconds being planned shows its bar as soon as writing begins.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Callable, Iterator, Optional

DELAY_S = 1.0

Callback = Callable[[int, int], None]


@contextlib.contextmanager
def make_progress(quiet: bool, description: str = "writing weights") -> Iterator[Optional[Callback]]:
    """Yield a ``progress(done, total)`` callback drawing a rich bar on stderr, or None.

    The callback may be called from worker threads; calls are serialized. The
    bar is removed when the block exits, whether it succeeded or not.
    """
    if quiet or not _stderr_is_tty():
        yield None
        return
    bar = _DelayedBar(description)
    try:
        yield bar.update
    finally:
        bar.close()


def _stderr_is_tty() -> bool:
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


class _DelayedBar:
    """A rich Progress started lazily, after ``DELAY_S`` of work."""

    def __init__(self, description: str, delay_s: float = DELAY_S) -> None:
        self._description = description
        self._delay_s = delay_s
        self._first = time.monotonic()
        self._progress = None
        self._task = None
        self._lock = threading.Lock()

    def update(self, done: int, total: int) -> None:
        """Record ``done`` of ``total`` bytes; draw once past the delay."""
        with self._lock:
            now = time.monotonic()
            if self._progress is None:
                if now - self._first < self._delay_s or done >= total:
                    return
                self._start(total)
            self._progress.update(self._task, completed=done, total=total)

    def _start(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self._progress.start()
        self._task = self._progress.add_task(self._description, total=total)

    def close(self) -> None:
        """Stop and clear the bar if it was shown."""
        with self._lock:
            if self._progress is not None:
                self._progress.stop()
                self._progress = None
