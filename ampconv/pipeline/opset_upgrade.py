"""Opset and the LOW type: upgrade a model whose opset keeps its heavy ops float32, and say what stays so.

Many ops accept bfloat16 only from a later opset than the one a model was
exported at (Conv, most activations: opset 22), and QuantizeLinear and
DequantizeLinear take a float16 scale only from opset 19. Below it the schema
rule keeps them float32, so a bf16 conversion of an opset-17 CNN changes
almost nothing, and a Q/DQ model gets a Cast after every DequantizeLinear.

- ``auto_upgrade_target``: the opset a conversion upgrades to by default (the
  first at which every node the model's opset keeps from the LOW type takes
  it), when a heavy op or a Q/DQ node is among them; None otherwise.
  ``Config.keep_opset`` (``--keep-opset``) turns it off, ``Config.opset``
  (``--opset N``) chooses.
- ``upgraded_copy`` runs onnx's version converter on a private copy of the
  model; the converter then checks the converted result as always
  (onnx.checker with shape inference, onnxruntime). ``UpgradeError`` says the
  copy could not be made (the default upgrade then falls back to the model's
  own opset, with a note).
- ``schema_opset_warning`` turns what still stays float32 because of the
  opset into one summary warning naming the opset that would convert it.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
from collections import Counter
from pathlib import Path
from typing import Iterator, Optional

import onnx
import onnx.shape_inference
import onnx.version_converter
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.errors import ConversionError, UsageError, named
from ampconv.reading.load import DECLARED_META_KEY, declared_value_info, external_data_files, load_model
from ampconv.runtime.loadcheck import checker_error, first_line, runtime_refusal
from ampconv.plan.upgrade_hints import CONVERTS_LATER, stays_high
from ampconv.checks.probe import build_probe
from ampconv.core.heavy_ops import HEAVY_OPS
from ampconv.core.lowtypes import low_type
from ampconv.core.graphs import all_graphs
from ampconv.runtime.schema import FLOAT, first_opset_allowing, op_info
from ampconv.writing.writer import hide_undeclared_types, restore_types
from ampconv.reading.prepare import weight_free_proto

# Nodes whose refusal of the LOW type makes an upgrade worth its risk: the heavy ops a GPU
# gains from, and Q/DQ (a float32 scale puts a Cast on every quantized edge).
_QDQ = frozenset({"QuantizeLinear", "DequantizeLinear"})


class UpgradeError(ConversionError):
    """onnx's version converter could not make the upgraded copy (or the copy fails onnx.checker)."""


def default_opset(model: ir.Model) -> Optional[int]:
    """The model's default-domain (``ai.onnx``) opset, None when it imports none."""
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx"))


def schema_opset_warning(plan_nodes, low: str, model: ir.Model) -> Optional[str]:
    """One warning for the nodes the schema keeps float32 only because of the model's opset; None if none.

    ``plan_nodes`` maps nodes to their plan (``Plan.nodes``). The warning
    counts the op types and names the opset from which every one of them
    accepts the LOW type.
    """
    opset = default_opset(model)
    if opset is None:
        return None
    ops: Counter = Counter()
    needed = 0
    for node, node_plan in plan_nodes.items():
        decision = node_plan.decision
        if decision.rule != "hard-schema" or not is_default(node) or CONVERTS_LATER not in decision.reason:
            continue  # no hint: the node stays float32 at any opset (black list, --block-op): nothing to gain
        later = first_opset_allowing("", node.op_type, opset, low)
        if later is not None and later <= runtime_opset_ceiling():  # cached: onnxruntime asked once
            ops[node.op_type] += 1
            needed = max(needed, later)
    if not ops:
        return None
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops.most_common(6))
    more = f" and {len(ops) - 6} more op types" if len(ops) > 6 else ""
    type_name = low_type(low).name
    return (
        f"{sum(ops.values())} node(s) stay float32 because opset {opset} does not accept {type_name} for them "
        f"({listed}{more}); they can convert from opset {needed}: convert with {named('opset', needed)} "
        "to upgrade the model with onnx's version converter first"
    )


