"""The default synthetic float32 run: one seeded random sample through the model, as calibration observes it.

Without ``--calibration-data``, the model is run once in float32 on one
seeded random sample (shapes from ``--shape`` or the model, symbolic axes at
1, integer inputs inside the tables they index, float inputs N(0, 1) or in
their ``--input-range``), and every activation's range is recorded exactly as
``--calibration-data random`` records it (``numerics.collect``). The planner
then keeps float32 the nodes whose values overflow the LOW type on that
sample (``data-overflow``; random data says nothing trustworthy about
underflow, so only overflow is read), lets the squares of a normalization the
run saw fit with room follow the gray rule, and states how far each float
input may grow before a LOW node overflows (``plan.envelope``).

The run is budgeted by what it costs (``calibration.cost``: FLOPs, activation
and weight bytes and nodes, in seconds on this machine), not by node or
weight counts: by default it is made when its estimate fits
``synthetic_budget`` seconds (``DEFAULT_BUDGET_S``). Where the pass at the
given shapes is too dear and some input has symbolic dimensions set larger
than 1 (``--shape``), a slice is run instead: every symbolic dimension at 1
(batch 1, a one-token sequence, one decode step over a one-token past); the
note says so. ``synthetic_run=True`` (``--synthetic-run``) runs whatever the
estimate, whenever the estimated peak memory fits the memory available.
What a skipped run cost is said after planning (``skipped_note``).

The run is made in a forked child (``ampconv.runtime.isolated``) on the model
the converter already read (the fork shares it; its edits stay in the
child): random inputs (and symbolic axes at 1) can make onnxruntime's native
kernels die (an integer division by zero, SIGFPE), which must cost the run,
not the conversion.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from typing import List, Mapping, Optional, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.calibration import cost
from ampconv.calibration.samples import calibration_samples
from ampconv.core.lowtypes import LowType
from ampconv.core.shapespec import is_fixed, resolve_all
from ampconv.errors import AmpconvError, UsageError, command_line_text, named, spell_parameters
from ampconv.numerics import dimrelations, modelio
from ampconv.numerics.activations import Calibration
from ampconv.numerics.collect import Pass, bodies_refused, observe
from ampconv.options.groups import SYNTHETIC_BUDGET_S, DataOptions
from ampconv.plan.evidence import WANTING_NUMBERS
from ampconv.runtime.isolated import DEFAULT_TIMEOUT_S, run_isolated
from ampconv.runtime.loadcheck import first_line

DEFAULT_BUDGET_S = SYNTHETIC_BUDGET_S  # seconds of estimated cost (``options.groups``)
# A default run estimated under this is made whatever it computes; a dearer one must compute at least as long as
# onnxruntime spends setting its nodes up (0.18 ms each): a 4,000-node chain of [1, 16] tensors would spend
# 0.7 s on set-up alone, more than the conversion's own work, for figures of 16 values each.
CHEAP_RUN_S = 0.5
SEED = 0
# How a note tells the user to give real data or turn the run off.
REAL_DATA = f"give real samples with {named('calibration_data', 'PATH')}"
ADVICE = f"{REAL_DATA}, or turn the run off with {named('synthetic_run', False)}"


@dataclasses.dataclass(frozen=True)
class Skipped:
    """Why the run was not made (``reason``); ``skipped_note`` says it with what that cost in float32 nodes."""

    reason: str


def wanted(options: DataOptions, level: str, range_guards: bool) -> bool:
    """Whether a conversion runs the synthetic pass: no data given, the run not turned off, range guards at O1/O2."""
    return options.synthetic_run is not False and not options.calibration_data and range_guards \
        and level in ("O1", "O2")


@dataclasses.dataclass(frozen=True)
class Choice:
    """What the run will be: the inputs' shapes, its estimated cost, and the slice's words ("" for a full pass)."""

    shapes: Mapping[str, Tuple[int, ...]]
    cost: cost.RunCost
    slice: str = ""


def choose(model: ir.Model, options: DataOptions) -> Tuple[Optional[Choice], Optional[Skipped]]:
    """The run to make within the budget (or, asked for explicitly, within memory); else why none is made."""
    explicit = options.synthetic_run is True
    floor = cost.floor_cost(model)
    why = None if explicit else refused(floor, options.synthetic_budget, floor=True)
    if why is not None:  # nodes and weights alone say no: no shape inference is spent on it
        return None, Skipped(why)
    specs = modelio.declared_inputs(model)
    shapes, _notes = resolve_all(specs, dict(options.shapes))
    candidates = [Choice(shapes, cost.estimate(model, shapes))]
    small = _slice_shapes(specs, shapes)
    if small is not None:
        words = ("a slice: symbolic dimensions at 1 (batch 1, a one-token sequence, one decode step) instead of "
                 + ", ".join(f"{name} {list(dims)}" for name, dims in shapes.items() if small[name] != dims))
        candidates.append(Choice(small, cost.estimate(model, small), words))
    # Memory bounds every run, asked for or not: a pass whose estimated peak exceeds what the machine
    # (or the container) has free would only be killed, after its time was spent.
    memory = available_memory()
    fits = [c for c in candidates if memory is None or c.cost.peak_bytes <= memory]
    if not fits:
        return None, Skipped(f"estimated peak memory {candidates[-1].cost.peak_bytes / 2**30:.1f} GiB > "
                             f"{memory / 2**30:.1f} GiB available")
    if explicit:
        return fits[0], None
    for choice in fits:
        if refused(choice.cost, options.synthetic_budget) is None:
            return choice, None
    why = refused(candidates[0].cost, options.synthetic_budget) or _memory_words(candidates[0], memory)
    if len(candidates) > 1:
        why += (" (with every symbolic dimension at 1: "
                f"{refused(candidates[-1].cost, options.synthetic_budget) or _memory_words(candidates[-1], memory)})")
    return None, Skipped(why)


def _memory_words(choice: Choice, memory: Optional[int]) -> str:
    """Why ``choice`` is not made for memory (its peak against what is free); "" when it fits."""
    if memory is None or choice.cost.peak_bytes <= memory:
        return ""
    return (f"estimated peak memory {choice.cost.peak_bytes / 2**30:.1f} GiB > "
            f"{memory / 2**30:.1f} GiB available")


def refused(run: cost.RunCost, budget: Optional[float], floor: bool = False) -> Optional[str]:
    """Why a run of cost ``run`` is not made by default (None: it is); ``floor``: ``run`` is a lower estimate.

    ``budget`` None is the default: ``DEFAULT_BUDGET_S``, and a run dearer than
    ``CHEAP_RUN_S`` must spend at least as long on its work (arithmetic, values,
    weights) as on onnxruntime's set-up of its nodes; a budget the user gives
    is the only limit.
    """
    limit = DEFAULT_BUDGET_S if budget is None else budget
    estimated = f"estimated {'at least ' if floor else ''}{run.seconds:.1f} s ({run.describe()})"
    if run.seconds > limit:
        return f"{estimated} > {limit:g} s budget"
    if budget is None and run.overhead > CHEAP_RUN_S and run.overhead > run.work:
        return (f"{estimated}, {run.overhead:.1f} s of it onnxruntime setting up nodes that compute little "
                f"(a run over {CHEAP_RUN_S:g} s must compute at least as long as it sets up)")
    return None


def _slice_shapes(specs, shapes: Mapping[str, Tuple[int, ...]]) -> Optional[dict]:
    """``shapes`` with every symbolic (or unnamed) dimension at 1; None when that changes nothing."""
    small = {}
    for spec in specs:
        dims = shapes[spec.name]
        declared = spec.dims or ()
        small[spec.name] = tuple(d if axis < len(declared) and is_fixed(declared[axis]) else 1
                                 for axis, d in enumerate(dims)) if declared else dims
    return small if small != dict(shapes) else None


def available_memory() -> Optional[int]:
    """Bytes of memory available now: the system's ``MemAvailable``, less where a cgroup limit leaves less.

    A container's limit is the one that kills: ``MemAvailable`` reads the host.
    The cgroup's free share is its limit less its working set (usage without
    the inactive file cache, which the kernel reclaims first), as container
    runtimes count it. None where neither says.
    """
    system = _meminfo_available()
    group = _cgroup_available()
    known = [b for b in (system, group) if b is not None]
    return min(known) if known else None


def _meminfo_available() -> Optional[int]:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (else the free physical pages); None where neither is read."""
    try:
        with open("/proc/meminfo") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


