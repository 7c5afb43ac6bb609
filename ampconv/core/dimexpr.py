"""Symbolic dimensions as exporters write them, evaluated from the sizes a user gives.

torch's dynamo exporter names a decode step's present cache length
``past_sequence_length + 1`` or ``s0 + s1``; onnxruntime-genai's builder
writes ``total_sequence_length``. A figure counted per step needs these
evaluated from the symbols given (``--shape past_sequence_length:512``), not
read as an unknown dimension of size 1. Only integer arithmetic on names and
numbers is read (``+ - * // %`` and parentheses); anything else is not an
expression and counts as one unknown symbol.
"""

from __future__ import annotations

import ast
import functools
import operator
from typing import Callable, Dict, FrozenSet, Mapping, Optional, Tuple

_OPERATORS: Dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Div: operator.floordiv,
}


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Optional[ast.AST]:
    """The expression tree of ``text`` when it is integer arithmetic on names and numbers, else None."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        allowed = (
            isinstance(node, (ast.BinOp, ast.Name, ast.Load, ast.USub, ast.UAdd))
            or type(node) in _OPERATORS
            or (isinstance(node, ast.Constant) and isinstance(node.value, int))
            or (isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)))
        )
        if not allowed:
            return None
    return tree


def symbols_of(dim) -> FrozenSet[str]:
    """The symbol names a dimension uses (the dimension's own text when it is no expression)."""
    if isinstance(dim, int) or dim is None:
        return frozenset()
    text = str(dim)
    tree = _parse(text)
    if tree is None:
        return frozenset({text})
    return frozenset(node.id for node in ast.walk(tree) if isinstance(node, ast.Name))


def evaluate_dim(dim, sizes: Mapping[str, int], unset: int = 1) -> int:
    """The size of ``dim`` (a number, a symbol, or an expression of symbols) with symbols from ``sizes``.

    A symbol ``sizes`` does not give counts ``unset``; so does a dimension with no name.
    """
    if isinstance(dim, int):
        return dim
    if dim is None or str(dim) in ("", "None"):
        return unset
    text = str(dim)
    if text in sizes:
        return int(sizes[text])
    tree = _parse(text)
    if tree is None:
        return unset
    value = _eval(tree, sizes, unset)
    return max(int(value), 0)


def _eval(node: ast.AST, sizes: Mapping[str, int], unset: int) -> int:
    if isinstance(node, ast.Constant):
        return int(node.value)
    if isinstance(node, ast.Name):
        return int(sizes.get(node.id, unset))
    if isinstance(node, ast.UnaryOp):
        inner = _eval(node.operand, sizes, unset)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, sizes, unset), _eval(node.right, sizes, unset)
        if isinstance(node.op, (ast.FloorDiv, ast.Div, ast.Mod)) and right == 0:
            return unset
        return _OPERATORS[type(node.op)](left, right)
    return unset


def unset_symbols(dims, sizes: Mapping[str, int]) -> Tuple[str, ...]:
    """The symbols among ``dims`` that ``sizes`` does not give, sorted (each counted as ``unset``)."""
    missing = set()
    for dim in dims:
        missing |= {s for s in symbols_of(dim) if s not in sizes}
    return tuple(sorted(missing))


__all__ = ["evaluate_dim", "symbols_of", "unset_symbols"]
