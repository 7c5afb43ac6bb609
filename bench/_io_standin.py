"""A stand-in fp16 conversion built only on ampconv's I/O modules, for measuring the I/O path.

It converts every float32 initializer to float16 lazily (round to nearest even,
computed while written) and inserts a Cast back to float32 after it, so the
model stays valid without any planning. This isolates what the I/O path
(``ampconv.reading.load``, ``ampconv.tensors.chunks``, ``ampconv.writing.writer``, ``ampconv.writing.outputs``)
costs from what the converter's passes cost; the benchmark reports both.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import onnx_ir as ir

from ampconv.tensors.chunks import CastTensor
from ampconv.reading.load import load_model
from ampconv.runtime.loadcheck import check_written
from ampconv.writing.outputs import publish, staging_dir
from ampconv.writing.writer import write_model


def lazy_fp16(src: ir.TensorProtocol) -> ir.LazyTensor:
    """A tensor that converts ``src`` to float16 while it is written (as the converter does)."""
    return CastTensor(src, ir.DataType.FLOAT16, name=src.name)


def convert_initializers(model: ir.Model) -> int:
    """Make every float32 initializer float16 with a Cast back; return how many."""
    count = 0
    for graph in model.graphs():
        for value in list(graph.initializers.values()):
            tensor = value.const_value
            if tensor is None or tensor.dtype != ir.DataType.FLOAT:
                continue
            low = ir.Value(name=value.name + "_fp16", type=ir.TensorType(ir.DataType.FLOAT16),
                           shape=tensor.shape, const_value=lazy_fp16(tensor))
            graph.register_initializer(low)
            cast = ir.node("Cast", [low], attributes={"to": ir.DataType.FLOAT}, name=value.name + "_cast")
            graph.insert_before(graph[0], cast) if len(graph) else graph.append(cast)
            out = cast.outputs[0]
            out.type, out.shape = value.type, value.shape
            value.replace_all_uses_with(out)
            old_name = value.name
            graph.initializers.pop(old_name)
            out.name = old_name
            count += 1
    return count


def main(src: str, dst: str, runtime: bool = False) -> None:
    """Convert ``src`` to ``dst`` through the I/O modules only, and print timings."""
    t0 = time.perf_counter()
    model = load_model(src)
    convert_initializers(model)
    dst_p = Path(dst)
    with staging_dir(dst_p) as tmp:
        staged = tmp / dst_p.name
        write_model(model, staged, external=True)
        t1 = time.perf_counter()
        note = check_written(staged, runtime=runtime)
        t2 = time.perf_counter()
        publish(tmp, dst_p)
    print(f"write {t1 - t0:.2f}s check {t2 - t1:.2f}s note={note}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], runtime=len(sys.argv) > 3)
