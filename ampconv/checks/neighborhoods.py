"""The users'-session probe: each distinct neighbourhood of a model once, for onnxruntime's optimizers.

A user's ``InferenceSession(path)`` optimizes the graph at ORT_ENABLE_ALL
before it runs anything: fusions, layout changes, constant folding. A crash
or a refusal there comes from a pattern of a few neighbouring nodes (a float16
Transpose feeding a float16 MatMul kills onnxruntime 1.32's NCHWc transformer
with SIGSEGV), which the load-check probe (one node per signature, alone,
``ampconv.checks.probe``) cannot show. A session of the whole model costs what
a user's first load costs: on the 1.35 GB GPT sample 6 s and 1.6 GB (the CPU
provider folds every float16 weight's Cast into a float32 copy), on a
4,000-node float16 chain 3.7 s of CPU, on 40,000 nodes over a minute.

Models repeat themselves (layers, blocks, chains). Nodes whose neighbourhoods
up to ``RADIUS`` hops are alike (same ops, types, attributes, small constants
and weight shapes, wired alike: ``RADIUS`` rounds of Weisfeiler-Lehman colour
refinement) meet the same optimizer patterns of that size. The probe holds,
for each class, its first node and every node within ``RADIUS`` hops of it,
weights included (folding and fusions read them), a Constant node feeding
it, and graph inputs where its edges are cut; a value it computes that is
read outside it (or is the model's output) is a graph output.

What a loading probe proves: every pattern of at most ``RADIUS`` hops around
any node loads as it does in the model, but for a weight over
``BIG_WEIGHT_BYTES``, which the probe takes as an input (memory stays flat:
folded, such a weight would cost four times its bytes). A failing probe names its culprit by
bisection (``ampconv.checks.bisect``), and the culprit stands for every node
of its class (``UsersProbe.members``). The whole model is loaded instead
(``users_probe`` returns None) when it has functions or nodes with subgraphs
(their bodies read the enclosing graph), a value of unknown type, or when the
probe would hold more than ``WHOLE_FRACTION`` of its nodes.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Dict, Hashable, List, Optional, Sequence, Set

import numpy as np
import onnx
import onnx_ir as ir

from ampconv.checks.probe import signature
from ampconv.runtime.schema import normalize_domain
from ampconv.tensors import tensorsize
from ampconv.writing.outputs import data_file_name

# Hops of neighbourhood that make two nodes alike, and that the probe keeps around each class's node.
RADIUS = 3
# A probe holding more than this share of the model's nodes is no saving: the whole model is loaded
# (when all its weights fit one probe's budget).
WHOLE_FRACTION = 0.5
# Weight bytes one probe session may hold: onnxruntime folds each float16 weight's Cast into a
# float32 copy, so a session holds about three times its float16 weights (the mapped file pages and
# the copy). A neighbourhood with more (an embedding) is a probe of its own.
WEIGHT_BUDGET = 32 * 1024**2
# A weight larger than this enters its probe as a graph input of its type and shape, not as a
# constant: folded, it would take about four times its bytes (on the 1.35 GB GPT sample the tied
# 64 MB embedding's neighbourhood took 363 MB, every other probe at most 187 MB). The optimizers
# then see a computed tensor there: a failure that needs that weight constant is not seen.
BIG_WEIGHT_BYTES = 16 * 1024**2
# The probes' files, beside the staged model (so their references into its data file resolve).
PROBE_STEM = ".users-probe"


@dataclasses.dataclass
class UsersProbe:
    """The probe model; per probe node name, the names of the model's nodes of its class.

    ``fed``: how many weights over ``BIG_WEIGHT_BYTES`` it takes as graph inputs.
    """

    model: ir.Model
    members: Dict[str, List[str]]
    fed: int = 0

    @property
    def nodes(self) -> int:
        """How many nodes the probe holds."""
        return len(self.members)


def neighbourhood_classes(model: ir.Model, signatures: Optional[Sequence[Optional[Hashable]]] = None):
    """``(classes, predecessors)`` of the main graph's nodes, or None when a node has no signature.

    ``classes[i]`` is the class of node ``i`` (in graph order) after
    ``RADIUS`` rounds of refinement; ``predecessors[i]`` lists the indices of
    the nodes producing its inputs. A node has no signature when it holds a
    subgraph or reads a value of unknown type (``probe.signature``).
    """
    nodes = list(model.graph)
    opsets = {normalize_domain(d): v for d, v in model.opset_imports.items()}
    index = {node: i for i, node in enumerate(nodes)}
    # What the signature leaves out and optimizers read: weight shapes, and which values are the graph's own.
    own: Dict[ir.Value, Hashable] = {
        v: tuple(v.shape) for v in model.graph.initializers.values() if v.shape is not None}
    own.update({v: "in" for v in model.graph.inputs})
    own.update({v: "out" for v in model.graph.outputs})
    interned: Dict[Hashable, int] = {}
    base = np.empty(len(nodes), dtype=np.uint64)
    predecessors: List[List[int]] = []
    for i, node in enumerate(nodes):
        key = signatures[i] if signatures is not None else signature(node, opsets)
        if key is not None and key[0] == "cone":
            key = signature(node, opsets, cones=False)
        if key is None:
            return None
        context = tuple([own.get(v) for v in node.inputs] + [own.get(v) for v in node.outputs])
        base[i] = interned.setdefault((key, context), len(interned))
        predecessors.append([index[p] for p in (v.producer() for v in node.inputs if v is not None) if p in index])
    return _refine(base, predecessors), predecessors


def _refine(labels: np.ndarray, predecessors: List[List[int]]) -> np.ndarray:
    """``RADIUS`` rounds of colour refinement: a node's new colour mixes its own, its inputs' in order, its readers'."""
    count = len(labels)
    sources = np.array([p for preds in predecessors for p in preds], dtype=np.int64)
    targets = np.array([i for i, preds in enumerate(predecessors) for _ in preds], dtype=np.int64)
    slots = np.array([k for preds in predecessors for k in range(len(preds))], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for _ in range(RADIUS):
            mixed = _mix(labels)
            incoming = np.zeros(count, dtype=np.uint64)
            outgoing = np.zeros(count, dtype=np.uint64)
            # Inputs count in their order (a slot salt); readers as a multiset (a plain sum).
            np.add.at(incoming, targets, _mix(mixed[sources] + slots * np.uint64(0x9E3779B97F4A7C15)))
            np.add.at(outgoing, sources, _mix(mixed[targets] ^ np.uint64(0xD6E8FEB86659FD93)))
            labels = _mix(mixed * np.uint64(3) + _mix(incoming) * np.uint64(5) + _mix(outgoing) * np.uint64(7))
    return labels


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, elementwise: a 64-bit hash of each value."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64, copy=True)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def users_probes(
    model: ir.Model, signatures: Optional[Sequence[Optional[Hashable]]] = None, weight_budget: int = WEIGHT_BUDGET,
) -> Optional[List[UsersProbe]]:
    """The users'-session probes of ``model``; None when the whole model is to be loaded (module docstring).

    The class neighbourhoods are split into probes of at most
    ``weight_budget`` bytes of weights each (one neighbourhood over the budget
    is a probe of its own), each loaded in a session of its own.
    """
    if model.functions:
        return None
    found = neighbourhood_classes(model, signatures)
    if found is None:
        return None
    classes, predecessors = found
    nodes = list(model.graph)
    batches = _batches(nodes, classes, predecessors, weight_budget)
    covered = set().union(*batches) if batches else set()
    if len(covered) > WHOLE_FRACTION * len(nodes) and _weight_bytes(model) <= weight_budget:
        return None  # no saving, in nodes or in memory: the model itself is the probe
    members: Dict[int, List[str]] = {}
    for node, label in zip(nodes, classes.tolist()):
        members.setdefault(label, []).append(node.name)
    of_node = {node.name: members[label] for node, label in zip(nodes, classes.tolist())}
    probes = []
    for batch in batches:
        batch |= {i for j in list(batch) for i in predecessors[j] if _is_constant_node(nodes[i])}
        kept = [nodes[i] for i in sorted(batch)]
        graph = _ProbeGraph(kept)
        probe_model = graph.model(model)
        if probe_model is None:
            return None
        probes.append(UsersProbe(probe_model, {node.name: of_node[node.name] for node in kept}, graph.fed))
    return probes