# (limit, usage, stat file, the stat's inactive file key) of cgroup v2, then v1.
_CGROUP_FILES = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "/sys/fs/cgroup/memory.stat", "inactive_file"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
     "/sys/fs/cgroup/memory/memory.stat", "total_inactive_file"),
)
# cgroup v1 writes "no limit" as a page-rounded 2**63 - 1.
_NO_LIMIT = 1 << 60


def _cgroup_available(files=_CGROUP_FILES) -> Optional[int]:
    """What this process's memory cgroup has free (limit less working set); None without a limit."""
    for limit_file, usage_file, stat_file, inactive_key in files:
        try:
            with open(limit_file) as f:
                text = f.read().strip()
            if text == "max" or int(text) >= _NO_LIMIT:
                return None
            limit = int(text)
            with open(usage_file) as f:
                usage = int(f.read().strip())
        except (OSError, ValueError):
            continue
        inactive = 0
        try:
            with open(stat_file) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == inactive_key:
                        inactive = int(value)
                        break
        except (OSError, ValueError):
            pass
        return max(0, limit - max(0, usage - inactive))
    return None


def synthetic_run(src: str, model: ir.Model, options: DataOptions, low: LowType, fresh: bool = False
                  ) -> Tuple[Optional[Calibration], List[str], Optional[Skipped], Optional[DataOptions]]:
    """The run's ``Calibration`` (None when it was not made), the notes that say what happened, why it was
    skipped (None when it ran or failed), and the options of its draw (None when it was not made):
    ``calibration_samples(model, draw)`` gives its sample again (seeded: the same arrays), at the shapes the
    run used (a slice's when it was one), for the release step's evaluations (``calibration.release``).

    ``fresh``: the converter's ``model`` is not the one to run (a checker-refused
    input, not yet repaired): the child reads ``src`` again, as calibration data does.
    """
    try:
        choice, skipped = choose(model, options)
    except AmpconvError as exc:  # shapes the random-input rules refuse: the run could not be drawn either
        return None, [_failed(exc)], None, None
    if choice is None:
        return None, [], skipped, None
    draw = _draw(options, choice)
    timeout = max(DEFAULT_TIMEOUT_S, 20 * choice.cost.seconds)
    try:  # in a forked child: random inputs can crash the runtime itself (an integer division by zero: SIGFPE)
        try:
            calibration, shapes, sample_notes = run_isolated(_draw_and_run, src, model, draw, low, True, fresh,
                                                             timeout=timeout)
        except AmpconvError as exc:  # the copy that routes body values out was refused: the main graph alone
            calibration, shapes, sample_notes = run_isolated(_draw_and_run, src, model, draw, low, False, fresh,
                                                             timeout=timeout)
            calibration = bodies_refused(calibration, exc)
    except Exception as exc:  # noqa: BLE001 - the run is optional evidence: any failure falls back to the analysis
        return None, [_failed(exc, model, options)], None, None
    ranged = "".join(f"; {name} in [{lo:g}, {hi:g}]" for name, (lo, hi) in options.input_ranges)
    sliced = f"; {choice.slice}" if choice.slice else ""
    note = (f"synthetic float32 run: 1 seeded random sample (seed {SEED}; {shapes}{ranged}{sliced}) in "
            f"{calibration.seconds:.2f} s (estimated {choice.cost.seconds:.2f} s: {choice.cost.describe()}); "
            f"nodes whose values overflow {low.name} there stay float32 (data-overflow); {ADVICE}")
    reach = {name: max(abs(lo), abs(hi)) for name, (lo, hi) in options.input_ranges}
    # The calibration section's notes are plain text (the report's own notes are spelled as they are read).
    notes = tuple(spell_parameters(text, command_line_text) for text in (note, *sample_notes))
    calibration = dataclasses.replace(calibration, synthetic=True, reach=reach,
                                      notes=notes + tuple(calibration.notes))
    return calibration, [], None, draw


