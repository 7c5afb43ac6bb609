"""What the accuracy search (``ampconv.calibration.tune``) tells the planner: a plan input the planner owns.

``calibration.margin`` builds it; the ``data-tune`` rule and the overflow guard
(``plan/data_guards.py``) read it.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping


@dataclasses.dataclass(frozen=True)
class SearchPins:
    """What the accuracy search tells the planner: nodes kept float32, and nodes the margin no longer keeps."""

    kept: Mapping[str, str] = dataclasses.field(default_factory=dict)  # node -> why (rule data-tune)
    released: Mapping[str, str] = dataclasses.field(default_factory=dict)  # node -> the figures: only the margin

    def __bool__(self) -> bool:
        return bool(self.kept or self.released)
