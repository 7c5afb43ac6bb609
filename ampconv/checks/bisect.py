"""Find which nodes to keep float32 so that a failing check passes: bisection over an ordered list.

The users'-session check (``ampconv.checks.users``) can say that onnxruntime
crashes or refuses a model at its default optimization level, but not which
nodes: the crash is in an optimizer, and the node it names (if any) is one
the optimizer made. ``culprits`` finds them by asking, again and again, whether
the model planned with a candidate set of nodes kept float32 still fails.

Candidates are in graph order. With ``found`` (the culprits so far) kept
float32, the smallest prefix of the candidates whose pinning makes the check
pass ends with a node that is needed: it joins ``found``, and the search goes on
in the prefix before it until ``found`` alone passes. Each culprit costs about
log2(candidates) checks; a pattern that repeats in every layer is one culprit
here, because a culprit stands for every node of its class (the caller
expands it).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, FrozenSet, List, Optional, Sequence

Fails = Callable[[FrozenSet[str]], bool]


@dataclasses.dataclass(frozen=True)
class Culprits:
    """What the bisection found: ``nodes`` to keep float32, after ``checks`` runs of the check.

    ``complete`` is False when the check budget ran out: ``nodes`` then also
    holds the whole prefix known to pass, more than needed but enough.
    """

    nodes: FrozenSet[str]
    checks: int
    complete: bool = True


def culprits(candidates: Sequence[str], fails: Fails, max_checks: int = 64) -> Optional[Culprits]:
    """Nodes among ``candidates`` whose pinning makes ``fails`` false; None when pinning them all still fails.

    ``fails(set())`` is taken to be True (the caller saw the failure).
    ``fails(pins)`` says whether the check still fails with ``pins`` kept
    float32. At most ``max_checks`` calls.
    """
    remaining: List[str] = list(candidates)
    found: FrozenSet[str] = frozenset()
    checks = 1
    if fails(frozenset(remaining)):
        return None
    while remaining:
        # Invariant: fails(found + remaining[:low]) and not fails(found + remaining[:high]).
        low, high = 0, len(remaining)
        while high - low > 1:
            if checks >= max_checks:
                return Culprits(found | frozenset(remaining[:high]), checks, complete=False)
            middle = (low + high) // 2
            checks += 1
            if fails(found | frozenset(remaining[:middle])):
                low = middle
            else:
                high = middle
        found = found | {remaining[high - 1]}
        remaining = remaining[: high - 1]
        if not remaining:
            break
        checks += 1
        if not fails(found):
            break
    return Culprits(found, checks)


__all__ = ["Culprits", "culprits"]
