"""Entry point: the ``ampconv`` click group."""

import click

from ampconv_cli import convert, policy, validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ampconv")
def cli() -> None:
    """Convert float32 ONNX models to float16/bfloat16 mixed precision."""


cli.add_command(convert.command)
cli.add_command(validate.command)
cli.add_command(policy.group)


def main() -> None:
    """Console-script entry point."""
    cli()
