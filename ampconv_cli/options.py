"""Option groups shared between commands (defined once, reused).

Each group (an ``OptionGroup``, after Polygraphy's argument groups) adds its
click options to a command and builds its part of the conversion request
from their values (``config_fields``): ``policy_options`` the policy fields,
``precision_options`` and ``constant_options`` the planner's,
``model_options`` the writer's, ``data_options`` the calibration and search
fields. A command joins the parts into one ``ampconv.Config``, whose option
groups check them once. Each group's ``title`` is the ``--help`` section that
lists its options (``TopicCommand``).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Mapping, Tuple

import click

from ampconv.config import DTYPES, KV_CACHE, LEVELS, SYNTHETIC_BUDGET_S, TARGETS
from ampconv.policy.lists import PRESETS


def _stack(func: Callable, decorators) -> Callable:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func





# The ONNX names of the LOW types, accepted for --dtype as people also write them.
DTYPE_NAMES = {"float16": "fp16", "bfloat16": "bf16"}
# Where ``_keep_io_names`` leaves a model path that --keep-io-types would have taken as its value.
SWALLOWED_MODEL = "ampconv.swallowed_model"


def _dtype_key(ctx, param, value):
    """``float16``/``bfloat16`` -> the --dtype key (fp16/bf16)."""
    return DTYPE_NAMES.get(value.lower(), value.lower()) if value else value


def _keep_io_names(ctx, param, value):
    """A bare --keep-io-types placed before MODEL takes the model path as its value: give it back.

    Graph input/output names do not end in ``.onnx``; a value that does is the
    model (an existing file is not enough: an output may share a file's name).
    ``model_argument`` reads it.
    """
    if value and value != "*" and value.lower().endswith(".onnx"):
        ctx.meta[SWALLOWED_MODEL] = value
        return "*"
    return value


def model_argument(ctx: click.Context, model):
    """MODEL, or the path a bare --keep-io-types before it took (``_keep_io_names``)."""
    swallowed = ctx.meta.get(SWALLOWED_MODEL)
    if model is None and swallowed is None:
        raise click.UsageError("Missing argument 'MODEL'.")
    if model is not None and swallowed is not None:
        raise click.UsageError(f"--keep-io-types takes graph input/output names, not the file {swallowed!r}")
    return model if model is not None else swallowed


def keep_io_value(keep_io, no_keep_io):
    """Turn the two keep-io options into ``Config.keep_io_types``."""
    if no_keep_io and keep_io not in (None,):
        raise click.UsageError("--keep-io-types and --no-keep-io-types contradict each other")
    if no_keep_io:
        return False
    if keep_io in (None, "*"):
        return True
    names = tuple(n.strip() for n in keep_io.split(",") if n.strip())
    if not names:
        raise click.BadParameter("expected a comma list of input/output names", param_hint="--keep-io-types")
    return names


@dataclasses.dataclass(frozen=True)
class OptionGroup:
    """Click options that build one part of ``Config``: a decorator, and the builder of its fields."""

    doc: str
    options: Tuple[Callable, ...]
    # (the command's parameter values, the names given on the command line) -> Config fields
    build: Callable[[Mapping[str, Any], frozenset], Dict[str, Any]] = lambda params, given: {}
    # The --help section that lists the group's options (``TopicCommand``); groups may share one.
    title: str = "Options"

    def __call__(self, func: Callable) -> Callable:
        """Add the group's options to the click command ``func``."""
        return _stack(func, self.options)

    def param_names(self) -> Tuple[str, ...]:
        """The click parameter names of the group's options, in the order the group declares them."""
        probe = self(lambda: None)
        return tuple(param.name for param in reversed(probe.__click_params__))

    def config_fields(self, params: Mapping[str, Any], given: frozenset = frozenset()) -> Dict[str, Any]:
        """The ``Config`` fields this group's values set (click errors for contradictions only the CLI sees)."""
        return self.build(params, given)


def _fields(*names: str) -> Callable[[Mapping[str, Any], frozenset], Dict[str, Any]]:
    """A builder passing the named parameters on unchanged (tuples for repeatable options)."""

    def build(params: Mapping[str, Any], given: frozenset) -> Dict[str, Any]:
        return {name: tuple(params[name]) if isinstance(params[name], list) else params[name] for name in names}

    return build


def _precision_fields(params: Mapping[str, Any], given: frozenset) -> Dict[str, Any]:
    return {
        "dtype": params["dtype"], "keep_io_types": keep_io_value(params["keep_io"], params["no_keep_io"]),
        "keep_fp32": tuple(params["keep_fp32"]), "keep_bf16": tuple(params["keep_bf16"]),
        "force_low": tuple(params["force_low"]),
        "kv_cache": params["kv_cache"], "fallback_dtype": params["fallback_dtype"],
    }


def _data_fields(params: Mapping[str, Any], given: frozenset) -> Dict[str, Any]:
    """The calibration fields; options that would do nothing without ``--calibration-data`` are usage errors."""
    calibration_data = tuple(params["calibration_data"])
    if calibration_data:
        if "calibration_samples" in given and calibration_data != ("random",):
            raise click.UsageError("--calibration-samples sets how many random samples to draw; "
                                   "it needs --calibration-data random")
    else:
        for name in ("tune", "data_max", "underflow_fraction", "calibration_samples", "calibration_seed"):
            if name in given:
                raise click.UsageError(f"--{name.replace('_', '-')} needs --calibration-data")
    return {"calibration_data": calibration_data,
            **_fields("calibration_samples", "calibration_seed", "data_max", "underflow_fraction", "tune",
                      "synthetic_run", "synthetic_budget")(params, given)}


policy_options = OptionGroup(
    "--level, --preset, --op-info, --mixlist, --block-op, --target.",
    (
        click.option("--level", type=click.Choice(LEVELS, case_sensitive=False), default="O2", show_default=True,
                     metavar="|".join(LEVELS),
                     help="O0 no change, O1 white list LOW, O2 all LOW but the black list, "
                     "O3 everything LOW, auto by --target."),
        click.option("--preset", type=click.Choice(sorted(PRESETS)), default="default", show_default=True,
                     help="Built-in op lists."),
        click.option("--op-info", "op_info", type=click.Path(dir_okay=False), default=None, metavar="FILE",
                     help="Ascend operator-info JSON (aic-<soc>-ops-info.json): precision_reduce true -> "
                     "white, false -> black, absent -> gray; applied after --preset, before --mixlist."),
        click.option("--mixlist", "mixlists", multiple=True, type=click.Path(dir_okay=False),
                     metavar="FILE", help="Ascend modify_mixlist JSON; repeatable, applied left to right."),
        click.option("--block-op", "block_ops", multiple=True, metavar="OP",
                     help="Keep this op type float32 at every level (OpType or domain::OpType)."),
        click.option("--target", type=click.Choice(TARGETS), default=None,
                     help="Deployment device for --level auto (default: from the installed onnxruntime)."),
    ),
    _fields("level", "preset", "op_info", "mixlists", "block_ops", "target"),
    title="Policy: which ops run LOW",
)


precision_options = OptionGroup(
    "--dtype, keep-io, the name regex overrides: the planner's choices beyond the policy.",
    (
        click.option("--dtype", type=click.Choice(DTYPES + tuple(DTYPE_NAMES), case_sensitive=False),
                     default="fp16", show_default=True, callback=_dtype_key, metavar="fp16|bf16",
                     help="The low-precision type (fp16/float16 or bf16/bfloat16)."),
        click.option("--fallback-dtype", "fallback_dtype", type=click.Choice(("float32", "bf16"),
                     case_sensitive=False), default="float32", show_default=True,
                     help="What a node runs in when its values do not fit fp16 (constants, calibration "
                     "data, the synthetic run, the range analysis): float32, or bf16 where its schema "
                     "admits it (float32's range at fp16's speed); the rest stays fp16. bf16 needs --dtype fp16."),
        click.option("--keep-io-types", "keep_io", default=None, is_flag=False, flag_value="*",
                     metavar="[NAMES]", callback=_keep_io_names,
                     help="Keep graph inputs/outputs float32 (the default); with a comma list, only those."),
        click.option("--no-keep-io-types", "no_keep_io", is_flag=True,
                     help="Convert graph inputs/outputs to the low type too."),
        click.option("--kv-cache", "kv_cache", type=click.Choice(KV_CACHE), default="keep", show_default=True,
                     help="low: a decoder's KV cache inputs and outputs (past/present pairs, found by "
                     "structure) in the low type, so the cache never round-trips through float32; keep: "
                     "as --keep-io-types says."),
        click.option("--keep-fp32", multiple=True, metavar="REGEX",
                     help="Keep nodes whose name matches float32; repeatable."),
        click.option("--keep-bf16", multiple=True, metavar="REGEX",
                     help="Run nodes whose name matches in bf16 (float32 where their schema refuses it); "
                     "repeatable; needs --fallback-dtype bf16."),
        click.option("--force-low", multiple=True, metavar="REGEX",
                     help="Force nodes whose name matches to the low type (schema limits still apply)."),
    ),
    _precision_fields,
    title="Policy: which ops run LOW",
)


constant_options = OptionGroup(
    "--clamp and the constant guard's range limits.",
    (
        click.option("--clamp", is_flag=True,
                     help="Clamp out-of-range constants to the low type's range instead of keeping "
                     "their consumers float32."),
        click.option("--max-finite", type=click.FloatRange(min=0, min_open=True), default=None, metavar="X",
                     help="Constants with |x| above X keep their consumers float32 (--clamp: clamped to "
                     "+-X). Default: the low type's max, 65504 for fp16."),
        click.option("--min-positive", type=click.FloatRange(min=0, min_open=True), default=None, metavar="Y",
                     help="Non-zero constants with |x| below Y count as too small (default: those that "
                     "round to 0; --clamp raises them to the smallest subnormal, 5.96e-08 for fp16)."),
        click.option("--clamp-small", type=click.Choice(("raise", "flush")), default=None,
                     help="With --clamp: raise too small values to +-min positive (default) or flush "
                     "them to 0."),
    ),
    _fields("clamp", "max_finite", "min_positive", "clamp_small"),
    title="Constants out of the LOW range",
)


model_options = OptionGroup(
    "What happens to the model around the conversion: --opset upgrade first, --annotate stamps after.",
    (
        click.option("--opset", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Upgrade the model to default-domain opset N with onnx's version converter before "
                     "converting. By default a model whose opset keeps its heavy ops or Q/DQ nodes from the "
                     "LOW type is upgraded to the first opset that admits them (bf16 Conv: 22; a float16 "
                     "Q/DQ scale: 19)."),
        click.option("--keep-opset", is_flag=True,
                     help="Never upgrade the model's opset by default (not with --opset)."),
        click.option("--annotate", is_flag=True,
                     help="Stamp each node's precision and rule into its metadata_props "
                     "(ampconv.core.precision, ampconv.rule), visible in model viewers."),
    ),
    _fields("opset", "keep_opset", "annotate"),
    title="Output and checks",
)


data_options = OptionGroup(
    "--calibration-data and what it enables: the data guards' thresholds and --tune.",
    (
        click.option("--calibration-data", "calibration_data", multiple=True, metavar="PATH",
                     help="Calibration samples: FILE.npz, a folder of .npz, ONNX test_data_set_* folders "
                     "(repeatable), or 'random'. Nodes whose activations overflow or underflow the low "
                     "type stay float32."),
        click.option("--calibration-samples", type=click.IntRange(min=1), default=8, show_default=True, metavar="N",
                     help="How many samples --calibration-data random draws."),
        click.option("--calibration-seed", type=int, default=0, show_default=True, metavar="S",
                     help="Seed of --calibration-data random."),
        click.option("--data-max", type=click.FloatRange(min=0, min_open=True), default=None, metavar="X",
                     help="Keep a node float32 when a calibration value exceeds this "
                     "(default: half the low type's max, 32752 for fp16)."),
        click.option("--underflow-fraction", type=click.FloatRange(min=0, max=1, min_open=True), default=None,
                     metavar="F",
                     help="Share of non-zero values below the low type's normal range above which a tensor "
                     "feeding Log/Div/Pow/Sqrt/a normalization stays float32 (default 0.5)."),
        click.option("--synthetic-run/--no-synthetic-run", "synthetic_run", default=None,
                     help="Without --calibration-data, the model runs once in float32 on one seeded random sample "
                     "(inputs in their --input-range) when its estimated cost fits --synthetic-budget: nodes whose "
                     "values overflow the low type there stay float32, and the summary says how far each input "
                     "may grow. --synthetic-run: run whatever the estimate, when memory allows; "
                     "--no-synthetic-run: never."),
        click.option("--synthetic-budget", "synthetic_budget", type=click.FloatRange(min=0, min_open=True),
                     default=None, metavar="SECONDS",
                     help=f"CPU seconds the synthetic run may cost by its estimate (FLOPs, bytes and nodes at this "
                     f"machine's measured rates). Default {SYNTHETIC_BUDGET_S:g}, and a run over half a second must "
                     "compute at least as long as onnxruntime sets its nodes up."),
        click.option("--tune", is_flag=True,
                     help="With --calibration-data: validate on the samples and keep float32 the fewest "
                     "nodes that make it pass (tolerance: --rtol/--atol, else the default criteria)."),
    ),
    _data_fields,
    title="Calibration and tune",
)



# The groups that build ``Config``, in the order a command applies them.
CONFIG_GROUPS = (policy_options, precision_options, constant_options, model_options, data_options)


class TopicCommand(click.Command):
    """A click command whose ``--help`` lists its options by topic, then a few examples.

    ``topics``: (section title, option groups) pairs, in order; the options of
    each group are listed under its section (the groups' ``title``). Options no
    group lists (``--help``) join the last section. ``examples``: (command
    line, what it does) pairs printed at the end.
    """

    def __init__(self, *args, topics: Tuple = (), examples: Tuple = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.topics = tuple((title, tuple(name for group in groups for name in group.param_names()))
                            for title, groups in topics)
        self.examples = tuple(examples)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:  # noqa: D102
        records = {param.name: param.get_help_record(ctx) for param in self.get_params(ctx)
                   if isinstance(param, click.Option)}
        listed = {name for _, names in self.topics for name in names}
        rest = [record for name, record in records.items() if record and name not in listed]
        for index, (title, names) in enumerate(self.topics):
            rows = [records[name] for name in names if records.get(name)]
            if index == len(self.topics) - 1:
                rows, rest = rows + rest, []  # --help joins the last topic (display)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
        if rest:
            with formatter.section("Other"):
                formatter.write_dl(rest)

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:  # noqa: D102
        if not self.examples:
            return
        with formatter.section("Examples"):
            indent = " " * formatter.current_indent
            for line, meaning in self.examples:  # written as is: a wrapped command line would not paste
                formatter.write(f"{indent}# {meaning}\n{indent}{line}\n")


def topics_of(*groups: OptionGroup) -> Tuple:
    """``TopicCommand``'s topics from option groups: one section per title, in the order titles first appear."""
    sections: Dict[str, list] = {}
    for group in groups:
        sections.setdefault(group.title, []).append(group)
    return tuple((title, tuple(members)) for title, members in sections.items())
