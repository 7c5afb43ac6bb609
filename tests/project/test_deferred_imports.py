"""ampconv.core.deferred_imports: sympy loads only when used, and then completely."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from ampconv.core import deferred_imports


def _run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    ).stdout.split()


def test_converting_a_model_never_imports_sympy(tmp_path):
    from helpers import model_from_text, save

    src = save(model_from_text("""
        <ir_version: 8, opset_import: ["" : 17]>
        g (float[4, 4] x) => (float[4, 4] y) { x2 = Identity(x) h = MatMul(x, x2) y = Relu(h) }
    """), tmp_path / "m.onnx")
    out = _run(f"""
        import sys, ampconv
        ampconv.convert({str(src)!r}, {str(tmp_path / 'o.onnx')!r})
        print('sympy.core' in sys.modules, 'onnx_ir' in sys.modules)
    """)
    assert out == ["False", "True"]


def test_symbolic_arithmetic_loads_the_real_modules():
    out = _run("""
        import sys, types, ampconv.converter
        import onnx_ir as ir
        before = 'sympy.core' in sys.modules
        total = ir.SymbolicDim('N') + 1
        import sympy
        from sympy import Symbol
        print(before, total, type(sympy) is types.ModuleType, Symbol('x') * 2, ir._symbolic_shapes.__name__)
    """)
    assert out == ["False", "N", "+", "1", "True", "2*x", "onnx_ir._symbolic_shapes"]


def test_star_import_and_version_load_the_real_module():
    out = _run("""
        import ampconv.converter
        import sympy
        version = sympy.__version__
        from sympy import *  # noqa: F403
        print(bool(version), Symbol('z') + 1)
    """)
    assert out == ["True", "z", "+", "1"]


def test_a_module_already_loaded_or_missing_is_left_alone():
    assert deferred_imports.defer("json") is False  # already imported by pytest
    assert deferred_imports.defer("no_such_module_ampconv_test") is False
    assert "no_such_module_ampconv_test" not in sys.modules


def test_a_deferred_module_that_fails_is_not_left_half_loaded(tmp_path, monkeypatch):
    (tmp_path / "ampconv_broken_mod.py").write_text("VALUE = 1\nraise RuntimeError('broken on purpose')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert deferred_imports.defer("ampconv_broken_mod") is True
        import ampconv_broken_mod  # the placeholder: nothing ran yet

        with pytest.raises(RuntimeError, match="broken on purpose"):
            getattr(ampconv_broken_mod, "VALUE")  # noqa: B009 - the lookup is what runs the module
        assert "ampconv_broken_mod" not in sys.modules  # a later import tries again, as after any failed import
    finally:
        sys.modules.pop("ampconv_broken_mod", None)
