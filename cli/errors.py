"""The one place where library errors become messages and exit codes.

0 ok, 1 error, 2 usage/policy error, 3 validation over tolerance, 130 interrupted.
"""

from __future__ import annotations

import functools
from typing import Callable

import click

from ampconv.errors import AmpconvError


def fail(message: str, code: int) -> None:
    """Print a one-line error on stderr and exit with ``code``."""
    first = " ".join(str(message).split())
    click.echo(f"ampconv: error: {first}", err=True)
    raise SystemExit(code)


def handle_errors(func: Callable) -> Callable:
    """Run a command body, mapping ``AmpconvError`` and Ctrl-C to exit codes."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except AmpconvError as exc:
            fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            click.echo("ampconv: interrupted; nothing was written", err=True)
            raise SystemExit(130) from None
        except MemoryError:
            fail("out of memory", 1)

    return wrapper
