"""Option groups shared between commands (defined once, reused)."""

from __future__ import annotations

from typing import Callable

import click

from ampconv.config import DTYPES, LEVELS, TARGETS
from ampconv.policy.lists import PRESETS


def _stack(func: Callable, decorators) -> Callable:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


def policy_options(func: Callable) -> Callable:
    """--level, --preset, --mixlist, --block-op, --target."""
    return _stack(
        func,
        [
            click.option("--level", type=click.Choice(LEVELS), default="O2", show_default=True,
                         help="O0 no change, O1 white list LOW, O2 all LOW but the black list, "
                         "O3 everything LOW, auto by --target."),
            click.option("--preset", type=click.Choice(sorted(PRESETS)), default="default", show_default=True,
                         help="Built-in op lists."),
            click.option("--mixlist", "mixlists", multiple=True, type=click.Path(dir_okay=False),
                         metavar="FILE", help="Ascend modify_mixlist JSON; repeatable, applied left to right."),
            click.option("--block-op", "block_ops", multiple=True, metavar="OP",
                         help="Keep this op type float32 at every level (OpType or domain::OpType)."),
            click.option("--target", type=click.Choice(TARGETS), default=None,
                         help="Deployment device for --level auto (default: from the installed onnxruntime)."),
        ],
    )


def conversion_options(func: Callable) -> Callable:
    """--dtype, keep-io, regex overrides, --clamp."""
    return _stack(
        func,
        [
            click.option("--dtype", type=click.Choice(DTYPES), default="fp16", show_default=True,
                         help="The low-precision type."),
            click.option("--keep-io-types", "keep_io", default=None, is_flag=False, flag_value="*",
                         metavar="[NAMES]",
                         help="Keep graph inputs/outputs float32 (the default); with a comma list, only those."),
            click.option("--no-keep-io-types", "no_keep_io", is_flag=True,
                         help="Convert graph inputs/outputs to the low type too."),
            click.option("--keep-fp32", multiple=True, metavar="REGEX",
                         help="Keep nodes whose name matches float32; repeatable."),
            click.option("--force-low", multiple=True, metavar="REGEX",
                         help="Force nodes whose name matches to the low type (schema limits still apply)."),
            click.option("--clamp", is_flag=True,
                         help="Clamp out-of-range constants to the low type's range instead of keeping "
                         "their consumers float32."),
        ],
    )


def keep_io_value(keep_io, no_keep_io):
    """Turn the two keep-io options into ``Config.keep_io_types``."""
    if no_keep_io and keep_io not in (None,):
        raise click.UsageError("--keep-io-types and --no-keep-io-types contradict each other")
    if no_keep_io:
        return False
    if keep_io in (None, "*"):
        return True
    names = tuple(n.strip() for n in keep_io.split(",") if n.strip())
    if not names:
        raise click.BadParameter("expected a comma list of input/output names", param_hint="--keep-io-types")
    return names
