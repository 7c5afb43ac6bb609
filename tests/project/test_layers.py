"""Units depend one way (issue 28): no cycle between units, every import goes down the documented layers.

A unit is a subpackage of ``ampconv`` or a top-level module; imports made inside
functions count like any other. ``scripts/code_shape.py`` holds the layers
(``UNIT_LAYERS``); docs/architecture.md draws the same table.
"""

import importlib.util
import pathlib
import re

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("code_shape", _ROOT / "scripts" / "code_shape.py")
code_shape = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(code_shape)


def test_no_cycle_between_units_counting_imports_inside_functions():
    assert code_shape.measure_units()["cycles"] == []


def test_every_import_goes_down_the_layers():
    assert code_shape.measure_units()["upward"] == []


def test_every_unit_has_a_layer():
    assert code_shape.measure_units()["unplaced"] == []


def test_the_named_directions_hold():
    """The joins issue 28 cut: numerics under both calibration and validation; the planner under its inputs'
    builders; config's option groups under the planner; validation reaches neither calibration nor the
    converter's checks (it asks the judges of a file, ``loadcheck``); the figures read no validation."""
    edges = code_shape.measure_units()["edges"]
    never = [("numerics", "calibration"), ("numerics", "validation"), ("numerics", "plan"), ("plan", "calibration"),
             ("plan", "config"), ("options", "plan"), ("options", "validation"), ("validation", "calibration"),
             ("core", "validation"), ("options", "config"), ("validation", "checks"),
             ("calibration", "config"), ("runtime", "reading"), ("reading", "writing")]
    units = {unit for _, layer in code_shape.UNIT_LAYERS for unit in layer}
    assert {unit for pair in never for unit in pair} <= units  # a renamed unit cannot leave a rule vacuous
    for importer, imported in never:
        assert imported not in edges.get(importer, {}), (importer, imported, edges[importer][imported])
    # The GPU figures (a module of the pipeline unit, which builds on validation as a whole) read no validation.
    figures = (_ROOT / "ampconv" / "pipeline" / "figures.py").read_text()
    assert "ampconv.validation" not in figures


def _documented_layers():
    text = (_ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Units and the one direction between them", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    layers = []
    for line in block.splitlines():
        match = re.match(r"^\s*(\w+)\s*:\s*(.+?)\s*$", line)
        if match:
            layers.append((match.group(1), tuple(u.strip() for u in match.group(2).split(","))))
    return layers


def test_the_docs_draw_the_same_layers():
    documented = _documented_layers()
    assert [name for name, _ in documented] == [name for name, _ in code_shape.UNIT_LAYERS]
    for (name, units), (_, expected) in zip(documented, code_shape.UNIT_LAYERS):
        assert sorted(units) == sorted(expected), name


def test_the_unit_measure_sees_what_it_forbids(tmp_path, monkeypatch):
    """Negative: an import up the layers, made inside a function, is found both as upward and as a cycle."""
    package = tmp_path / "ampconv"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "a.py").write_text("def late():\n    from ampconv import high\n    return high\n")
    (package / "high.py").write_text("from ampconv.low import a\n")
    (package / "stray.py").write_text("")
    monkeypatch.setattr(code_shape, "ROOT", tmp_path)
    figures = code_shape.measure_units(layers=(("top", ("ampconv", "high")), ("bottom", ("low",))))
    assert figures["cycles"] == [["high", "low"]]
    assert [(a, b) for a, b, _ in figures["upward"]] == [("low", "high")]
    assert figures["unplaced"] == ["stray"]
