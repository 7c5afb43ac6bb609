"""The command line as the user typed it, kept in the report, so the page can repeat the run with a fix.

``ampconv report``'s page offers one command to copy: the user's own
``convert`` command with the fix localization checked added
(``ampconv.report.rerun``). Only the CLI knows those words: the group keeps
them (``remember``, in the click context's ``meta``), ``convert --report``
writes them as the report's ``command``, and ``validate --report`` adds the
words of its validation options (``validation_words``), so a page made from
a report that ``validate`` completed repeats that check too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Optional

import click

# Where the group keeps the words after ``ampconv`` (the subcommand first) in the context's meta.
KEY = "ampconv.command_words"


def remember(ctx: click.Context, args: Sequence[str]) -> None:
    """Keep ``args`` (what followed ``ampconv``) for the command that runs in ``ctx``."""
    ctx.meta[KEY] = [str(word) for word in args]


def typed(ctx: Optional[click.Context] = None) -> Optional[list]:
    """``["ampconv", "convert", ...]`` as typed, or None when the command was not run through the group."""
    ctx = ctx or click.get_current_context(silent=True)
    words = ctx.meta.get(KEY) if ctx is not None else None
    return ["ampconv", *words] if words else None


def validation_words(command: click.Command, words: Sequence[str], keep: Iterable[str]) -> list:
    """The words of ``command``'s options whose parameter name is in ``keep``, in the order typed.

    ``--inputs a --rtol 1e-2 --report r.json REF CONV`` with ``keep`` the
    validation parameters gives ``--inputs a --rtol 1e-2``: arguments and
    the other options are left out, an option's value goes with it
    (``--opt value`` or ``--opt=value``).
    """
    keep = set(keep)
    by_flag = {flag: option for option in command.params if isinstance(option, click.Option)
               for flag in (*option.opts, *option.secondary_opts)}
    found, index = [], 0
    while index < len(words):
        word = words[index]
        flag = word.split("=", 1)[0]
        option = by_flag.get(flag) if word.startswith("-") else None
        takes_value = option is not None and not option.is_flag and not option.count and "=" not in word
        span = words[index:index + (2 if takes_value else 1)]
        if option is not None and option.name in keep:
            found.extend(span)
        index += len(span)
    return found
