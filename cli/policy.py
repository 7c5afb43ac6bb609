"""``ampconv policy show``: the effective op lists of a preset + files + level."""

from __future__ import annotations

import json

import click

import ampconv
from ampconv.policy import LEVEL_TABLE
from ampconv_cli.errors import handle_errors
from ampconv_cli.options import policy_options


@click.group("policy")
def group() -> None:
    """Inspect precision policies."""


@group.command("show")
@policy_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="json writes the lists in the Ascend mixlist format.")
@handle_errors
def show(level, preset, mixlists, block_ops, target, fmt):
    """Print the effective WHITE/BLACK/GRAY lists (every other op is UNLISTED)."""
    policy = ampconv.load_policy(preset=preset, mixlists=mixlists, level=level, block_ops=block_ops, target=target)
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
    for warning in policy.warnings:
        click.echo(f"warning: {warning}", err=True)