def _failed(exc: BaseException, model: Optional[ir.Model] = None, options: Optional[DataOptions] = None) -> str:
    """The note of a run that could not be made; for a failure on the sizes it drew (not on a bad ``--shape``),
    every unset dimension and how the graph relates them."""
    hint = None
    if model is not None and options is not None and not isinstance(exc, UsageError):
        hint = dimrelations.unset_dims_hint(model, modelio.declared_inputs(model), dict(options.shapes))
    dims = f"; if it failed for the sizes it drew: {hint}" if hint else ""
    return (f"synthetic float32 run could not run on random inputs ({first_line(exc)}); the magnitude "
            f"analysis alone guards ranges{dims}")


def _draw(options: DataOptions, choice: Choice) -> DataOptions:
    """The options of the run's draw: one seeded random sample, at ``choice``'s shapes when it is a slice."""
    # A slice names every input's shape (a scalar input has none to name); a full pass draws as the options say.
    shapes = options.shapes
    if choice.slice:
        shapes = tuple((name, dims) for name, dims in choice.shapes.items() if dims)
    return dataclasses.replace(options, calibration_data=("random",), calibration_samples=1, calibration_seed=SEED,
                               tune=False, shapes=shapes)


def unjudged_note(nodes) -> Optional[str]:
    """With no float32 run (failed): the nodes a run that saw their values fit could have lowered, and how to
    give one (``nodes``: the report's entries); None when there are none."""
    kept = Counter(n["rule"] for n in nodes if n["precision"] == "HIGH" and n["rule"] in WANTING_NUMBERS)
    if not kept:
        return None
    which = ", ".join(f"{rule} x{count}" for rule, count in sorted(kept.items()))
    return (f"{sum(kept.values())} node(s) stay float32 that a float32 run seeing their values fit could lower "
            f"({which}): no run judged them; {REAL_DATA}")


