"""Where a converted model will run: which runtime (its facts) and which execution provider.

A conversion chooses one ``Target`` (``choose_target``: ``Config.target`` /
``--target``, else from the runtime's listed providers) and the plan's
context carries it: the rules ask ``ctx.target`` which providers the output
must run on and whose kernels to ask, and ``ctx.runtime`` the runtime's
facts. Nothing about the runtime is process-wide: two conversions in one
process may target two runtimes.

The target is what the runtime *lists*, not what loads on this machine: a
CI runner with onnxruntime-gpu and no CUDA libraries prepares a model for the
GPU it deploys to. ``level_reason`` says so, for ``--level auto``.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple, Union

from ampconv.runtime.facts import CPU, CUDA, ONNXRUNTIME, RuntimeFacts

# Target name -> (the provider the output is deployed on, the GPU provider whose bfloat16 kernels matter).
# bfloat16 arithmetic is a GPU's: onnxruntime's CPU provider has almost no bfloat16 kernel, so even a CPU
# target's bfloat16 kernel notes ask the GPU provider (the load check tells the CPU's gaps).
_PROVIDERS = {"cuda": (CUDA, CUDA), "cpu": (CPU, CUDA)}


@dataclasses.dataclass(frozen=True)
class Target:
    """The runtime a conversion is for (``runtime``: its facts) and its device, ``cuda`` or ``cpu``."""

    name: str
    runtime: RuntimeFacts = ONNXRUNTIME
    given: bool = False  # named by the user (``--target``), not chosen from the runtime

    @property
    def provider(self) -> str:
        """The execution provider the converted model is deployed on."""
        return _PROVIDERS[self.name][0]

    @property
    def runs_on(self) -> Tuple[str, ...]:
        """Every provider the output must run on: the target's, and the CPU's (ampconv's own checks and
        calibration run there, and onnxruntime falls back to it for ops the target's provider lacks)."""
        return tuple(dict.fromkeys((self.provider, CPU)))

    @property
    def bf16_provider(self) -> str:
        """The provider whose bfloat16 kernels the plan's bfloat16 nodes need (a GPU's)."""
        return _PROVIDERS[self.name][1]

    def level_reason(self) -> str:
        """Why this target, for the ``--level auto`` note: empty when the user named it.

        Asks whether the CUDA provider loads here (a forked child, once per
        runtime) only when the runtime lists it: said, not decided on.
        """
        if self.given:
            return ""
        runtime = self.runtime.describe()
        if CUDA not in self.runtime.listed_providers():
            return f" ({runtime} has no CUDA provider)"
        state = self.runtime.provider_state(CUDA)
        if state.loads:
            return f" ({runtime} installed; its CUDA provider loads here)"
        why = f": {state.why}" if state.why else ""
        return f" ({runtime} installed; the CUDA provider cannot load here{why})"


def choose_target(name: Optional[str], runtime: Optional[RuntimeFacts] = None) -> Target:
    """The target ``name`` (``cuda``/``cpu``) on ``runtime`` (None: the installed onnxruntime); with no name,
    ``cuda`` when the runtime lists the CUDA provider, else ``cpu`` (no provider is loaded to choose)."""
    runtime = runtime if runtime is not None else ONNXRUNTIME
    if name is not None:
        return Target(name, runtime, given=True)
    return Target("cuda" if CUDA in runtime.listed_providers() else "cpu", runtime)


def as_target(target: Union[Target, str, None]) -> Target:
    """``target`` as a ``Target``: itself, or ``choose_target`` of a name (None: from the installed runtime)."""
    return target if isinstance(target, Target) else choose_target(target)


__all__ = ["Target", "as_target", "choose_target"]
