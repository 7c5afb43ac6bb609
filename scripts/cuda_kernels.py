"""Regenerate ``ampconv/runtime/cuda_kernels.py`` from a dump of onnxruntime-gpu's CUDA kernel registry.

The dump (``scripts/data/ort_gpu_<version>_cuda_kernels.json.xz``) is read on a
machine with a GPU: ``get_all_opkernel_def()`` lists CUDA's kernels only
where its provider loads, and it dies of SIGSEGV while TensorRT's libraries
are missing, so the session that made the 1.31.1 dump (an H200 lent through
the project's device tool) stubbed ``libnvinfer.so.10`` and
``libnvonnxparser.so.10`` with the seven symbols TensorRT's provider imports
(TensorRT registers no kernels; nothing calls them). Each row is
``[domain, op, [first, last], {variable: [types]}]``.

    .venv/bin/python scripts/cuda_kernels.py scripts/data/ort_gpu_1.31.1_cuda_kernels.json.xz
"""

from __future__ import annotations

import json
import lzma
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ampconv.core.domains import normalize_domain  # noqa: E402

TARGET = ROOT / "ampconv" / "runtime" / "cuda_kernels.py"
LOW_TYPES = ("tensor(float16)", "tensor(bfloat16)")


def load_dump(path: pathlib.Path) -> dict:
    """The dump's JSON (``onnxruntime``, ``read_on``, ``kernels``)."""
    return json.loads(lzma.decompress(path.read_bytes()))


def low_table(rows) -> dict:
    """(domain, op) -> ((first, last, LOW types any kernel of that range takes), ...), ranges in order."""
    merged: dict = {}
    for domain, op, (first, last), constraints in rows:
        types = {t for listed in constraints.values() for t in listed}
        low = merged.setdefault((normalize_domain(domain), op), {}).setdefault((first, last), set())
        low.update(t for t in LOW_TYPES if t in types)
    return {key: tuple((first, last, tuple(sorted(low))) for (first, last), low in sorted(ranges.items()))
            for key, ranges in sorted(merged.items())}


def main(argv=None) -> int:
    """Rewrite the generated block of ``ampconv/runtime/cuda_kernels.py`` from the dump given."""
    path = pathlib.Path((argv or sys.argv[1:])[0])
    dump = load_dump(path)
    table = low_table(dump["kernels"])
    lines = [f"    {key!r}: {ranges!r}," for key, ranges in table.items()]
    block = (f'SOURCE = "{dump["onnxruntime"]}\'s CUDA provider, read on an {dump["read_on"]}"\n'
             f'DUMP = "scripts/data/{path.name}"\n'
             "LOW_KERNELS: LowKernelTable = {\n" + "\n".join(lines) + "\n}\n")
    text = TARGET.read_text()
    new = re.sub(r'SOURCE = ".*?"\nDUMP = ".*?"\nLOW_KERNELS: LowKernelTable = \{.*?\n\}\n', lambda _m: block, text,
                 flags=re.S)
    TARGET.write_text(new)
    print(f"{len(table)} ops from {dump['onnxruntime']} -> {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
