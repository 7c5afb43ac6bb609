"""The main graph's interface: which float inputs and outputs are float32 and which LOW, each by a named rule.

``keep_io_types`` (True, False, or the names to keep) sets what the user
asked; the planner decides the rest in one place: a kept input or output is
float32 (``io-kept``); an input not kept is LOW (``io-converted``); an output
not kept is LOW unless its values are known not to fit the LOW type
(``io-misfit``) or its producer was never decided (``io-undecided``). The
decisions go into the ``Plan`` (``Plan.interface``) and the report's
``interface`` list.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, FrozenSet, Tuple, Union

import onnx_ir as ir

from ampconv.errors import UsageError, named
from ampconv.plan.kvcache import CachePair
from ampconv.plan.rules import INTERFACE, Rule, builtin, check_rule_id
from ampconv.core.precision import Precision

INPUT, OUTPUT = "input", "output"

RULES = tuple(builtin(rule) for rule in (
    Rule("io-kept", INTERFACE, "keep_io_types keeps this main-graph input or output float32"),
    Rule("io-converted", INTERFACE, "keep_io_types does not keep this main-graph input or output: it is LOW"),
    Rule("io-kv-cache", INTERFACE, "kv_cache='low': a decoder's KV cache input or output is LOW"),
    Rule("io-misfit", INTERFACE, "an output keep_io_types leaves free stays float32: its values are known not to "
         "fit LOW"),
    Rule("io-undecided", INTERFACE, "an output keep_io_types leaves free stays float32: its producer was not "
         "planned"),
))


@dataclasses.dataclass(frozen=True)
class InterfaceDecision:
    """The precision of one float main-graph input or output and the rule that chose it."""

    name: str
    kind: str  # INPUT or OUTPUT
    precision: Precision
    rule: str
    reason: str

    def __post_init__(self) -> None:
        check_rule_id(self.rule)

    def record(self) -> dict:
        """The report's entry."""
        return {"name": self.name, "kind": self.kind, "precision": self.precision, "rule": self.rule,
                "reason": self.reason}


def kept_names(graph: ir.Graph, keep_io_types: Union[bool, Tuple[str, ...]]) -> FrozenSet[str]:
    """The main-graph inputs/outputs ``keep_io_types`` keeps float32; ``UsageError`` for a name not among them."""
    names = {v.name for v in graph.inputs} | {v.name for v in graph.outputs}
    if keep_io_types is True:
        return frozenset(names)
    if keep_io_types is False:
        return frozenset()
    unknown = sorted(set(keep_io_types) - names)
    if unknown:
        raise UsageError(f"{named('keep_io_types')} names {', '.join(unknown)}: not a graph input or output")
    return frozenset(keep_io_types)


def kept(name: str, kind: str) -> InterfaceDecision:
    """A float input or output ``keep_io_types`` keeps: float32 (rule ``io-kept``)."""
    return InterfaceDecision(name, kind, Precision.HIGH, "io-kept", f"keep_io_types keeps {kind} {name!r} float32")


def converted(name: str, kind: str) -> InterfaceDecision:
    """A float input or output ``keep_io_types`` leaves free and nothing keeps float32: LOW (``io-converted``)."""
    return InterfaceDecision(name, kind, Precision.LOW, "io-converted",
                             f"keep_io_types does not keep {kind} {name!r}: it is LOW")


def low_cache_names(pairs, kv_cache: str) -> Dict[str, CachePair]:
    """Input and output name -> its cache pair, for the pairs ``kv_cache`` puts in the LOW type (``low``)."""
    if kv_cache != "low":
        return {}
    return {name: pair for pair in pairs for name in (pair.past, pair.present)}


def cache_low(name: str, kind: str, pair: CachePair) -> InterfaceDecision:
    """A KV cache input or output under ``kv_cache="low"``: LOW (``io-kv-cache``)."""
    return InterfaceDecision(name, kind, Precision.LOW, "io-kv-cache",
                             f"kv_cache='low': {kind} {name!r} is the KV cache ({pair.past} -> {pair.present} "
                             f"through {pair.via}): it is LOW")


def misfit_output(name: str, why: str) -> InterfaceDecision:
    """An output left free whose values are known not to fit the LOW type: float32 (``io-misfit``)."""
    return InterfaceDecision(name, OUTPUT, Precision.HIGH, "io-misfit", f"kept float32: {why}")


def undecided_output(name: str) -> InterfaceDecision:
    """An output left free whose producer the plan never decided (not a planned value): float32."""
    return InterfaceDecision(name, OUTPUT, Precision.HIGH, "io-undecided",
                             "its producer was not planned (no decided float32 or LOW value): kept float32")


__all__ = ["INPUT", "OUTPUT", "InterfaceDecision", "cache_low", "converted", "kept", "kept_names",
           "low_cache_names", "misfit_output",
           "undecided_output"]
