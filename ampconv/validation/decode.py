"""Judge a converted decoder as its users do: greedy decoding, each step's cache fed back as the next past.

Per-output criteria compare one step. What an LLM user sees is the text a
greedy decode produces, where every step reads the cache the previous step
wrote, so rounding accumulates in the cache. ``greedy_decode`` runs the same
decode on the float32 reference and on the converted model (emulated by
default, as ``validate`` runs it) from the same first inputs, each model fed
its own tokens and its own cache, and reports where the token sequences part
and whether that step was a near-tie: the converted token's reference logit
within the logits' own error of the reference's top one, that error being a
rounding's (``NEAR_TIE_NOISE``), a flip no conversion can rule out.

The decode loop reads the model's interface by structure, never by name:

- the cache: past/present pairs (``ampconv.plan.kvcache``);
- the token input: the integer input an embedding lookup reads (a Gather or
  GatherBlockQuantized whose data is a weight);
- the logits: the float output that is no present cache;
- any other integer input is advanced by its role, read from its shape and
  values: as long as the whole sequence so far (an attention mask) it grows by
  a column of ones; as long as this step's tokens (positions) it continues
  counting from its last value.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from ampconv.errors import UsageError
from ampconv.plan.kvcache import LAYOUT_OPS, find_cache_pairs
from ampconv.numerics import emulate as emulation
from ampconv.numerics import modelio, runners

# The largest logit error, relative to the logits' RMS, that still reads as rounding (validate's
# default bound on the scaled max error).
NEAR_TIE_NOISE = 0.1
_INTEGERS = frozenset({ir.DataType.INT64, ir.DataType.INT32})
_LOOKUPS = frozenset({"Gather", "GatherBlockQuantized"})


@dataclasses.dataclass(frozen=True)
class DecodeResult:
    """What a greedy decode of both models found (see the module docstring)."""

    steps: int
    reference_tokens: tuple
    converted_tokens: tuple
    agreed: int  # steps with the same token before the first divergence
    near_tie: bool  # the first divergence is within the logits' own error
    margin: float | None  # at the first divergence: reference top logit - reference logit of the converted token
    noise: float | None  # at the first divergence: the largest |reference - converted| logit

    def to_dict(self) -> dict:
        """JSON-able (the validation report's ``decode`` entry)."""
        return {**dataclasses.asdict(self), "passed": self.passed, "summary": self.summary()}

    @property
    def passed(self) -> bool:
        """Every step agrees, or the first divergence is a near-tie."""
        return self.agreed == self.steps or self.near_tie

    def summary(self) -> str:
        """One line for people."""
        if self.agreed == self.steps:
            return f"greedy decode: {self.steps}/{self.steps} tokens agree"
        kind = "a near-tie" if self.near_tie else "not a near-tie"
        return (f"greedy decode: tokens agree for {self.agreed} of {self.steps} steps; step {self.agreed + 1} "
                f"differs ({kind}: top-logit margin {self.margin:.3g}, logit error {self.noise:.3g})")


@dataclasses.dataclass(frozen=True)
class _Roles:
    """Where each part of a decode step lives in the interface."""

    token: str
    logits: str
    cache: Mapping[str, str]  # past input -> present output
    others: tuple  # the remaining integer inputs, advanced by their role


def greedy_decode(reference: str, converted: str, feeds: Mapping[str, np.ndarray], steps: int = 8,
                  backend: str = "emulate") -> DecodeResult:
    """Greedy-decode ``steps`` tokens with both models from ``feeds`` (the first step's inputs, past included).

    ``backend``: ``emulate`` (the converted model's LOW rounding emulated in
    float32 on the CPU, as ``validate`` does) or ``native`` (run as written).
    """
    roles = decode_roles(modelio.load(reference))
    with tempfile.TemporaryDirectory(prefix="ampconv-decode-") as tmp:
        ref_run = runners.make_session(reference, "reference model", runners.CPU, optimize=False)
        conv_run = _converted_session(converted, backend, tmp)
        return decode_with(ref_run, conv_run, roles, feeds, steps)


def decode_with(ref_run: runners.Runner, conv_run: runners.Runner, roles: "_Roles",
                feeds: Mapping[str, np.ndarray], steps: int) -> DecodeResult:
    """``greedy_decode`` on sessions already made (``validate`` passes its own), ``roles`` from ``decode_roles``."""
    return decode_against(reference_decode(ref_run, roles, feeds, steps), conv_run, roles, feeds)


def reference_decode(ref_run: runners.Runner, roles: "_Roles", feeds: Mapping[str, np.ndarray],
                     steps: int) -> tuple:
    """The reference's greedy decode from ``feeds``: (tokens, each step's logits), for ``decode_against``.

    ``--tune`` decodes the reference once and each candidate against it.
    """
    if steps < 1:
        raise UsageError(f"steps must be at least 1, got {steps}")
    return _decode(ref_run, roles, feeds, steps)


def decode_against(reference: tuple, conv_run: runners.Runner, roles: "_Roles",
                   feeds: Mapping[str, np.ndarray]) -> DecodeResult:
    """The converted model's greedy decode from ``feeds``, judged against ``reference_decode``'s."""
    ref_tokens, ref_logits = reference
    steps = len(ref_tokens)
    conv_tokens, conv_logits = _decode(conv_run, roles, feeds, steps)
    agreed = next((i for i, (a, b) in enumerate(zip(ref_tokens, conv_tokens)) if a != b), steps)
    margin = noise = None
    near_tie = False
    if agreed < steps:
        ref_row, conv_row = ref_logits[agreed], conv_logits[agreed]
        margin = float(ref_row.max() - ref_row[conv_tokens[agreed]])
        noise = float(np.abs(ref_row - conv_row).max())
        scale = float(np.sqrt(np.mean(ref_row ** 2))) or 1.0
        # A flip the rounding explains: the margin within the logits' error, and that error a rounding's
        # (at most NEAR_TIE_NOISE of the logits' RMS; another model's logits differ by their whole scale).
        near_tie = margin <= noise <= NEAR_TIE_NOISE * scale
    return DecodeResult(steps, tuple(ref_tokens), tuple(conv_tokens), agreed, near_tie, margin, noise)


def decode_roles(model: ir.Model) -> _Roles:
    """The token input, the logits output, the cache pairs and the other integer inputs of a decode step."""
    pairs = find_cache_pairs(model.graph)
    if not pairs:
        raise UsageError("greedy decoding needs a model with a KV cache (past inputs returned as present outputs)")
    token = next((v.name for v in model.graph.inputs if v.dtype in _INTEGERS and _feeds_lookup(v)), None)
    if token is None:
        raise UsageError("greedy decoding found no token input (an integer input read by an embedding lookup)")
    presents = {p.present for p in pairs}
    logits = next((v.name for v in model.graph.outputs
                   if v.name not in presents and v.dtype == ir.DataType.FLOAT), None)
    if logits is None:
        raise UsageError("greedy decoding found no logits (a float output that is no present cache)")
    others = tuple(v.name for v in model.graph.inputs if v.dtype in _INTEGERS and v.name != token)
    return _Roles(token, logits, {p.past: p.present for p in pairs}, others)


def _feeds_lookup(value: ir.Value, depth: int = 4) -> bool:
    """Whether ``value`` reaches the index slot of an embedding lookup (through Casts and layout changes)."""
    for use in value.uses():
        node = use.node
        if node.op_type in _LOOKUPS and use.idx == 1 and node.inputs[0] is not None and node.inputs[0].is_initializer():
            return True
        if depth and node.op_type in LAYOUT_OPS | {"Cast"} and _feeds_lookup(node.outputs[0], depth - 1):
            return True
    return False


def _converted_session(path: str, backend: str, tmp: str) -> runners.Runner:
    if backend == "native":
        return runners.make_session(path, "converted model", runners.CPU, optimize=True)
    if backend != "emulate":
        raise UsageError(f"unknown backend {backend!r}: choose emulate or native")
    model = modelio.load(path)
    modelio.ensure_types(model)
    emulation.emulate(model, infer_types=False)
    derived = modelio.save_derived(model, tmp, "converted", modelio.wants_external(model, path))
    return runners.make_session(derived, "converted model", runners.CPU, optimize=False, source=os.fspath(path))


def _decode(run: runners.Runner, roles: _Roles, feeds: Mapping[str, np.ndarray], steps: int):
    """The greedy tokens and each step's last-position logits (float64) of one model."""
    feeds = {name: np.asarray(array) for name, array in feeds.items()}
    tokens, rows = [], []
    for _ in range(steps):
        outputs = run.run(feeds)
        row = np.asarray(outputs[roles.logits], dtype=np.float64).reshape(-1, np.shape(outputs[roles.logits])[-1])[-1]
        token = int(row.argmax())
        tokens.append(token)
        rows.append(row)
        feeds = _next_feeds(feeds, outputs, roles, token)
    return tokens, rows


def _next_feeds(feeds: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray], roles: _Roles, token: int) -> dict:
    """The inputs of the next step: the chosen token, the caches just written, the other inputs advanced."""
    old_tokens = feeds[roles.token]
    step = old_tokens.shape[-1]
    past = next(iter(roles.cache))
    total = feeds[past].shape[-2] + step if feeds[past].ndim >= 2 else None
    nxt = dict(feeds)  # inputs of no role (a merged decoder's use_cache_branch flag) stay as they are
    nxt.update({name: outputs[present] for name, present in roles.cache.items()})
    nxt[roles.token] = np.full(old_tokens.shape[:-1] + (1,), token, dtype=old_tokens.dtype)
    for name in roles.others:
        array = feeds[name]
        if array.ndim and array.shape[-1] == total:  # the whole sequence so far: one more column
            nxt[name] = np.concatenate([array, np.ones(array.shape[:-1] + (1,), array.dtype)], axis=-1)
        elif array.ndim and array.shape[-1] == step:  # this step's positions: the next one
            nxt[name] = array[..., -1:] + 1
    return nxt


__all__ = ["DecodeResult", "decode_against", "decode_roles", "decode_with", "greedy_decode", "reference_decode"]
