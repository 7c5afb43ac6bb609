"""``ampconv policy show``: the effective op lists of a preset + files + level."""

from __future__ import annotations

import json

import click

import ampconv
from ampconv.policy import LEVEL_TABLE
from ampconv.errors import spell_parameters
from ampconv_cli.errors import flag_of, handle_errors
from ampconv_cli.options import format_flag, policy_options


@click.group("policy")
def group() -> None:
    """Inspect precision policies."""


@group.command("show")
@policy_options
@format_flag(("text", "json"), "json writes the lists in the Ascend mixlist format.")
@handle_errors
def show(level, preset, mixlists, block_ops, target, fmt, op_info=None):
    """Print the effective WHITE/BLACK/GRAY lists (every other op is UNLISTED) and where each op's class came from."""
    policy = ampconv.load_policy(
        preset=preset, op_info=op_info, mixlists=mixlists, level=level, block_ops=block_ops, target=target
    )
    lists = policy.lists()
    if fmt == "json":
        # A mixlist cannot say "float32 at O3 too": blocked ops are listed black,
        # which is what they are at O1 and O2 (--block-op still blocks them at O3).
        data = {
            "black-list": {"to-add": sorted(set(lists["BLACK"]) | policy.blocked), "to-remove": []},
            "white-list": {"to-add": list(lists["WHITE"]), "to-remove": []},
            "gray-list": {"to-add": list(lists["GRAY"]), "to-remove": []},
        }
        click.echo(json.dumps(data, indent=2))
        return
    click.echo(f"policy: {', '.join(policy.sources)}; level {policy.level}")
    if policy.level_note:
        click.echo(f"  {policy.level_note}")
    if policy.level in LEVEL_TABLE:
        meaning = ", ".join(f"{c} -> {p}" for c, p in LEVEL_TABLE[policy.level].items())
        click.echo(f"  at {policy.level}: {meaning}")
    for cls in ("WHITE", "BLACK", "GRAY"):
        click.echo(f"{cls} ({len(lists[cls])}): {' '.join(lists[cls])}")
    if policy.blocked:
        click.echo(f"BLOCKED, float32 at every level ({len(policy.blocked)}): {' '.join(sorted(policy.blocked))}")
    click.echo("UNLISTED: every other op, including ops of other domains")
    _echo_origins(policy)
    for note in policy.notes:
        click.echo(f"note: {spell_parameters(note, flag_of)}", err=True)
    for warning in policy.warnings:
        click.echo(f"warning: {spell_parameters(warning, flag_of)}", err=True)


def _echo_origins(policy) -> None:
    """Where each op a file set got its class (op-info record, mixlist key, framework name), then what matched nothing."""
    if policy.origins:
        click.echo(f"set by policy files ({len(policy.origins)}):")
        width = max(len(op) for op in policy.origins)
        for op in sorted(policy.origins):
            click.echo(f"  {op.ljust(width)}  {_class(policy, op):9s} {policy.origins[op]}")
    for path, names in policy.unmatched.items():
        if names:
            click.echo(f"no ONNX counterpart in {path} ({len(names)}): {' '.join(names)}")


def _class(policy, op: str) -> str:
    """The class of an op key (``Op`` or ``domain::Op``)."""
    domain, name = op.split("::", 1) if "::" in op else ("", op)
    return policy.class_of(domain, name)
