"""What a runtime knows of operators, asked of one object: its schemas and, per provider, its missing kernels.

ampconv reads two kinds of fact from the runtime a converted model will run on:

- **schemas** of the ops ``onnx.defs`` does not define (onnxruntime's contrib
  operator sets, ``com.microsoft``, and its own ops in the default domain such
  as SimplifiedLayerNormalization): ``schema``, ``knows``,
  ``own_default_domain_ops``. ``ampconv.runtime.schema`` reads them where onnx has
  nothing, exactly as it reads ``onnx.defs``;
- **kernels a provider lacks** for the LOW type, which a load check cannot see
  because the model loads and fails only when it runs (onnxruntime's CPU
  provider and a ScatterND with a reduction in float16): ``kernel_gaps``,
  ``missing_low_kernel``.

``RuntimeFacts`` names these questions; ``OnnxRuntimeFacts`` answers them for
onnxruntime (its schemas read through ``ampconv.runtime.contrib_schemas``), the first
runtime and the one in force unless ``use`` says otherwise. Another runtime is
one subclass: ``with runtime_facts.use(MyRuntimeFacts()): ampconv.convert(...)``
(``tests/plan/test_runtime_facts.py``). Modules that cache what they derived from
these facts register a reset with ``on_change``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from typing import Callable, FrozenSet, Iterator, List, Optional, Tuple

from ampconv.runtime import contrib_schemas as runtime_schemas
from ampconv.runtime.contrib_schemas import RuntimeSchema

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
    """onnxruntime's facts: its contrib and own schemas (``runtime_schemas``), the CPU provider's missing kernels."""

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
        return runtime_schemas.kernel_providers()

    def has_kernel(self, provider: str, domain: str, op_type: str, opset: int, type_string: str) -> Optional[bool]:
        if provider not in self.kernel_providers():
            return None
        return any(first <= opset <= last and type_string in types
                   for first, last, types in runtime_schemas.kernel_registry().get((provider, domain, op_type), ()))


ONNXRUNTIME = OnnxRuntimeFacts()
# The ops some provider of onnxruntime cannot run in LOW with a reduction (``policy.lists`` re-exports the
# set for its readers; the ``hard-runtime-kernel`` rule asks the runtime facts themselves).
REDUCTION_NEEDS_FLOAT32 = frozenset().union(*(gap.op_types for gap in _ONNXRUNTIME_GAPS))
_active: List[RuntimeFacts] = [ONNXRUNTIME]
_resets: List[Callable[[], None]] = []


def active() -> RuntimeFacts:
    """The runtime whose facts are in force (onnxruntime's unless ``use`` says otherwise)."""
    return _active[-1]


def on_change(*resets: Callable[[], None]) -> None:
    """Call ``resets`` whenever the facts in force change (a module's caches of derived facts)."""
    _resets.extend(resets)


@contextlib.contextmanager
def use(facts: RuntimeFacts) -> Iterator[RuntimeFacts]:
    """Put ``facts`` in force inside the ``with`` block (process-wide: not for concurrent conversions)."""
    _active.append(facts)
    _reset()
    try:
        yield facts
    finally:
        _active.remove(facts)
        _reset()


def _reset() -> None:
    for reset in _resets:
        reset()


__all__ = ["CPU", "CUDA", "ONNXRUNTIME", "KernelGap", "OnnxRuntimeFacts", "RuntimeFacts", "active", "on_change", "use"]