def auto_upgrade_target(model: ir.Model, low: str, policy=None) -> Optional[tuple]:
    """``(opset, reason)`` to upgrade ``model`` to by default for ``low``; None when no upgrade pays.

    The target is the first opset at which every default-domain node that
    the model's opset keeps from the LOW type, and that would go LOW at all,
    accepts it: with ``policy``, a node the level table keeps float32 anyway
    (a black op such as Range, an unlisted op at O1, a ``--block-op``) does
    not raise it. Never past ``runtime_opset_ceiling`` (what the installed
    onnx and onnxruntime run); an upgrade happens only when a heavy op or a
    QuantizeLinear/DequantizeLinear is among those nodes.
    """
    current = default_opset(model)
    if current is None:
        return None
    ceiling = runtime_opset_ceiling()
    needed = 0
    refused: Counter = Counter()
    worth_it = False
    for graph in all_graphs(model):
        for node in graph:
            if not is_default(node) or not _refuses_low(node.op_type, current, low):
                continue
            if policy is not None and stays_high(policy, node.op_type):
                continue
            later = first_opset_allowing("", node.op_type, current, low)
            if later is None or later > ceiling:
                continue
            refused[node.op_type] += 1
            needed = max(needed, later)
            worth_it = worth_it or node.op_type in HEAVY_OPS[""] or node.op_type in _QDQ
    if not worth_it:
        return None
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in refused.most_common(4))
    more = f" and {len(refused) - 4} more op types" if len(refused) > 4 else ""
    return needed, f"{sum(refused.values())} node(s) ({listed}{more}) take {low_type(low).name} from opset {needed}"


def fallback_upgrade_target(plan, fallback: str) -> Optional[tuple]:
    """``(opset, reason)`` to upgrade to by default so the fallback type reaches the nodes the opset refuses it.

    ``plan.fallback_refused`` lists the nodes whose values do not fit the LOW
    type and whose schema at the model's opset refuses ``fallback`` (bf16),
    with the first opset that admits it. The rule is ``auto_upgrade_target``'s:
    the first opset at which every one of them takes it, never past
    ``runtime_opset_ceiling``, and only when a heavy op is among them.
    """
    ceiling = runtime_opset_ceiling()
    refused = [(op, opset, n) for op, opset, n in plan.fallback_refused if opset <= ceiling]
    if not any(op in HEAVY_OPS[""] for op, _, _ in refused):
        return None
    needed = max(opset for _, opset, _ in refused)
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, _, n in refused[:4])
    more = f" and {len(refused) - 4} more op types" if len(refused) > 4 else ""
    count = sum(n for _, _, n in refused)
    return needed, (f"{count} node(s) ({listed}{more}) whose values do not fit {plan.low} take "
                    f"{low_type(fallback).name} from opset {needed}")


@functools.lru_cache(maxsize=1)
def runtime_opset_ceiling() -> int:
    """The highest default-domain opset the installed onnx knows and onnxruntime loads (onnx's own without it).

    One trivial model per opset, from the newest down, until a CPU session
    loads one: an opset onnxruntime refuses (under development, unknown) is
    never a default upgrade's target.
    """
    latest = onnx.defs.onnx_opset_version()
    try:
        import onnxruntime as ort
    except ImportError:
        return latest
    from onnx import TensorProto, helper

    options = ort.SessionOptions()
    options.log_severity_level = 4
    for opset in range(latest, 6, -1):
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "ceiling",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
        try:
            ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - any refusal means: not this opset
            continue
        return opset
    return latest


def _refuses_low(op_type: str, opset: int, low: str) -> bool:
    """Whether the op's schema at ``opset`` has float data but no slot of its main type admits ``low``."""
    info = op_info("", op_type, opset)
    if not info.known:
        return False
    main = info.main_type()
    if main is not None:
        return low_type(low).type_string not in info.allowed(main)
    # No variable admits float and another type: float-only slots (DequantizeLinear-13's output).
    slots = [info.output_type(0), info.input_type(0)]
    return any(t is not None and info.allowed(t) == frozenset({FLOAT}) for t in slots)


@contextlib.contextmanager
def upgraded_copy(src: Path, target: int) -> Iterator[tuple]:
    """Yield ``(path, note)``: ``src`` upgraded to default opset ``target`` in a private folder, removed afterwards.

    Yields ``(src, None)`` when the model is at ``target`` already. The copy
    keeps the weights (in a data file when the source has one), so
    every later step reads it like any model. Raises ``UsageError`` for a
    target below the model's opset or above the installed onnx's, and
    ``ConversionError`` when the version converter fails or its result fails
    onnx.checker.
    """
    model = load_model(src)
    current = default_opset(model)
    latest = onnx.defs.onnx_opset_version()
    if current is None:
        raise UsageError(f"{src}: {named('opset', target)}: the model imports no default-domain opset to upgrade")
    if target < current:
        raise UsageError(f"{src}: {named('opset', target)} is below the model's opset {current}; ampconv only upgrades")
    if target > latest:
        raise UsageError(f"{src}: {named('opset', target)} is newer than the installed onnx supports ({latest})")
    if target == current:
        yield src, None
        return
    external = bool(external_data_files(model))
    # The converter reads only the graph: the weights stay where they are
    # (external references) until the upgraded copy is saved.
    try:
        upgraded = onnx.version_converter.convert_version(ir.serde.serialize_model(model), target)
        result = ir.serde.deserialize_model(upgraded)
    except Exception as exc:  # noqa: BLE001 - the converter (and a model it cannot read) raise several types
        raise UpgradeError(
            f"{src}: onnx's version converter cannot upgrade opset {current} to {target}: {first_line(exc)}"
        ) from None
    with tempfile.TemporaryDirectory(prefix="ampconv-opset-") as folder:
        path = Path(folder) / src.name
        ir.external_data.set_base_dir(result.graph, src.parent)
        # The copy declares the value_info its source declared, no more: the converted
        # file keeps only what its input declared (ampconv.writing.writer), and its input is this copy.
        result.meta[DECLARED_META_KEY] = declared_value_info(model) or frozenset()
        _save(result, path, f"{src.stem}.data" if external else None)
        note = f"upgraded from opset {current} to {target} with onnx's version converter before converting"
        error = checker_error(path, full=True)
        if error is not None and checker_error(src, full=True) is None:
            # An output declared with a shape the graph does not make (rank 2 for a rank-3
            # Reshape) passes the checker at an old opset whose inference cannot tell.
            corrected = correct_output_shapes(result)
            if corrected:
                _save(result, path, f"{src.stem}.data" if external else None)
                error = checker_error(path, full=True)
                note += "; declared output shape contradicted by the graph, written as inferred: " + ", ".join(corrected)
        if error is not None and checker_error(src, full=True) is None:
            raise UpgradeError(
                f"{src}: the model upgraded to opset {target} fails onnx.checker: {first_line(error)}"
            )
        refusal = _runtime_blocker(result, path, src)
        if refusal is not None:
            raise UpgradeError(f"{src}: onnxruntime cannot load the model upgraded to opset {target}, still float32: "
                               f"{refusal}")
        yield path, note


