"""The one place where library errors become messages and exit codes.

0 ok, 1 error, 2 usage/policy error, 3 validation over tolerance, 130 interrupted.

A run that fails or is interrupted after it published a file (the converted
model before ``--validate``, the report) says which: ``ampconv.writing.outputs``
records every file as it is published, and ``handle_errors`` reads that record.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import click

from ampconv.writing import outputs
from ampconv.errors import AmpconvError, Parameter


# Flags whose name is not the parameter's with dashes ("keep_io_types" is --keep-io-types).
FLAG_NAMES = {"shapes": "--shape", "input_ranges": "--input-range", "mixlists": "--mixlist", "block_ops": "--block-op",
              "natures": "--nature", "limits": "--limit"}


def flag_of(parameter: Parameter) -> str:
    """The command-line spelling of a library parameter an error names: ``overwrite=True`` -> ``--overwrite``."""
    text = FLAG_NAMES.get(parameter.name, "--" + parameter.name.replace("_", "-"))
    if parameter.value is False:  # a --x/--no-x flag pair turned off
        text = "--no-" + text[2:]
    elif parameter.value is not None and parameter.value is not True:
        text = f"{text} {parameter.value}"
    return text if parameter.entry is None else f"{text} {parameter.entry}"


def fail(message: str, code: int) -> None:
    """Print a one-line error on stderr and exit with ``code``."""
    first = " ".join(str(message).split())
    click.echo(f"ampconv: error: {first}", err=True)
    raise SystemExit(code)


def interrupted_message(record: outputs.RunRecord) -> str:
    """The Ctrl-C line: what was running and what was already written (and is kept)."""
    during = f" during {record.phase}" if record.phase else ""
    written = record.describe()
    if not written:
        return f"ampconv: interrupted{during}; nothing was written"
    return f"ampconv: interrupted{during}; {written}"


# The record of the last command run through ``handle_errors``: a Ctrl-C that lands after the command
# returned (click reports it as ``Abort``) still names what that command wrote.
_last_record: Optional[outputs.RunRecord] = None


def last_run_interrupted_message() -> str:
    """The Ctrl-C line for an interrupt after the last command returned (``interrupted_message`` of its record)."""
    return interrupted_message(_last_record or outputs.RunRecord())


def handle_errors(func: Callable) -> Callable:
    """Run a command body, mapping ``AmpconvError`` and Ctrl-C to exit codes.

    When files were already written, the one-line error (or the interrupt
    line) names them, so a failed run never leaves a file nobody mentioned.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        global _last_record
        with outputs.recording() as record:
            _last_record = record
            try:
                return func(*args, **kwargs)
            except AmpconvError as exc:
                fail(_with_written(exc.render(flag_of), record), exc.exit_code)
            except KeyboardInterrupt:
                click.echo(interrupted_message(record), err=True)
                raise SystemExit(130) from None
            except MemoryError:
                fail(_with_written("out of memory", record), 1)

    return wrapper


def _with_written(message: str, record: outputs.RunRecord) -> str:
    """``message``, followed by what the run had written before it failed (if anything)."""
    written = record.describe()
    if not written:
        return message
    during = f"during {record.phase}; " if record.phase else ""
    return f"{message} ({during}{written})"
