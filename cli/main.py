"""Entry point: the ``ampconv`` click group."""

import sys

import click

from ampconv_cli import convert, policy, validate
from ampconv_cli.errors import fail


# click >= 8.2 raises this (a UsageError) to print help for a bare command.
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


class OneLineErrorGroup(click.Group):
    """A click group whose usage errors are one line, like every other ampconv error.

    click prints a usage error as three lines (usage, a hint, the error); a CI
    log or a Makefile is easier to read with the single ``ampconv: error:``
    line every other failure uses. Exit code 2 is kept.
    """

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
            click.echo("ampconv: interrupted; nothing was written", err=True)
            sys.exit(130)
        sys.exit(result if isinstance(result, int) else 0)


@click.group(cls=OneLineErrorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ampconv")
def cli() -> None:
    """Convert float32 ONNX models to float16/bfloat16 mixed precision."""


cli.add_command(convert.command)
cli.add_command(validate.command)
cli.add_command(policy.group)


def main() -> None:
    """Console-script entry point."""
    cli()