def _batches(nodes: List[ir.Node], classes: np.ndarray, predecessors: List[List[int]], budget: int) -> List[Set[int]]:
    """The neighbourhoods (``RADIUS`` hops) of each class's first node, in batches of at most ``budget`` weight bytes.

    A neighbourhood inside the nodes already gathered adds nothing and is skipped.
    """
    successors: List[List[int]] = [[] for _ in predecessors]
    for i, preds in enumerate(predecessors):
        for p in preds:
            successors[p].append(i)
    _, firsts = np.unique(classes, return_index=True)
    covered: Set[int] = set()
    batches: List[Set[int]] = []
    weights: Dict[ir.Value, int] = {}
    batch_weights: Set[ir.Value] = set()
    for first in sorted(firsts.tolist()):
        if first in covered and all(j in covered for j in predecessors[first] + successors[first]):
            continue  # the class's node sits inside a gathered neighbourhood already, with its own neighbours
        ball, frontier = {first}, {first}
        for _ in range(RADIUS):
            frontier = {j for i in frontier for j in predecessors[i] + successors[i]} - ball
            ball |= frontier
        read = {v for i in ball for v in nodes[i].inputs if v is not None and v.const_value is not None
                and v.producer() is None and _bytes(v, weights) <= BIG_WEIGHT_BYTES}
        if batches and sum(_bytes(v, weights) for v in read | batch_weights) > budget:
            batches.append(set())
            batch_weights = set()
        if not batches:
            batches.append(set())
        batches[-1] |= ball
        batch_weights |= read
        covered |= ball
    return batches


