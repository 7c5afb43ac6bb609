"""onnxconverter-common's fp16 converter, run in a child process so it can be timed out.

As a script: ``python bench/baseline.py SRC DST [OP,OP...]`` converts with
``convert_float_to_float16(model, keep_io_types=True)``, saves DST and prints
``{"seconds": t}`` (conversion only, not load/save) as JSON on stdout. The
optional third argument adds op types to its default ``op_block_list`` (kept
float32), which makes it do the same mixed-precision work as ampconv at O2.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
from collections.abc import Sequence


def run_baseline(src: pathlib.Path, dst: pathlib.Path, timeout_s: float,
                 extra_block_ops: Sequence[str] = ()) -> dict[str, object]:
    """Convert ``src`` to ``dst`` with onnxconverter-common in a child process.

    Returns ``{"status": "ok", "seconds": t}``, ``{"status": "timed out", ...}``
    or ``{"status": "failed", "error": text}``; never raises.
    """
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), str(src), str(dst), ",".join(extra_block_ops)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"status": "timed out", "seconds": None, "timeout_s": timeout_s}
    if done.returncode != 0:
        return {"status": "failed", "seconds": None, "error": done.stderr.strip()[-1000:]}
    return {"status": "ok", **json.loads(done.stdout.strip().splitlines()[-1])}


def _main(src: str, dst: str, extra_block_ops: str = "") -> None:
    import warnings

    import onnx
    from onnxconverter_common import float16

    warnings.filterwarnings("ignore")  # it warns once per clamped value; noise here
    model = onnx.load(src)
    start = time.perf_counter()
    kwargs = {}
    if extra_block_ops:
        kwargs["op_block_list"] = list(float16.DEFAULT_OP_BLOCK_LIST) + extra_block_ops.split(",")
    converted = float16.convert_float_to_float16(model, keep_io_types=True, **kwargs)
    seconds = time.perf_counter() - start
    onnx.save(converted, dst)
    print(json.dumps({"seconds": seconds}))


if __name__ == "__main__":
    _main(*sys.argv[1:4])
