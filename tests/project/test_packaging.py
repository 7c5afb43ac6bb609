"""Every package of the source tree is in the distribution (setup.cfg lists packages by hand)."""

from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _listed() -> set:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    return {line.strip() for line in config["options"]["packages"].splitlines() if line.strip()}


def _on_disk() -> set:
    return {
        ".".join(p.parent.relative_to(ROOT).parts)
        for top in ("ampconv", "ampconv_cli")
        for p in (ROOT / top).rglob("__init__.py")
    }


def test_every_package_is_listed_in_setup_cfg():
    missing = _on_disk() - _listed()
    assert not missing, f"packages missing from setup.cfg [options] packages: {sorted(missing)}"


def test_setup_cfg_lists_no_package_that_does_not_exist():
    assert not _listed() - _on_disk()
