"""The shape of the code under ``ampconv/``: long functions, long parameter lists, import cycles, lazy imports.

``python scripts/code_shape.py`` prints the figures; ``tests/project/test_code_shape.py``
holds them to the limits (docs/architecture.md, "Code shape"):

- no function over ``MAX_LINES`` lines or ``MAX_PARAMS`` parameters (``self``
  and ``cls`` not counted, ``*args``/``**kwargs`` counted);
- no import cycle among ampconv's modules, counting imports made inside
  functions (a cycle an in-function import hides is still a cycle);
- imports of ampconv modules inside functions only in ``LAZY_MODULES``: the
  modules ``import ampconv`` and the CLI load at start-up, which defer what
  would load numpy, onnx or onnx-ir, and the converter, which defers the
  release step and the search (with the validation package under them) that
  only a conversion with evidence runs;
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
    "ampconv.validation", "ampconv.validation.criteria", "ampconv.report.html", "ampconv.converter",
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


# Where an option of a conversion or a validation may be declared: the records' modules and the CLI.
OPTION_RECORD_MODULES = ("ampconv/config.py", "ampconv/options", "ampconv/validation/options.py")
OPTION_CLI_PACKAGE = "ampconv_cli"


def option_declarations(root: pathlib.Path | None = None) -> dict:
    """``{option name: [where, ...]}``: every place an option's name is declared.

    A place is a field written in an option record's class (``Config`` or a
    class named ``...Options`` in ``OPTION_RECORD_MODULES``), an ``Option(...)``
    declaration, a click option or argument of the CLI (its parameter name),
    or a key the CLI writes into a dict literal when it builds a record. A
    value passed to a record by keyword is a use, not a declaration. An option
    declared once has one place.
    """
    root = root or ROOT
    found: dict = defaultdict(list)
    paths = []
    for entry in OPTION_RECORD_MODULES:
        path = root / entry
        paths += sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and _is_record(node):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        found[item.target.id].append(f"{path.relative_to(root)}:{item.lineno} {node.name}")
            elif _called(node) == "Option" and node.args and isinstance(node.args[0], ast.Constant):
                found[node.args[0].value].append(f"{path.relative_to(root)}:{node.lineno} Option")
    for path in sorted((root / OPTION_CLI_PACKAGE).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            if _called(node) in ("option", "argument"):
                name = _click_name(node)
                if name:
                    found[name].append(f"{where} click")
            elif isinstance(node, ast.Dict):
                for key in node.keys:
                    if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value in found:
                        found[key.value].append(f"{where} dict")
    return dict(found)


def _is_record(node: ast.ClassDef) -> bool:
    """An option record: ``Config`` or an ``...Options`` class, a dataclass or an ``option_record``."""
    named_as_record = node.name == "Config" or node.name.endswith("Options")
    return named_as_record and any("dataclass" in ast.unparse(d) or "option_record" in ast.unparse(d)
                                   for d in node.decorator_list)


def _called(node) -> str:
    """The name a call calls (``click.option`` -> ``option``), '' for anything else."""
    if not isinstance(node, ast.Call):
        return ""
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _click_name(node: ast.Call) -> str:
    """A click option's parameter name: the identifier among its strings, else its longest flag's."""
    texts = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    plain = [t for t in texts if not t.startswith("-")]
    if plain:
        return plain[0]
    flags = [t.split("/")[0] for t in texts]
    return max(flags, key=len).lstrip("-").replace("-", "_") if flags else ""


def repeated_options(root: pathlib.Path | None = None) -> dict:
    """The options declared in more than one place (``option_declarations``)."""
    return {name: wheres for name, wheres in option_declarations(root).items() if len(wheres) > 1}


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
    repeated = repeated_options()
    print(f"option fields declared in more than one place: {len(repeated)}")
    for name, wheres in sorted(repeated.items()):
        print(f"  {name}: {len(wheres)} places")
    units = measure_units()
    print(f"unit cycles: {len(units['cycles'])}, imports up the layers: {len(units['upward'])}, "
          f"units without a layer: {len(units['unplaced'])}")
    for key in ("cycles", "upward", "unplaced"):
        for entry in units[key]:
            print(f"  unit {key}: {entry}")
