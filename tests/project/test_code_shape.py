"""The code's shape holds (issue 21): short functions, short parameter lists, no import cycle, lazy imports in one place."""

import importlib.util
import pathlib

_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "code_shape.py"
_spec = importlib.util.spec_from_file_location("code_shape", _SCRIPT)
code_shape = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(code_shape)


def test_no_function_is_over_80_lines_or_7_parameters():
    figures = code_shape.measure()
    assert figures["long_functions"] == [], figures["long_functions"]
    assert figures["many_params"] == [], figures["many_params"]


def test_no_import_cycle_counting_imports_inside_functions():
    assert code_shape.measure()["cycles"] == []


def test_lazy_imports_live_only_in_the_start_up_modules():
    outside = [where for module, where in code_shape.measure()["lazy_imports"] if module not in code_shape.LAZY_MODULES]
    assert outside == [], outside


def test_the_measure_sees_what_it_forbids(tmp_path, monkeypatch):
    """Negative: a long function, a long parameter list, a cycle and a stray lazy import are all found."""
    package = tmp_path / "ampconv"
    package.mkdir()
    (package / "__init__.py").write_text("")
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    (package / "a.py").write_text(
        "import ampconv.b\n\n\ndef big(a, b, c, d, e, f, g, h):\n" + body + "\n\n\n"
        "def lazy():\n    from ampconv import b\n    return b\n"
    )
    (package / "b.py").write_text("import ampconv.a\n")
    monkeypatch.setattr(code_shape, "ROOT", tmp_path)
    figures = code_shape.measure()
    assert [w for _, w in figures["long_functions"]] == ["ampconv/a.py:4 big"]
    assert [w for _, w in figures["many_params"]] == ["ampconv/a.py:4 big"]
    assert figures["cycles"] == [["ampconv.a", "ampconv.b"]]
    assert [m for m, _ in figures["lazy_imports"]] == ["ampconv.a"]


def test_the_cli_holds_the_same_function_limits():
    """The command bodies take their option groups as one mapping (``ampconv_cli.options.OptionGroup``)."""
    figures = code_shape.measure("ampconv_cli")
    assert figures["long_functions"] == [], figures["long_functions"]
    assert figures["many_params"] == [], figures["many_params"]


def test_an_option_is_declared_in_one_place():
    """Issue 36: a field, its check, its docs and its flag come from one ``Option``; at most 5 names repeat."""
    repeated = code_shape.repeated_options()
    assert len(repeated) <= 5, repeated


def test_the_option_measure_sees_a_second_declaration(tmp_path, monkeypatch):
    """Negative: a Config field written again as a click option and in a builder's dict is three places."""
    (tmp_path / "ampconv" / "options").mkdir(parents=True)
    (tmp_path / "ampconv_cli").mkdir()
    (tmp_path / "ampconv" / "config.py").write_text(
        "import dataclasses\n\n\n@dataclasses.dataclass\nclass Config:\n    level: str = 'O2'\n    once: int = 0\n")
    (tmp_path / "ampconv_cli" / "opts.py").write_text(
        "import click\n\nflag = click.option('--level', help='x')\n\n\ndef build(p):\n    return {'level': p}\n")
    found = code_shape.repeated_options(tmp_path)
    assert list(found) == ["level"] and len(found["level"]) == 3, found
