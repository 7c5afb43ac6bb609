"""ampconv.core.graphs: the graph list of a model, and the scope that walks it once per conversion."""

from __future__ import annotations

import contextlib
import functools
import warnings

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx.backend.test.case import node as node_cases

import ampconv
from ampconv import converter
from ampconv.core import graphs
from helpers import model_from_text, save

CONTROL_FLOW = ("If", "Loop", "Scan")


@functools.lru_cache(maxsize=1)
def _control_flow_cases():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        every = node_cases.collect_testcases()  # unfiltered: see test_schema_ties
    cases = [c for c in every if any(n.op_type in CONTROL_FLOW for n in c.model.graph.node)]
    assert len(cases) >= 10, "onnx's corpus holds If, Loop and Scan cases"
    return cases


NESTED = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, bool c) => (float[2] y) {
    y = If(c) <then_branch = t () => (float[2] a) {
                  a = If(c) <then_branch = tt () => (float[2] p) { p = Relu(x) },
                             else_branch = te () => (float[2] q) { q = Neg(x) }>
               },
               else_branch = e () => (float[2] b) { b = Abs(x) }>
}
"""


def test_all_graphs_matches_onnx_ir_order_on_the_corpus_control_flow_models():
    for case in _control_flow_cases():
        model = ir.serde.deserialize_model(case.model)
        assert graphs.all_graphs(model) == list(model.graphs()), case.name


def test_all_graphs_nested_if_is_depth_first():
    model = ir.serde.deserialize_model(model_from_text(NESTED))
    names = [g.name for g in graphs.all_graphs(model)]
    assert names == ["g", "t", "tt", "te", "e"]
    assert graphs.all_graphs(model) == list(model.graphs())


def test_subgraphs_of_a_node_without_graph_attributes_is_empty():
    model = ir.serde.deserialize_model(model_from_text(NESTED))
    outer_if = next(iter(model.graph))
    assert [g.name for g in graphs.subgraphs_of(outer_if)] == ["t", "e"]
    relu = next(iter(graphs.all_graphs(model)[2]))
    assert graphs.subgraphs_of(relu) == []


def _add_if(model: ir.Model) -> None:
    """Append an If node whose branch is a new graph (what no conversion step does)."""
    cond = model.graph.inputs[1]
    branch = ir.Graph([], [], nodes=[], name="added")
    model.graph.append(ir.Node("", "If", [cond], [ir.AttrGraph("then_branch", branch),
                                                   ir.AttrGraph("else_branch", branch)], num_outputs=0))


def test_fixed_graph_list_reuses_the_walk_made_on_entry():
    model = ir.serde.deserialize_model(model_from_text(NESTED))
    with graphs.fixed_graph_list(model):
        first = graphs.all_graphs(model)
        first.clear()  # callers get a copy: clearing it changes nothing for the next caller
        _add_if(model)
        inside = [g.name for g in graphs.all_graphs(model)]
    after = [g.name for g in graphs.all_graphs(model)]
    assert inside == ["g", "t", "tt", "te", "e"]  # the scope's contract: nothing is added inside it
    assert after == inside + ["added", "added"]  # outside it, every call walks again


def test_fixed_graph_list_is_per_model_and_nests():
    one = ir.serde.deserialize_model(model_from_text(NESTED))
    other = ir.serde.deserialize_model(model_from_text(NESTED))
    with graphs.fixed_graph_list(one):
        with graphs.fixed_graph_list(one):  # nested: shares the outer walk
            _add_if(one)
        assert len(graphs.all_graphs(one)) == 5  # still the outer scope's list
        _add_if(other)
        assert len(graphs.all_graphs(other)) == 7  # another model is walked every time
    assert len(graphs.all_graphs(one)) == 7  # the scope is gone: walked again, the added If seen
    assert graphs._META_KEY not in one.meta and graphs._META_KEY not in other.meta


def test_fixed_graph_list_leaves_no_entry_after_an_exception():
    model = ir.serde.deserialize_model(model_from_text(NESTED))
    with pytest.raises(RuntimeError):
        with graphs.fixed_graph_list(model):
            raise RuntimeError("boom")
    assert graphs._META_KEY not in model.meta


@pytest.mark.parametrize("level", ["O2", "O3"])
def test_a_conversion_never_changes_the_graph_list_it_fixed(tmp_path, monkeypatch, level):
    """The premise of the converter's scope: its steps add and remove no graph-holding node."""
    real = graphs.fixed_graph_list
    checked = []

    def verified(model):
        with real(model):
            on_entry = graphs.walk_graphs(model)
            yield
        assert graphs.walk_graphs(model) == on_entry
        checked.append(len(on_entry))

    monkeypatch.setattr(converter, "fixed_graph_list", contextlib.contextmanager(verified))
    converted = 0
    for case in _control_flow_cases()[:12]:
        src = save(case.model, tmp_path / f"{case.name}.onnx")
        try:
            ampconv.convert(src, tmp_path / f"{case.name}.out.onnx", ampconv.Config(level=level, overwrite=True))
        except ampconv.AmpconvError:
            continue  # a refused model is another test's business
        converted += 1
    assert converted >= 6
    assert len(checked) >= converted and max(checked) > 1


def test_the_nested_if_model_converts_and_loads(tmp_path):
    src = save(model_from_text(NESTED), tmp_path / "nested.onnx")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(level="O3", overwrite=True))
    assert report.output is not None
    onnx.checker.check_model(onnx.load(str(tmp_path / "out.onnx")), full_check=True)


CHAIN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
    a = Relu (x)
    b = Neg (a)
    c = Abs (b)
    y = Sqrt (c)
}"""


def test_bounded_uses_walks_downstream_through_accepted_nodes_only_depth_deep():
    from ampconv.core.graphs import bounded_uses

    model = ir.serde.deserialize_model(onnx.parser.parse_model(CHAIN))
    x = model.graph.inputs[0]
    everything = [use.node.op_type for use in bounded_uses([x], lambda node: True, 10)]
    assert everything == ["Relu", "Neg", "Abs", "Sqrt"]
    assert [use.node.op_type for use in bounded_uses([x], lambda node: True, 2)] == ["Relu", "Neg"]
    # A node the walk may not pass through is yielded, and ends the walk there.
    assert [use.node.op_type for use in bounded_uses([x], lambda node: node.op_type != "Neg", 10)] == ["Relu", "Neg"]


def test_bounded_sources_walks_upstream_through_accepted_producers_only():
    from ampconv.core.graphs import bounded_sources

    model = ir.serde.deserialize_model(onnx.parser.parse_model(CHAIN))
    y = model.graph.outputs[0]
    found = [(producer.op_type, source.name) for producer, source in bounded_sources(y, lambda node: True, 10)]
    assert found == [("Sqrt", "c"), ("Abs", "b"), ("Neg", "a"), ("Relu", "x")]
    stopped = [source.name for _, source in bounded_sources(y, lambda node: node.op_type != "Abs", 10)]
    assert stopped == ["c"]  # Abs is not passed: nothing above it
    assert [s.name for _, s in bounded_sources(y, lambda node: True, 1)] == ["c"]