def _runtime_blocker(upgraded: ir.Model, path: Path, src: Path) -> Optional[str]:
    """onnxruntime's words when it cannot load the upgraded float32 copy at ``path`` but loads ``src``; else None.

    An upgrade renumbers every op whose schema changed (RoiAlign becomes
    RoiAlign-22), and a runtime may lack a kernel for the new version of an op
    that stays float32 anyway. The probe (one node per signature,
    ``ampconv.checks.probe``) is asked first; a refusal is confirmed on the whole copy.
    """
    probe = build_probe(upgraded)
    if probe is not None:
        probe_path = path.parent / "probe.onnx"
        try:
            ir.save(probe.model, str(probe_path))
            if runtime_refusal(probe_path) is None:
                return None
        except Exception:  # noqa: BLE001 - a probe that cannot be written proves nothing: ask the whole copy
            pass
        finally:
            probe_path.unlink(missing_ok=True)
    refusal = runtime_refusal(path)
    if refusal is None or runtime_refusal(src) is not None:
        return None  # loads; or the input itself does not load here, which the conversion reports as always
    return first_line(RuntimeError(refusal))


def _save(model: ir.Model, path: Path, data: Optional[str]) -> None:
    """Save ``model`` declaring only the value_info its source declared (``ampconv.writing.writer``)."""
    hidden = hide_undeclared_types(model)
    try:
        ir.save(model, path, external_data=data)
    finally:
        restore_types(hidden)


def correct_output_shapes(model: ir.Model) -> list:
    """Give each main-graph output whose declared shape contradicts onnx shape inference the inferred shape.

    Inference runs on a weight-free copy whose outputs declare no shape, with
    data propagation (Shape -> Concat -> Reshape). A contradiction is another
    rank, or another fixed size on some axis; symbolic and unknown dims are no
    evidence. Returns ``"name [declared] -> [inferred]"`` per corrected output.
    """
    proto = weight_free_proto(model)
    for info in proto.graph.output:
        if info.type.HasField("tensor_type"):
            info.type.tensor_type.ClearField("shape")
    try:
        proto = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - best effort: without inference nothing is corrected
        return []
    inferred = {
        info.name: [d.dim_value if d.HasField("dim_value") else _symbol(d.dim_param)
                    for d in info.type.tensor_type.shape.dim]
        for info in proto.graph.output
        if info.type.HasField("tensor_type") and info.type.tensor_type.HasField("shape")
    }
    corrected = []
    for value in model.graph.outputs:
        dims = inferred.get(value.name)
        if value.shape is None or dims is None or not _contradicts(list(value.shape), dims):
            continue
        corrected.append(f"{value.name} {_text(value.shape)} -> {_text(dims)}")
        value.shape = ir.Shape(dims)
    return corrected


def _symbol(name: str):
    # onnx inference names the dims it cannot tell "unk__<n>": unknown, not a symbol to declare.
    return name if name and not name.startswith("unk__") else None


def _contradicts(declared: list, inferred: list) -> bool:
    if len(declared) != len(inferred):
        return True
    return any(isinstance(a, int) and isinstance(b, int) and a != b for a, b in zip(declared, inferred))


def _text(dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


__all__ = ["UpgradeError", "auto_upgrade_target", "default_opset", "fallback_upgrade_target", "runtime_opset_ceiling", "schema_opset_warning",
           "upgraded_copy"]
