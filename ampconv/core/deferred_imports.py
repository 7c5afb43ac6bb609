"""Load sympy only when something uses it.

``onnx_ir`` imports sympy at the top of its core module, and its
``_symbolic_shapes`` module builds a table of sympy functions at import time;
both serve arithmetic on symbolic dimensions, which ampconv never does.
Importing sympy costs about 0.4 s: a third of a small conversion's whole run.

``defer`` puts a placeholder module in ``sys.modules`` that carries the real
module's import metadata (``__spec__``, ``__path__``, ...), so ``import
sympy`` succeeds without running sympy. The first lookup of any other
attribute runs the real module inside that same object, so every holder of
the placeholder, ours or the caller's, then has the real module, unchanged.
(The standard library's ``importlib.util.LazyLoader`` cannot do this on
Python 3.11: the import statement itself reads ``__spec__``, which makes it
load at once.)

A module already imported, or not found, is left alone: should a later
onnx_ir use sympy at import time, sympy simply loads then (slower, still
correct); ``tests/project/test_deferred_imports.py`` would notice.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types
from typing import Optional

DEFERRED = ("sympy", "onnx_ir._symbolic_shapes")


class _Deferred(types.ModuleType):
    """A module whose code runs on the first lookup of an attribute it does not have yet."""

    def __getattr__(self, attr: str):
        # Only called for attributes not set yet. The import statement reads the
        # import metadata (set, or for a plain module absent: __path__) without
        # loading anything; any other name, __all__ and __version__ included, loads.
        if attr in _IMPORT_METADATA:
            raise AttributeError(attr)
        _load(self)
        return getattr(self, attr)


# What the import system may look up on a module without using it.
_IMPORT_METADATA = frozenset({"__path__", "__spec__", "__loader__", "__package__", "__file__", "__cached__"})


def _load(module: types.ModuleType) -> None:
    """Run the real module's code in ``module`` (once) and attach it to its parent package."""
    module.__class__ = types.ModuleType  # from now on an ordinary module: no recursion
    spec = module.__spec__
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)  # as a failed import does: the next import tries again
        raise
    parent, _, child = spec.name.rpartition(".")
    if parent and parent in sys.modules:
        setattr(sys.modules[parent], child, module)


def defer(name: str) -> bool:
    """Register ``name`` to run on first attribute access; False when it is already loaded or absent."""
    if name in sys.modules:
        return False
    spec = _find_without_importing(name)
    if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
        return False
    module = importlib.util.module_from_spec(spec)  # sets __spec__, __path__, __file__, __loader__
    module.__class__ = _Deferred
    sys.modules[name] = module
    return True


def _find_without_importing(name: str) -> Optional[importlib.machinery.ModuleSpec]:
    """The import spec of ``name``; a submodule's parent package is located, not imported."""
    parent, _, _ = name.rpartition(".")
    if not parent:
        return importlib.util.find_spec(name)
    if parent in sys.modules:
        return None  # the parent ran already, and with it (most likely) the submodule
    parent_spec = importlib.util.find_spec(parent)
    if parent_spec is None or not parent_spec.submodule_search_locations:
        return None
    return importlib.machinery.PathFinder.find_spec(name, list(parent_spec.submodule_search_locations))


def defer_all() -> None:
    """Defer every module in ``DEFERRED``."""
    for name in DEFERRED:
        defer(name)


__all__ = ["DEFERRED", "defer", "defer_all"]
