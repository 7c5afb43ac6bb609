"""Option groups shared between commands (defined once, reused).

An option of the library is declared once (``ampconv.options.declared.Option``:
its field, default, check and flag); ``click_option`` makes its click option,
with the field's name as the parameter, so a command's values build a record
by name (``declared_values``), with no per-option code here.

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
from typing import Any, Callable, Dict, Mapping, Sequence, Tuple

import click

from ampconv.errors import UsageError
from ampconv.options.conversion import OPTIONS
from ampconv.options.declared import REPEATED, SWITCH, Option
from ampconv_cli.errors import flag_of


def _stack(func: Callable, decorators) -> Callable:
    for decorator in reversed(decorators):
        func = decorator(func)
    return func


# Where ``_keep_io_names`` leaves a model path that --keep-io-types would have taken as its value.
SWALLOWED_MODEL = "ampconv.swallowed_model"


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
    """Turn the two keep-io flags into ``Config.keep_io_types``."""
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


# ----------------------------------------------------------------- click options from declarations
def _parse_each(parse: Callable[[str], Any]) -> Callable:
    """A click callback applying ``parse`` to every value; its ``UsageError`` becomes click's."""
    def callback(ctx, param, values):
        try:
            if isinstance(values, (tuple, list)):
                return tuple(parse(text) for text in values)
            return values if values is None else parse(values)
        except UsageError as exc:
            raise click.BadParameter(exc.render(flag_of), ctx=ctx, param=param) from None

    return callback


def _click_type(option: Option):
    flag = option.flag
    if flag.choices:
        return click.Choice(flag.choices, case_sensitive=not flag.any_case)
    if flag.number:
        kind, low, high, low_open = flag.number
        if low is None and high is None:
            return int if kind == "int" else float
        if kind == "int":
            return click.IntRange(min=low, max=high, min_open=low_open)
        return click.FloatRange(min=low, max=high, min_open=low_open)
    return None


def click_option(option: Option) -> Callable:
    """The click option of a declared option: its flag's spellings, help, type; the field's name and default."""
    flag = option.flag
    kwargs: Dict[str, Any] = {"help": flag.help, "show_default": flag.show_default}
    if flag.metavar:
        kwargs["metavar"] = flag.metavar
    if flag.form == SWITCH:
        kwargs.update(is_flag=True, default=option.default)
    elif flag.form == REPEATED:
        kwargs.update(multiple=True)
    else:  # VALUE and TOGGLE
        kwargs["default"] = option.default
    click_type = _click_type(option)
    if click_type is not None:
        kwargs["type"] = click_type
    if flag.parse is not None:
        kwargs["callback"] = _parse_each(flag.parse)
    return click.option(*flag.decls, option.name, **kwargs)


def declared_values(options: Sequence[Option], params: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields ``options`` set from a command's values: by name, repeatables as tuples, each one checked.

    The option's own check normalizes what was typed (``float16`` -> ``fp16``)
    and refuses a bad value before any work, in the flag's words.
    """
    fields = {}
    for option in options:
        value = params[option.name]
        value = tuple(value) if isinstance(value, list) else value
        fields[option.name] = option.check(value) if option.check is not None else value
    return fields


@dataclasses.dataclass(frozen=True)
class OptionGroup:
    """Click options that build one part of a record: a decorator, and the builder of its fields.

    ``declared``: the options declared once (``ampconv.options.declared.Option``)
    whose flags the group adds; their values pass to the record by name.
    ``options``: click options of the command's own (its output, display);
    ``build`` turns their values into record fields where they make any.
    ``check``: usage errors only the command line can see (a flag that does
    nothing given the others).
    """

    doc: str
    declared: Tuple[Option, ...] = ()
    options: Tuple[Callable, ...] = ()
    # (the command's parameter values, the names given on the command line) -> record fields
    build: Callable[[Mapping[str, Any], frozenset], Dict[str, Any]] = lambda params, given: {}
    check: Callable[[Mapping[str, Any], frozenset], None] = lambda params, given: None
    # The --help section that lists the group's options (``TopicCommand``); groups may share one.
    title: str = "Options"

    def __call__(self, func: Callable) -> Callable:
        """Add the group's options to the click command ``func``."""
        return _stack(func, tuple(click_option(option) for option in self.declared) + self.options)

    def param_names(self) -> Tuple[str, ...]:
        """The click parameter names of the group's options, in the order the group declares them."""
        probe = self(lambda: None)
        return tuple(param.name for param in reversed(probe.__click_params__))

    def config_fields(self, params: Mapping[str, Any], given: frozenset = frozenset()) -> Dict[str, Any]:
        """The record fields this group's values set (click errors for contradictions only the CLI sees)."""
        self.check(params, given)
        return {**declared_values(self.declared, params), **self.build(params, given)}


# ----------------------------------------------------------------- flags of the commands' own
# Several commands write a file, a format or less: each flag is spelled here once, its help
# the command's own words.
def output_flag(help: str) -> Callable:
    """``-o/--output FILE``: where the command writes its main file."""
    return click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help=help)