def _bytes(value: ir.Value, known: Dict[ir.Value, int]) -> int:
    """The bytes of the weight ``value`` (cached in ``known``)."""
    if value not in known:
        try:
            known[value] = tensorsize.nbytes(value.const_value)
        except (TypeError, AttributeError, ValueError):
            known[value] = 0
    return known[value]


def probe_of(kept: Sequence[ir.Node], model: ir.Model) -> Optional[ir.Model]:
    """A model of the nodes ``kept`` (main-graph nodes of ``model``, in graph order) and the weights they read.

    Inputs computed outside ``kept`` are graph inputs; values read outside it,
    or that are ``model``'s outputs, are graph outputs. None when such a value
    has no type.
    """
    return _ProbeGraph(list(kept)).model(model)


def _weight_bytes(model: ir.Model) -> int:
    """The bytes of the main graph's weights (read from their metadata, not their data)."""
    known: Dict[ir.Value, int] = {}
    return sum(_bytes(v, known) for v in model.graph.initializers.values() if v.const_value is not None)


def _big(value: ir.Value) -> bool:
    """Whether the weight ``value`` holds more than ``BIG_WEIGHT_BYTES``."""
    return _bytes(value, {}) > BIG_WEIGHT_BYTES


def _is_constant_node(node: ir.Node) -> bool:
    return node.op_type == "Constant" and normalize_domain(node.domain) == "" and not node.inputs


