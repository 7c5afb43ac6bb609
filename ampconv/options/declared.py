"""An option declared once: its field, default, check, records, library words and command-line flag.

Every option of a conversion or a validation is one ``Option`` value. What was
written three times before (a click option, a ``Config`` field and its
docstring, a group field and its check) is made from it:

- ``option_record`` turns a class into the frozen dataclass whose fields are
  the options it is given, in order: each value is normalized and checked by
  its option's ``check`` when the record is made, and the class's docstring
  gains an ``Attributes`` section from the options' ``doc``. ``Config``, the
  option groups and ``ValidateOptions`` are such records; a record's own
  ``__post_init__`` holds only the checks that read several fields.
- the CLI (``ampconv_cli.options``) makes each ``Flag`` a click option with the
  same parameter name as the field, so a command's values build a record by
  name, with no per-option code.

This module is the foundation of both: it imports nothing of ampconv's but
the errors, and never click (a ``Flag`` describes its click type as data).
"""

from __future__ import annotations

import dataclasses
import textwrap
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from ampconv.errors import register_flags

# What a Flag's value is, in words the CLI turns into click types.
VALUE, SWITCH, TOGGLE, REPEATED = "value", "switch", "toggle", "repeated"


@dataclasses.dataclass(frozen=True)
class Flag:
    """How an option is spelled on the command line.

    Attributes:
        decls: the flag's spellings (``("--level",)``; a toggle names both
            sides, ``("--synthetic-run/--no-synthetic-run",)``).
        help: the ``--help`` text.
        form: ``VALUE`` (takes a value), ``SWITCH`` (present or not),
            ``TOGGLE`` (``--x/--no-x``) or ``REPEATED`` (a value, repeatable;
            the field receives a tuple).
        choices: the accepted values (case-insensitive when ``any_case``).
        number: ``("int"|"float", low, high, low_open)``: a number in a
            range (None ends are open).
        metavar: the value's placeholder in ``--help``.
        show_default: print the default in ``--help``.
        parse: each value as typed -> the field's value (a ``UsageError``
            refuses it, in the flag's words).
    """

    decls: Tuple[str, ...]
    help: str
    form: str = VALUE
    choices: Tuple[str, ...] = ()
    any_case: bool = False
    number: Optional[Tuple[str, Optional[float], Optional[float], bool]] = None
    metavar: Optional[str] = None
    show_default: bool = False
    parse: Optional[Callable[[str], Any]] = None


@dataclasses.dataclass(frozen=True)
class Option:
    """One option: its field in the records that carry it, its check, its words and its flag.

    Attributes:
        name: the field's name (``Config(name=...)``, the click parameter).
        default: the field's default.
        doc: the library's words (a record's ``Attributes`` entry).
        annotation: the field's type, as text.
        check: value -> the value kept (normalized: what people type, one
            string where a tuple goes); raises a ``UsageError`` that names the
            option (``ampconv.errors.named``). Runs in every record the option
            is a field of, so it must be idempotent.
        flag: the command-line spelling; None: a library-only option.
        compare: False for callbacks (kept out of equality and repr).
    """

    name: str
    default: Any
    doc: str
    annotation: str = "Any"
    check: Optional[Callable[[Any], Any]] = None
    flag: Optional[Flag] = None
    compare: bool = True

    @property
    def param(self) -> str:
        """The click parameter name: the field's."""
        return self.name


def option_record(options: Sequence[Option]) -> Callable[[type], type]:
    """Class decorator: ``options`` become the frozen dataclass's fields, each checked on creation.

    The class may define ``__post_init__`` for checks that read several
    fields; it runs after every option's own ``check``. Its docstring gains
    an ``Attributes`` section from the options' ``doc``.
    """

    def make(cls: type) -> type:
        own = dict(cls.__dict__.get("__annotations__", {}))
        cls.__annotations__ = {**{option.name: option.annotation for option in options}, **own}
        for option in options:
            setattr(cls, option.name, dataclasses.field(default=option.default, compare=option.compare,
                                                        repr=option.compare))
        cls.__post_init__ = _checked_post_init(options, cls.__dict__.get("__post_init__"))
        cls.__doc__ = (cls.__doc__ or "").rstrip() + "\n\n" + attributes_doc(options)
        return dataclasses.dataclass(frozen=True)(cls)

    return make


def _checked_post_init(options: Sequence[Option], own: Optional[Callable]) -> Callable:
    checked = tuple(option for option in options if option.check is not None)

    def __post_init__(self) -> None:
        for option in checked:
            object.__setattr__(self, option.name, option.check(getattr(self, option.name)))
        if own is not None:
            own(self)

    return __post_init__


def attributes_doc(options: Sequence[Option], indent: str = "    ") -> str:
    """The ``Attributes`` section of a record's docstring, one entry per option."""
    lines = [f"{indent}Attributes:"]
    for option in options:
        body = textwrap.fill(f"{option.name}: {option.doc}", width=92, initial_indent=indent * 2,
                             subsequent_indent=indent * 3)
        lines.append(body)
    return "\n".join(lines) + "\n"


def register_spellings(options: Sequence[Option]) -> None:
    """Tell ``ampconv.errors`` how the command line spells each option with a flag (its messages name them)."""
    register_flags({option.name: option.flag.decls[0] for option in options if option.flag is not None})


def by_name(options: Sequence[Option]) -> Dict[str, Option]:
    """``{name: option}`` of ``options``; two options of one name are a programming error."""
    table: Dict[str, Option] = {}
    for option in options:
        if option.name in table:
            raise ValueError(f"option {option.name!r} declared twice")
        table[option.name] = option
    return table


def pick(table: Dict[str, Option], *names: str) -> Tuple[Option, ...]:
    """The options of ``table`` named, in that order."""
    return tuple(table[name] for name in names)
