"""The shape of the code under ``ampconv/``: long functions, long parameter lists, import cycles, lazy imports.

``python scripts/code_shape.py`` prints the figures; ``tests/project/test_code_shape.py``
holds them to the limits (docs/architecture.md, "Code shape"):

- no function over ``MAX_LINES`` lines or ``MAX_PARAMS`` parameters (``self``
  and ``cls`` not counted, ``*args``/``**kwargs`` counted);
- no import cycle among ampconv's modules, counting imports made inside
  functions (a cycle an in-function import hides is still a cycle);
- imports of ampconv modules inside functions only in ``LAZY_MODULES``: the
  modules ``import ampconv`` and the CLI load at start-up, which defer what
  would load numpy, onnx or onnx-ir;
- units depend one way (``tests/project/test_layers.py``): a unit is a subpackage of
  ampconv or a top-level module; ``UNIT_LAYERS`` lists them from the top
  down, and every import (in-function ones counted) goes to a unit of the same
  layer or a lower one, with no cycle between units (docs/architecture.md,
  "Units and the one direction between them", draws the same table).
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections import defaultdict

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAX_LINES, MAX_PARAMS = 80, 7
LAZY_MODULES = frozenset({
    "ampconv", "ampconv.config", "ampconv.options.groups", "ampconv.writing.outputs", "ampconv.report",
    "ampconv.validation", "ampconv.validation.criteria", "ampconv.report.html",
})

# The units of ``ampconv``, from the top layer down: a unit imports only units of its own layer or below.
UNIT_LAYERS = (
    ("interface", ("ampconv", "__main__", "config", "converter", "inmemory")),
    ("pipeline", ("pipeline", "report")),
    ("calibration", ("calibration",)),
    ("validation", ("validation",)),
    ("checks", ("checks",)),
    ("rewrite", ("passes",)),
    ("planner", ("plan",)),
    ("numerics", ("numerics",)),
    ("policy", ("policy",)),
    ("files", ("writing", "reading")),
    ("runtime", ("runtime",)),
    ("foundation", ("options", "tensors", "core", "errors")),
)


def unit_of(module: str) -> str:
    """The unit of a module: its subpackage under ampconv, its own name for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def unit_edges(package: str = "ampconv") -> dict:
    """``{unit: {imported unit: [where, ...]}}`` over every import of ``package``, in-function ones counted."""
    edges: dict = defaultdict(lambda: defaultdict(list))
    for path in sorted((ROOT / package).rglob("*.py")):
        module = _module(path)
        for node in ast.walk(ast.parse(path.read_text())):
            for target in _targets(node, module):
                if unit_of(target) != unit_of(module):
                    edges[unit_of(module)][unit_of(target)].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return edges


def measure_units(package: str = "ampconv", layers=UNIT_LAYERS) -> dict:
    """Cycles between units, imports that go up the layers, and units no layer names."""
    rank = {unit: index for index, (_, units) in enumerate(layers) for unit in units}
    edges = unit_edges(package)
    found = {path.stem if path.stem != "__init__" else package for path in (ROOT / package).glob("*.py")}
    found |= {path.parent.name for path in (ROOT / package).glob("*/__init__.py")}
    upward = [(a, b, wheres[0]) for a, targets in sorted(edges.items()) for b, wheres in sorted(targets.items())
              if a in rank and b in rank and rank[b] < rank[a]]
    return {"cycles": _cycles({a: set(targets) for a, targets in edges.items()}), "upward": upward,
            "unplaced": sorted(found - set(rank)), "edges": edges}


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
    units = measure_units()
    print(f"unit cycles: {len(units['cycles'])}, imports up the layers: {len(units['upward'])}, "
          f"units without a layer: {len(units['unplaced'])}")
    for key in ("cycles", "upward", "unplaced"):
        for entry in units[key]:
            print(f"  unit {key}: {entry}")
