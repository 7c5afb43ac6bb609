"""Run ampconv's in-place passes in order, raising ampconv's own errors as they are.

``onnx_ir``'s ``PassManager`` wraps whatever a pass raises (``PassError``, and
``PostconditionError`` around an ``ensures`` failure). ``run_passes`` raises the
original ``AmpconvError`` instead, so callers and the CLI see the
``ConversionError`` (message, exit code) the step itself raised.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes import InvariantError, PassBase, PassError, PassManager, PassResult

from ampconv.errors import AmpconvError


def run_passes(model: ir.Model, *passes: PassBase) -> PassResult:
    """Run ``passes`` once each, in order, on ``model`` (in place)."""
    try:
        return PassManager(passes, steps=1)(model)
    except (PassError, InvariantError) as exc:
        cause = _ampconv_cause(exc)
        if cause is None:
            raise
        raise cause from None


def _ampconv_cause(exc: BaseException):
    """The ``AmpconvError`` that ``onnx_ir``'s pass errors wrap, if any."""
    seen = set()
    while isinstance(exc, (PassError, InvariantError)) and id(exc) not in seen:
        seen.add(id(exc))
        exc = exc.__cause__
    return exc if isinstance(exc, AmpconvError) else None
