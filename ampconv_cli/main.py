"""Entry point: the ``ampconv`` click group."""

import difflib
import importlib
import logging
import os
import sys

import click

from ampconv import __version__
from ampconv_cli.errors import fail

# Subcommands are imported when they run, not at start-up: their modules pull
# in onnx, onnx-ir (and through it sympy) and numpy, about a second of imports
# that ``ampconv --version`` and ``ampconv --help`` do not need. The short help
# shown by ``ampconv --help`` is kept here for the same reason; a test checks
# it against each command's own docstring.
SUBCOMMANDS = {
    "convert": ("ampconv_cli.convert", "command", "Convert MODEL (float32 ONNX) to float16/bfloat16 mixed precision."),
    "validate": ("ampconv_cli.validate", "command", "Compare CONVERTED with the float32 REFERENCE on the same inputs."),
    "policy": ("ampconv_cli.policy", "group", "Inspect precision policies."),
    "report": ("ampconv_cli.report", "command", "Write a self-contained HTML page from a conversion REPORT (JSON)."),
}


# click >= 8.2 raises this (a UsageError) to print help for a bare command.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand is used."""

    def list_commands(self, ctx):  # noqa: D102
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx, cmd_name):  # noqa: D102
        if cmd_name not in SUBCOMMANDS:
            return None
        module, attribute, _ = SUBCOMMANDS[cmd_name]
        return getattr(importlib.import_module(module), attribute)

    def resolve_command(self, ctx, args):  # noqa: D102
        # A misspelt command gets the command it is closest to, as a misspelt option does.
        name = args[0] if args else ""
        if name and name not in SUBCOMMANDS and not name.startswith("-"):
            close = difflib.get_close_matches(name, sorted(SUBCOMMANDS), n=1, cutoff=0.6)
            if close:
                ctx.fail(f"No such command {name!r}: did you mean {close[0]!r}?")
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx, formatter):  # noqa: D102
        rows = [(name, SUBCOMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


class OneLineErrorGroup(LazyGroup):
    """A click group whose usage errors are one line, like every other ampconv error.

    click prints a usage error as three lines (usage, a hint, the error); a CI
    log or a Makefile is easier to read with the single ``ampconv: error:``
    line every other failure uses. Exit code 2 is kept.
    """

    def make_context(self, info_name, args, parent=None, **extra):  # noqa: D102
        # The words as typed, for the report (``command_words``): the page repeats the run with a fix.
        from ampconv_cli import command_words

        typed = list(args)
        ctx = super().make_context(info_name, args, parent, **extra)
        command_words.remember(ctx, typed)
        return ctx

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D102
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except _NO_ARGS_IS_HELP as exc:  # bare ``ampconv``: the help is the answer
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "ampconv"
            fail(f"{exc.format_message()} (see '{where} --help')", exc.exit_code)
        except click.ClickException as exc:
            fail(exc.format_message(), exc.exit_code)
        except click.Abort:
            from ampconv_cli.errors import last_run_interrupted_message

            click.echo(last_run_interrupted_message(), err=True)
            sys.exit(130)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineErrorGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Start with: ampconv convert model.onnx (writes model.fp16.onnx beside it). "
             "'ampconv COMMAND --help' lists a command's options by topic, with examples.")
# The version from the package itself: looking it up in the installed
# distributions' metadata (click's default) costs about 0.15 s at every start.
@click.version_option(version=__version__, prog_name="ampconv")
def cli() -> None:
    """Convert float32 ONNX models to float16/bfloat16 mixed precision."""
    # onnx-ir logs what it finds wrong in a model it reads (a dangling input,
    # an output nobody produces); ampconv's checks then report the problem as
    # one error line, so the library's own log lines would only be noise.
    logging.getLogger("onnx_ir").setLevel(logging.ERROR)



def main() -> None:
    """Console-script entry point.

    Once the command is over (its files written and named, its summary
    printed), a Ctrl-C has nothing left to interrupt: it is ignored from then
    on. Without that, one arriving while the interpreter freed a large model
    at exit killed the process with status 130 and no word, after a complete
    run.

    The process then ends at once (``_leave``): the interpreter's own exit
    collects every cycle left, and the converted model is one big web of
    them, about 0.4 s after a 40,000-node graph, with nothing to gain. Every
    file ampconv writes is closed by then (each is written in a ``with``
    block); standard output and error are flushed first.
    """
    import signal

    from ampconv_cli import collection

    collection.mark_process_ends()
    try:
        cli()
    except SystemExit as exc:  # click ends every command this way, errors included
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _leave(exc.code)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _leave(code) -> None:
    """End the process with ``code`` as ``sys.exit(code)`` would, without the interpreter's tear-down."""
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)  # sys.exit("message") prints it and exits 1
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (ampconv ... | head) or stream: nothing more to say
            pass
    logging.shutdown()
    os._exit(code or 0)