def _draw_and_run(src: str, model: ir.Model, draw: DataOptions, low: LowType, with_bodies: bool,
                  fresh: bool) -> Tuple[Calibration, str, tuple]:
    """In the child: draw the seeded sample and observe one pass (the calibration, the sample's shapes, the draw's
    notes); the model is the parent's, edited here only."""
    if fresh:
        model = modelio.load(src)
    modelio.ensure_types(model)
    samples = calibration_samples(model, draw)
    with np.errstate(all="ignore"):  # float32 overflow in the model itself is the model's, not news
        calibration = observe(model, src, samples, low, Pass(random=True, with_bodies=with_bodies, accumulate=False))
    _label, sample = next(iter(samples))  # seeded: the same arrays the pass drew
    shapes = ", ".join(f"{name} {list(array.shape)}" for name, array in sample.items()) or "no inputs"
    return calibration, shapes, tuple(samples.notes)


def skipped_note(skipped: Skipped, kept: int, norms: int, sums: int) -> str:
    """What a skipped run cost: ``kept`` nodes float32 for want of numbers (``norms`` normalizations' statistics,
    ``sums`` long sums), and how to get the numbers."""
    parts = ([f"{norms} norm{'s' if norms != 1 else ''}' statistics"] if norms else []) \
        + ([f"{sums} long sum{'s' if sums != 1 else ''}"] if sums else [])
    cost_words = (f"{kept} node(s) stay float32 for want of numbers ({', '.join(parts)})" if kept and parts
                  else f"{kept} node(s) stay float32 for want of numbers" if kept
                  else "no node stays float32 for want of numbers")
    return (f"synthetic float32 run skipped: {skipped.reason}; {cost_words}; the magnitude analysis alone guards "
            f"ranges; pass {named('synthetic_run', True)} (runs whenever memory allows) or "
            f"{named('calibration_data')}")


__all__ = ["ADVICE", "CHEAP_RUN_S", "DEFAULT_BUDGET_S", "REAL_DATA", "SEED", "Choice", "Skipped",
           "available_memory", "choose", "refused", "skipped_note", "synthetic_run",
           "unjudged_note", "wanted"]
