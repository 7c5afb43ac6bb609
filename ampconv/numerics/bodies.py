"""Values computed inside If, Loop and Scan bodies, made visible to onnxruntime.

onnxruntime returns only main-graph outputs, so calibration statistics and
localization could not see a node inside a body: a voice-activity model that
keeps its network inside an ``If`` was one blind spot, a greedy decoder's
``Loop`` another. ``expose_body_values`` routes such values out of a copy of
the model:

- **Loop, Scan**: the value becomes an extra body output, i.e. an extra scan
  output; the node's new output stacks it over every iteration (axis 0), and
  the main graph returns that.
- **If**: the value becomes an extra output of the branch that computes it;
  the other branch returns an empty tensor of the same element type in that
  slot. A sample on which the branch did not run gives an empty array, which
  every reader skips.

Nesting composes: a value inside a Loop inside an If leaves the Loop stacked,
then the If. ``walk`` gives the order localization reads nodes in: a node's
body nodes come before the node itself (they run while it runs).

A copy whose exposed values onnxruntime cannot return (a scan output whose
shape changes between iterations) fails when it runs; callers then fall back
to the main graph alone and say so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.core.graphs import subgraphs_of

# Ops whose body outputs past the loop-carried ones are stacked over iterations.
_STACKING = {"Loop": "body", "Scan": "body"}
_BRANCHES = ("then_branch", "else_branch")
# The suffix of the main-graph output that carries a body value out.
_SUFFIX = "__ampconv_body"


def walk(graph: ir.Graph) -> Iterator[ir.Node]:
    """Every node of ``graph`` and of the bodies inside it, a node's body nodes first (they run within it)."""
    for node in graph:
        for body in subgraphs_of(node):
            yield from walk(body)
        yield node


def body_values(model: ir.Model, keep: Callable[[ir.Value], bool]) -> dict[str, ir.Value]:
    """Named outputs of nodes inside bodies (at any depth) that ``keep`` accepts, by name."""
    found = {}
    for node in model.graph:
        for body in subgraphs_of(node):
            for inner in walk(body):
                for value in inner.outputs:
                    if value.name and keep(value):
                        found.setdefault(value.name, value)
    return found


def expose_body_values(model: ir.Model, names) -> dict[str, str]:
    """Route the body values named in ``names`` to new main-graph outputs of ``model`` (edited in place).

    Returns ``{value name: main-graph output name}`` for every value routed
    out (see the module docstring for what a Loop, Scan or If does to it).
    Values already main-graph outputs, and names found in no body, are left
    out. Needs element types on the values (``modelio.ensure_types``).
    """
    wanted = set(names)
    exposed: dict[str, str] = {}
    for node in list(model.graph):
        for name, value in _route_out(node, wanted).items():
            model.graph.outputs.append(value)
            exposed[name] = value.name
    return exposed


def _route_out(node: ir.Node, wanted: set) -> dict[str, ir.Value]:
    """New outputs of ``node`` carrying the wanted values of its bodies: ``{value name: new output}``."""
    if node.op_type in _STACKING and is_default(node):
        body = node.attributes.get(_STACKING[node.op_type])
        if body is None or body.type != ir.AttributeType.GRAPH:
            return {}
        inner = _collect(body.value, wanted)
        if not inner:
            return {}
        for value in inner.values():
            body.value.outputs.append(value)
        _extend_scan_attributes(node, len(inner))
        return _new_outputs(node, inner)
    if node.op_type == "If" and is_default(node):
        branches = [node.attributes.get(key) for key in _BRANCHES]
        if any(b is None or b.type != ir.AttributeType.GRAPH for b in branches):
            return {}
        found = [_collect(b.value, wanted) for b in branches]
        names = list(dict.fromkeys(list(found[0]) + list(found[1])))
        if not names:
            return {}
        for branch, values in zip(branches, found):
            for name in names:
                other = found[1] if values is found[0] else found[0]
                branch.value.outputs.append(values.get(name) or _empty_like(branch.value, other[name]))
        return _new_outputs(node, {name: (found[0].get(name) or found[1][name]) for name in names})
    return {}


def _collect(graph: ir.Graph, wanted: set) -> dict[str, ir.Value]:
    """The wanted values computed in ``graph``: its own nodes' outputs, and what its nested bodies route up."""
    values: dict[str, ir.Value] = {}
    present = {v.name for v in graph.outputs}
    for node in list(graph):
        for name, value in _route_out(node, wanted).items():
            values[name] = value
        for value in node.outputs:
            if value.name in wanted and value.dtype is not None:
                # A body output already (a Loop's carried state): a copy leaves as well, every iteration.
                values.setdefault(value.name, _copy_of(graph, value) if value.name in present else value)
    return values


def _copy_of(graph: ir.Graph, value: ir.Value) -> ir.Value:
    """An Identity of ``value`` appended to ``graph``: a second name for a value that is already an output."""
    node = ir.Node("", "Identity", [value], num_outputs=1)
    graph.append(node)
    output = node.outputs[0]
    output.name = f"{value.name}{_SUFFIX}_copy"
    output.type = ir.TensorType(value.dtype)
    return output


def _new_outputs(node: ir.Node, carried: dict[str, ir.Value]) -> dict[str, ir.Value]:
    """Grow ``node`` by one output per carried value (same element type; the shape is left to the runtime)."""
    start = len(node.outputs)
    node.resize_outputs(start + len(carried))
    routed = {}
    for (name, value), output in zip(carried.items(), node.outputs[start:]):
        output.name = f"{name}{_SUFFIX}_{node.name or node.op_type}_{start}"
        output.type = ir.TensorType(value.dtype)
        routed[name] = output
    return routed


def _empty_like(graph: ir.Graph, value: ir.Value) -> ir.Value:
    """An empty tensor of ``value``'s element type, made in ``graph`` (the branch that does not compute it)."""
    dtype = value.dtype
    array = np.zeros((0,), dtype=dtype.numpy())
    constant = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(array))], num_outputs=1)
    graph.append(constant)
    output = constant.outputs[0]
    output.name = f"{value.name}{_SUFFIX}_empty"
    output.type = ir.TensorType(dtype)
    return output


def _extend_scan_attributes(node: ir.Node, count: int) -> None:
    """Scan's per-scan-output attributes need one entry per new scan output (axis 0, forward)."""
    if node.op_type != "Scan":
        return
    for key in ("scan_output_axes", "scan_output_directions"):
        attr = node.attributes.get(key)
        if attr is not None:
            node.attributes[key] = ir.AttrInt64s(key, list(attr.value) + [0] * count)
