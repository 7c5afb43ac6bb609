"""When the CLI lets Python's cyclic garbage collector run.

The converter's IR is a web of cycles (nodes, values and graphs point at each
other), so once ``ampconv.convert`` returns, the whole model is cyclic garbage.
The library turns the collector back on when it returns, and its first pass
then scans every object the conversion allocated: about 0.6 s after a
40,000-node graph. A console-script run ends right after the summary, so the
``convert`` command keeps it off until the process ends, unless more work
follows (``--validate``), which turns it back on first. (The interpreter's
exit collects whether the collector is on or not, 0.3 s after that graph:
``ampconv_cli.main`` ends the process before it gets there.)

In-process callers (tests, ``CliRunner``) never call ``mark_process_ends``;
for them the collector is restored as soon as the block ends.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

_process_ends = False
_was_enabled = True


def mark_process_ends() -> None:
    """Say that the process exits when the command returns (the console script does)."""
    global _process_ends
    _process_ends = True


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run the block with the collector off; restore it after, unless the process ends after the command."""
    global _was_enabled
    _was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _was_enabled and not _process_ends:
            gc.enable()


def resume() -> None:
    """Turn the collector back on (if it was on before ``deferred``): more work follows."""
    if _was_enabled:
        gc.enable()


__all__ = ["deferred", "mark_process_ends", "resume"]
