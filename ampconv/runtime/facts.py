"""What a runtime knows of operators, asked of one object: its schemas, its providers and their kernels.

ampconv reads these facts from the runtime a converted model will run on:

- **schemas** of the ops ``onnx.defs`` does not define (onnxruntime's contrib
  operator sets, ``com.microsoft``, and its own ops in the default domain such
  as SimplifiedLayerNormalization): ``schema``, ``knows``,
  ``own_default_domain_ops``. ``ampconv.runtime.schema`` reads them where onnx has
  nothing, exactly as it reads ``onnx.defs``;
- **kernels a provider lacks** for the LOW type, which a load check cannot see
  because the model loads and fails only when it runs (onnxruntime's CPU
  provider and a ScatterND with a reduction in float16): ``kernel_gaps``,
  ``missing_low_kernel``; and every kernel a provider registers
  (``has_kernel``: the bfloat16 kernel notes);
- **providers**: which the runtime lists, and whether one loads on this
  machine (``provider_state``: onnxruntime-gpu lists CUDA on a runner
  without CUDA's libraries, where it cannot load).

``RuntimeFacts`` names these questions; ``OnnxRuntimeFacts`` answers them for
the installed onnxruntime (its schemas read through
``ampconv.runtime.contrib_schemas``, the questions that can kill a process
asked in a child by ``ampconv.runtime.installed``). ``ONNXRUNTIME`` is the
default; no switch is process-wide: a conversion reads the facts of its
``Config.runtime`` through its plan's context (``ampconv.runtime.target``),
so another runtime, or a test's stand-in, is one subclass passed there
(``tests/plan/test_runtime_facts.py``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable, FrozenSet, Optional, Tuple

from ampconv.runtime import contrib_schemas as runtime_schemas
from ampconv.runtime import cuda_kernels, installed, kernel_ties
from ampconv.runtime.contrib_schemas import RuntimeSchema
from ampconv.runtime.installed import ProviderState

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


@dataclasses.dataclass(frozen=True)
class KernelGap:
    """Default-domain ops a provider loads in the LOW type but cannot run in it when ``applies(node)`` holds."""

    provider: str
    op_types: FrozenSet[str]
    applies: Callable[[object], bool]  # applies(onnx_ir node) -> whether this node hits the gap
    why: str  # the words a decision quotes, with {op} for the op type


class RuntimeFacts:
    """The questions ampconv asks of a runtime; this base knows nothing (no schemas, no gaps)."""

    name = "no runtime"

    def schema(self, domain: str, op_type: str, opset: int) -> Optional[RuntimeSchema]:
        """The runtime's schema of ``domain::op_type`` in force at ``opset`` (None: it defines none)."""
        return None

    def knows(self, domain: str, op_type: str) -> bool:
        """Whether the runtime has a schema of ``domain::op_type`` at any version."""
        return False

    def schemas_available(self) -> bool:
        """Whether the runtime's schemas could be read (it is installed and answers)."""
        return False

    def own_default_domain_ops(self) -> FrozenSet[str]:
        """Ops the runtime registers in the default domain that the installed onnx does not define."""
        return frozenset()

    def own_default_domain_ops_among(self, nodes) -> Counter:
        """How many of ``nodes`` (onnx_ir nodes) are each such op: a model holding them runs on this runtime only."""
        ops = self.own_default_domain_ops()
        return Counter(node.op_type for node in nodes if node.op_type in ops and node.domain in ("", "ai.onnx"))

    def kernel_gaps(self, provider: str) -> Tuple[KernelGap, ...]:
        """The LOW kernels ``provider`` lacks although the model loads."""
        return ()

    def kernel_providers(self) -> FrozenSet[str]:
        """The providers whose kernel registry this runtime can show (``has_kernel`` answers for them)."""
        return frozenset()

    def has_kernel(self, provider: str, domain: str, op_type: str, opset: int, type_string: str) -> Optional[bool]:
        """Whether ``provider`` registers a kernel of ``domain::op_type`` at ``opset`` taking ``type_string``
        (``tensor(bfloat16)``); None when its registry cannot be read (not among ``kernel_providers``)."""
        return None

    def why_no_kernels(self, provider: str) -> str:
        """Why ``has_kernel`` cannot answer for ``provider`` (one clause for a summary): the runtime does not
        list it, it is listed but does not load here (``provider_state``), or its registry could not be read."""
        state = self.provider_state(provider)
        if not state.listed:
            short = provider.replace("ExecutionProvider", "")
            gpu = " (onnxruntime-gpu lists them)" if provider == CUDA else ""
            return f"the installed {self.describe()} has no {short} provider{gpu}"
        if not state.loads:
            return state.words()
        return f"{self.describe()}'s kernel registry could not be read: {self.kernel_failure() or 'not shown'}"

    def kernel_failure(self) -> Optional[str]:
        """How asking for the kernel registry failed (None: it did not, or this runtime has none to ask)."""
        return None

    def listed_providers(self) -> Tuple[str, ...]:
        """The execution providers the runtime offers, in its order of preference (not all may load here)."""
        return ()

    def provider_state(self, provider: str) -> ProviderState:
        """Whether ``provider`` is listed and loads on this machine, and why not (this base: a listed provider
        is taken at its word)."""
        listed = provider in self.listed_providers()
        return ProviderState(provider, listed=listed, loads=listed)

    def max_ir_version(self) -> Optional[int]:
        """The newest IR version the runtime reads (None: unknown)."""
        return None

    def describe(self) -> str:
        """How messages name the runtime: ``onnxruntime-gpu 1.31.1``."""
        return self.name

    def kernel_ties(self, domain: str, op_type: str, opset: int) -> Tuple[Tuple[str, str], ...]:
        """Pairs (variable, tied to) of type variables that every kernel of the runtime binds to one type
        (this base: none)."""
        return ()

    def gpu_low_kernel(self, provider: str, domain: str, op_type: str, opset: int, type_string: str) -> Optional[bool]:
        """Whether the GPU ``provider`` has a kernel of ``domain::op_type`` at ``opset`` taking ``type_string``, as
        the pinned runtime's table records it without asking this machine (None: no table speaks; this base)."""
        return None

    def missing_low_kernel(self, node, provider: str) -> Optional[str]:
        """Why ``provider`` cannot run this default-domain ``node`` in the LOW type, or None when it can."""
        if node.domain not in ("", "ai.onnx"):
            return None
        for gap in self.kernel_gaps(provider):
            if node.op_type in gap.op_types and gap.applies(node):
                return gap.why.format(op=node.op_type)
        return None


