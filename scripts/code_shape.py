"""The shape of the code under ``ampconv/``: long functions, long parameter lists, import cycles, lazy imports.

``python scripts/code_shape.py`` prints the figures; ``tests/test_code_shape.py``
holds them to the limits (docs/architecture.md, "Code shape"):

- no function over ``MAX_LINES`` lines or ``MAX_PARAMS`` parameters (``self``
  and ``cls`` not counted, ``*args``/``**kwargs`` counted);
- no import cycle among ampconv's modules, counting imports made inside
  functions (a cycle an in-function import hides is still a cycle);
- imports of ampconv modules inside functions only in ``LAZY_MODULES``: the
  modules ``import ampconv`` and the CLI load at start-up, which defer what
  would load numpy, onnx or onnx-ir.
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES, MAX_PARAMS = 80, 7
LAZY_MODULES = frozenset({
    "ampconv", "ampconv.config", "ampconv.option_groups", "ampconv.outputs", "ampconv.report", "ampconv.validate",
    "ampconv.validate.criteria", "ampconv.htmlreport",
})


def _module(path: pathlib.Path) -> str:
    name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _targets(node, module: str) -> list[str]:
    """The ampconv modules an import statement loads (a package's submodule when it names one)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("ampconv")]
    if not isinstance(node, ast.ImportFrom) or not node.module or not node.module.startswith("ampconv"):
        return []
    found = []
    for alias in node.names:
        candidate = f"{node.module}.{alias.name}"
        parts = pathlib.Path(ROOT, *candidate.split("."))
        found.append(candidate if parts.with_suffix(".py").exists() or parts.is_dir() else node.module)
    return found


def measure(package: str = "ampconv") -> dict:
    """Long functions, long parameter lists, in-function imports and import cycles of ``package``."""
    long_functions, many_params, lazy = [], [], []
    edges: dict[str, set] = defaultdict(set)
    for path in sorted((ROOT / package).rglob("*.py")):
        module = _module(path)
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            edges[module].update(_targets(node, module))
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
            lines = node.end_lineno - node.lineno + 1
            args = node.args
            params = [a for a in args.posonlyargs + args.args + args.kwonlyargs if a.arg not in ("self", "cls")]
            count = len(params) + (args.vararg is not None) + (args.kwarg is not None)
            if lines > MAX_LINES:
                long_functions.append((lines, where))
            if count > MAX_PARAMS:
                many_params.append((count, where))
            lazy.extend((module, f"{where}: line {sub.lineno}") for sub in ast.walk(node) if _targets(sub, module))
    return {"long_functions": long_functions, "many_params": many_params, "lazy_imports": lazy,
            "cycles": _cycles(edges)}


def _cycles(edges: dict) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return found


if __name__ == "__main__":
    figures = measure()
    print(f"functions over {MAX_LINES} lines: {len(figures['long_functions'])}")
    print(f"functions over {MAX_PARAMS} parameters: {len(figures['many_params'])}")
    print(f"import cycles: {len(figures['cycles'])}")
    modules = sorted({m for m, _ in figures["lazy_imports"]})
    print(f"in-function ampconv imports: {len(figures['lazy_imports'])}, in {', '.join(modules)}")
    for key in ("long_functions", "many_params", "cycles"):
        for entry in figures[key]:
            print(f"  {key}: {entry}")
