"""Give the model a default-domain opset when the rewrite added default-domain nodes to a model without one."""

from __future__ import annotations

from typing import List

import onnx_ir as ir
from ampconv.core.domains import is_default
from ampconv.core.graphs import all_graphs
from onnx_ir.passes import InPlacePass, PassResult


class EnsureDefaultOpsetPass(InPlacePass):
    """Inserted Casts/Constants need the default domain (e.g. a model of ai.onnx.ml ops only).

    ``notes`` says what it added, for the report.
    """

    def __init__(self) -> None:
        self.notes: List[str] = []

    def call(self, model: ir.Model) -> PassResult:
        if "" in model.opset_imports or "ai.onnx" in model.opset_imports:
            return PassResult(model, modified=False)
        if not any(is_default(n) for g in all_graphs(model) for n in g):
            return PassResult(model, modified=False)
        # Opset 13 is the first whose Cast takes bfloat16; it needs IR version 7.
        version = 13 if (model.ir_version or 0) >= 7 else 9
        model.opset_imports[""] = version
        self.notes.append(f"added default-domain opset {version} for the inserted casts")
        return PassResult(model, modified=True)