class _ProbeGraph:
    """The probe's graph: ``kept`` nodes cloned, their cut inputs graph inputs, their outside-read outputs outputs."""

    def __init__(self, kept: List[ir.Node]) -> None:
        self.kept = kept
        self.copies: Dict[ir.Value, ir.Value] = {}
        self.inputs: List[ir.Value] = []
        self.initializers: List[ir.Value] = []
        self.fed = 0  # weights over BIG_WEIGHT_BYTES made graph inputs

    def model(self, original: ir.Model) -> Optional[ir.Model]:
        """The probe model, or None when a value it must declare has no type."""
        inside = set(self.kept)
        clones, outputs = [], []
        for node in self.kept:
            inputs = [self._input(v) if v is not None else None for v in node.inputs]
            if any(v is False for v in inputs):
                return None
            fresh = [self._copy(v) for v in node.outputs]
            clones.append(ir.Node(node.domain, node.op_type, inputs, attributes=list(node.attributes.values()),
                                  outputs=fresh, name=node.name, overload=node.overload))
            for value, copy in zip(node.outputs, fresh):
                if value.is_graph_output() or any(use.node not in inside for use in value.uses()):
                    if value.type is None:
                        return None
                    outputs.append(copy)
        graph = ir.Graph(self.inputs, outputs, nodes=clones, initializers=self.initializers,
                         opset_imports=dict(original.opset_imports), name="users_probe")
        return ir.Model(graph, ir_version=original.ir_version)

    def _copy(self, value: ir.Value) -> ir.Value:
        copy = ir.Value(name=value.name, type=value.type, shape=None if value.shape is None else ir.Shape(
            list(value.shape.dims)))
        self.copies[value] = copy
        return copy

    def _input(self, value: ir.Value):
        """The probe's value for ``value``: a copy made already, an initializer, or a graph input (False: untyped)."""
        if value in self.copies:
            return self.copies[value]
        if not value.name:
            return None
        copy = self._copy(value)
        if value.const_value is not None and value.producer() is None and not _big(value):
            copy.const_value = value.const_value
            self.initializers.append(copy)
        elif value.const_value is not None and value.producer() is None and value.type is not None:
            copy.shape = ir.Shape(list(value.const_value.shape.dims))
            self.inputs.append(copy)  # a big weight: fed, not folded (``BIG_WEIGHT_BYTES``)
            self.fed += 1
        elif value.type is None:
            return False
        else:
            self.inputs.append(copy)
        return copy


def save_users_probe(probe: UsersProbe, staged: Path, number: int = 0) -> Path:
    """Write ``probe`` beside the model file ``staged`` (as its probe ``number``); return its path.

    A weight the staged file keeps in external data is referenced there (its
    file, offset and length), not copied; the others are written inline.
    """
    staged = Path(staged)
    path = staged.with_name(f"{PROBE_STEM}{number}.onnx")
    external = external_entries(staged)
    for value in probe.model.graph.initializers.values():
        entry = external.get(value.name)
        if entry is not None and value.const_value is not None:
            value.const_value = ir.ExternalTensor(
                entry["location"], int(entry.get("offset", 0)), int(entry["length"]), value.const_value.dtype,
                shape=value.const_value.shape, name=value.name, base_dir=str(staged.parent),
            )
    ir.save(probe.model, str(path))
    return path


@functools.lru_cache(maxsize=4)
def _entries(staged: Path, stamp: tuple) -> Dict[str, Dict[str, str]]:
    proto = onnx.load(str(staged), load_external_data=False)
    entries = {}
    for tensor in proto.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            entries[tensor.name] = {item.key: item.value for item in tensor.external_data}
    return entries


def external_entries(staged: Path) -> Dict[str, Dict[str, str]]:
    """Initializer name -> its external data entry (location, offset, length) in the model file ``staged``.

    Empty, without reading the file, when no data file sits beside it (the
    writer puts external data in ``<name>.data``): an inline model's file holds
    its weights, and reading them is what the probe avoids.
    """
    staged = Path(staged)
    if not staged.with_name(data_file_name(staged)).exists():
        return {}
    stat = staged.stat()
    return _entries(staged, (stat.st_mtime_ns, stat.st_size))


__all__ = [
    "BIG_WEIGHT_BYTES", "PROBE_STEM", "RADIUS", "UsersProbe", "WEIGHT_BUDGET", "WHOLE_FRACTION", "external_entries",
    "neighbourhood_classes", "probe_of", "save_users_probe", "users_probes",
]
