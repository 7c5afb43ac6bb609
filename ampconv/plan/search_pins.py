"""What the accuracy search and the release step tell the planner: a plan input the planner owns.

``calibration.margin`` builds it for the search (``ampconv.calibration.tune``),
``calibration.release`` adds the nodes the release step lowers; the
``data-tune`` rule, the overflow guard (``plan/data_guards.py``), the
constant guard and the ``release-low`` rule (``plan/release.py``) read it.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class SearchPins:
    """Nodes kept float32 (``data-tune``), nodes the margin no longer keeps, nodes the release step lowers."""

    kept: Mapping[str, str] = dataclasses.field(default_factory=dict)  # node -> why (rule data-tune)
    released: Mapping[str, str] = dataclasses.field(default_factory=dict)  # node -> the figures: only the margin
    # node -> why the release step (``calibration.release``) runs it LOW: the evidence and the measured effect.
    lowered: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.kept or self.released or self.lowered)