def _reduction_set(node) -> bool:
    """A scatter with a ``reduction`` other than ``none``."""
    reduction = node.attributes.get("reduction")
    return reduction is not None and reduction.value not in ("none", b"none")


# onnxruntime loads ScatterND/ScatterElements with a float16 reduction, but its CPU provider fails at run time
# ("MLFloat16 data type is not supported with ScatterND opset 18 when reduction is 'max'").
_ONNXRUNTIME_GAPS = (
    KernelGap(CPU, frozenset({"ScatterND", "ScatterElements"}), _reduction_set,
              "onnxruntime's CPU provider runs {op} with a reduction only in float32"),
)


class OnnxRuntimeFacts(RuntimeFacts):
    """The installed onnxruntime's facts: its contrib and own schemas (``runtime_schemas``), the CPU provider's
    missing kernels, and what ``ampconv.runtime.installed`` asked it in a child (kernels, providers, IR)."""

    name = "onnxruntime"

    def schema(self, domain: str, op_type: str, opset: int) -> Optional[RuntimeSchema]:
        return runtime_schemas.lookup(domain, op_type, opset)

    def knows(self, domain: str, op_type: str) -> bool:
        return runtime_schemas.known(domain, op_type)

    def schemas_available(self) -> bool:
        return runtime_schemas.available()

    def own_default_domain_ops(self) -> FrozenSet[str]:
        return runtime_schemas.default_domain_ops()

    def kernel_gaps(self, provider: str) -> Tuple[KernelGap, ...]:
        return tuple(gap for gap in _ONNXRUNTIME_GAPS if gap.provider == provider)

    def kernel_providers(self) -> FrozenSet[str]:
        return frozenset(provider for provider, _domain, _op in installed.kernel_answer().registry)

    def kernel_ties(self, domain: str, op_type: str, opset: int) -> Tuple[Tuple[str, str], ...]:
        return kernel_ties.kernel_ties(domain, op_type, opset)

    def gpu_low_kernel(self, provider: str, domain: str, op_type: str, opset: int, type_string: str) -> Optional[bool]:
        if provider != CUDA:
            return None
        return cuda_kernels.low_kernel(domain, op_type, opset, type_string)

    def has_kernel(self, provider: str, domain: str, op_type: str, opset: int, type_string: str) -> Optional[bool]:
        if provider not in self.kernel_providers():
            return None
        return any(first <= opset <= last and type_string in types
                   for first, last, types in installed.kernel_answer().registry.get((provider, domain, op_type), ()))

    def kernel_failure(self) -> Optional[str]:
        return installed.kernel_answer().failure

    def listed_providers(self) -> Tuple[str, ...]:
        found = installed.installed()
        return found.listed if found is not None else ()

    def provider_state(self, provider: str) -> ProviderState:
        return installed.provider_state(provider)

    def max_ir_version(self) -> Optional[int]:
        return installed.max_ir_version()

    def describe(self) -> str:
        found = installed.installed()
        return found.words if found is not None else self.name


ONNXRUNTIME = OnnxRuntimeFacts()
# The ops some provider of onnxruntime cannot run in LOW with a reduction (``policy.lists`` re-exports them;
# the ``hard-runtime-kernel`` rule asks the context's runtime, ``missing_low_kernel``).
REDUCTION_NEEDS_FLOAT32 = frozenset().union(*(gap.op_types for gap in _ONNXRUNTIME_GAPS))

__all__ = ["CPU", "CUDA", "ONNXRUNTIME", "REDUCTION_NEEDS_FLOAT32", "KernelGap", "OnnxRuntimeFacts", "ProviderState",
           "RuntimeFacts"]