def report_flag(help: str) -> Callable:
    """``--report FILE``: the JSON report the command writes or merges into."""
    return click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None, help=help)


def format_flag(choices: Sequence[str], help: str) -> Callable:
    """``--format``: how the command prints its result."""
    return click.option("--format", "fmt", type=click.Choice(tuple(choices)), default=choices[0], show_default=True,
                        help=help)


def quiet_flag(help: str) -> Callable:
    """``-q/--quiet``: print less."""
    return click.option("-q", "--quiet", is_flag=True, help=help)


# ``--overwrite`` is the library's option (``Config.overwrite``): every command that writes a file takes it.
overwrite_flag = click_option(OPTIONS["overwrite"])


def _of(*names: str) -> Tuple[Option, ...]:
    return tuple(OPTIONS[name] for name in names)


def _keep_io_fields(params: Mapping[str, Any], given: frozenset) -> Dict[str, Any]:
    return {"keep_io_types": keep_io_value(params["keep_io"], params["no_keep_io"])}


def _check_data_flags(params: Mapping[str, Any], given: frozenset) -> None:
    """Options that would do nothing without ``--calibration-data`` (or its ``random``) are usage errors."""
    calibration_data = tuple(params["calibration_data"])
    if calibration_data:
        if "calibration_samples" in given and calibration_data != ("random",):
            raise click.UsageError("--calibration-samples sets how many random samples to draw; "
                                   "it needs --calibration-data random")
        return
    for name in ("tune", "data_max", "underflow_fraction", "calibration_samples", "calibration_seed"):
        if name in given:
            raise click.UsageError(f"--{name.replace('_', '-')} needs --calibration-data")


policy_options = OptionGroup(
    "--level, --preset, --op-info, --mixlist, --block-op, --target.",
    _of("level", "preset", "op_info", "mixlists", "block_ops", "target"),
    title="Policy: which ops run LOW",
)


precision_options = OptionGroup(
    "--dtype, keep-io, the name regex overrides: the planner's choices beyond the policy.",
    _of("dtype", "fallback_dtype"),
    (
        # Two flags build one field (keep_io_types): a bare flag, a comma list, or its negation.
        click.option("--keep-io-types", "keep_io", default=None, is_flag=False, flag_value="*",
                     metavar="[NAMES]", callback=_keep_io_names,
                     help="Keep graph inputs/outputs float32 (the default); with a comma list, only those."),
        click.option("--no-keep-io-types", "no_keep_io", is_flag=True,
                     help="Convert graph inputs/outputs to the low type too."),
        click_option(OPTIONS["kv_cache"]), click_option(OPTIONS["keep_fp32"]), click_option(OPTIONS["keep_bf16"]),
        click_option(OPTIONS["force_low"]),
    ),
    lambda params, given: {**_keep_io_fields(params, given),
                           **declared_values(_of("kv_cache", "keep_fp32", "keep_bf16", "force_low"), params)},
    title="Policy: which ops run LOW",
)


constant_options = OptionGroup(
    "--clamp and the constant guard's range limits.",
    _of("clamp", "max_finite", "min_positive", "clamp_small"),
    title="Constants out of the LOW range",
)


model_options = OptionGroup(
    "What happens to the model around the conversion: --opset upgrade first, --annotate stamps after.",
    _of("opset", "keep_opset", "annotate"),
    title="Output and checks",
)


data_options = OptionGroup(
    "--calibration-data and what it enables (the data guards' thresholds, --tune), the synthetic run without it, "
    "and the release step on either.",
    _of("calibration_data", "calibration_samples", "calibration_seed", "data_max", "underflow_fraction",
        "synthetic_run", "synthetic_budget", "release", "tune"),
    check=_check_data_flags,
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
