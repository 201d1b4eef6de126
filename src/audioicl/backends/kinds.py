"""The one form every backend kind declares itself in: ``Kind`` and its ``Option``s.

A kind's package ``__init__`` (``backends/hf``, ``backends/vllm`` ...) holds its ``Kind`` as data and imports
nothing heavy; its factory lives in a module of the package, imported only when a backend of the kind is made.
Everything that lists, validates, records or documents ``-o`` options reads the declaration: the ``-o``
check (``Kind.parse``), ``audioicl backends`` (``catalog``), the run record and the resume rule
(``Kind.answer_options``: an option that ``keeps_answers`` may change on a resumed run), and the options table
of ``docs/backends.md`` (``options_table``, checked by a test).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audioicl.errors import AudioICLError


@dataclass(frozen=True)
class Parser:
    """Turns an option's text into its value; ``expected`` finishes "must be ..." when it cannot."""

    expected: str
    convert: Callable[[str], Any]
    echo: bool = True  # False: a wrong value is not quoted back (it may be a secret given by mistake)

    def __call__(self, name: str, text: object) -> Any:
        try:
            return self.convert(str(text))
        except (TypeError, ValueError):
            got = f"got {text!r}" if self.echo else "the value given is not shown (is it a key?)"
            raise AudioICLError(f"backend option {name} must be {self.expected}, {got}") from None


def _spoken(values: Sequence[str]) -> str:
    return values[0] if len(values) == 1 else f"{', '.join(values[:-1])} or {values[-1]}"


def choice(*values: str) -> Parser:
    def convert(text: str) -> str:
        if text not in values:
            raise ValueError(text)
        return text

    return Parser(_spoken(values), convert)


TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _flag(text: str) -> bool:
    if text.lower() not in (*TRUE, *FALSE):
        raise ValueError(text)
    return text.lower() in TRUE


FLAG = Parser("true or false", _flag)
TEXT = Parser("text", str)


def _variable_name(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", text):
        raise ValueError(text)
    return text


# the name of an environment variable, never quoted back: a key pasted there by mistake is not echoed
VARIABLE = Parser("the name of an environment variable (letters, digits and _)", _variable_name, echo=False)


def whole(low: int = 1) -> Parser:
    def convert(text: str) -> int:
        number = int(text)
        if number < low:
            raise ValueError(text)
        return number

    return Parser(f"a whole number, at least {low}", convert)


def number(low: float = 0.0, above: bool = False) -> Parser:
    """A real number at least ``low`` (``above``: more than ``low``)."""

    def convert(text: str) -> float:
        value = float(text)
        if value != value or value < low or (above and value == low):  # NaN too
            raise ValueError(text)
        return value

    return Parser(f"a number {'above' if above else 'at least'} {low:g}", convert)


def fraction() -> Parser:
    """A share: above 0, at most 1."""

    def convert(text: str) -> float:
        value = float(text)
        if not 0 < value <= 1:
            raise ValueError(text)
        return value

    return Parser("a number above 0, at most 1", convert)


def auto_or(parser: Parser) -> Parser:
    return Parser(
        f"auto or {parser.expected}", lambda text: "auto" if text == "auto" else parser.convert(text)
    )


@dataclass(frozen=True)
class Option:
    """One ``-o NAME=VALUE`` of a kind. ``default``: the value a run gets when it is not given (None: off, or
    decided by the backend, which ``note`` then says); ``keeps_answers``: changes how answers are computed
    or fetched, not what they are, so a resumed run or another shard may set it otherwise; ``hidden``: set by
    a flag of its own (``--seed``), not listed among the ``-o`` options; ``conditions``: values that make a
    run measure something else than the model as published (``precision=fp8``), each with its condition's
    name, which the results' ``<model>`` carries (``<model>+fp8``)."""

    name: str
    parser: Parser
    default: Any
    help: str
    keeps_answers: bool = False
    note: str = ""
    hidden: bool = False
    conditions: Mapping[Any, str] = field(default_factory=dict)

    def value(self, text: object) -> Any:
        return self.parser(self.name, text)


class Settings:
    """A kind's options as parsed: each by its name (``settings.dtype``), the defaults filled in; ``given``:
    the names the user set."""

    def __init__(self, values: Mapping[str, Any], given: frozenset[str]):
        self._values = dict(values)
        self.given = given

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def replace(self, **values: Any) -> Settings:
        """These settings with ``values`` (parsed values, as given)."""
        return Settings({**self._values, **values}, self.given | frozenset(values))

    def __repr__(self) -> str:
        return f"Settings({self._values!r})"


@dataclass(frozen=True)
class Kind:
    """A backend kind: ``name`` (the ``backend`` of ``backend:name``), what it is, how its spec reads, its
    options, and ``factory`` (``"module:function"``, imported on first use: ``function(name, settings,
    workload) -> Backend``). ``extra``: the pip extra that installs ``packages`` (what the factory's module
    needs); ``checkpoint``: its name is a hub id or a local folder; ``gpu``: it wants a GPU per shard."""

    name: str
    summary: str
    spec: str
    factory: str
    options: tuple[Option, ...] = ()
    extra: str | None = None
    packages: tuple[str, ...] = ()
    checkpoint: bool = False
    gpu: bool = False

    @property
    def listed(self) -> tuple[Option, ...]:
        """The options ``-o`` sets (not ``hidden``)."""
        return tuple(option for option in self.options if not option.hidden)

    def option(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        raise KeyError(name)

    def parse(self, options: Mapping[str, object]) -> Settings:
        """The options checked and parsed, defaults filled in: an unknown name or a value of the wrong form is
        refused naming what it takes."""
        known = [option.name for option in self.options]
        unknown = sorted(set(options) - set(known))
        if unknown:
            listed = ", ".join(option.name for option in self.listed)
            raise AudioICLError(f"{self.name} backend takes no option {', '.join(unknown)} (known: {listed})")
        values = {
            option.name: option.default
            if options.get(option.name) is None
            else option.value(options[option.name])
            for option in self.options
        }
        return Settings(values, frozenset(name for name, value in options.items() if value is not None))

    def conditions(self, options: Mapping[str, object]) -> list[str]:
        """The condition names that ``options`` (as given, unparsed) set (``Option.conditions``), in the
        options' declared order."""
        named = []
        for option in self.options:
            text = options.get(option.name)
            if option.conditions and text is not None:
                label = option.conditions.get(option.value(text))
                named += [label] if label else []
        return named

    def answer_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """``options`` without those that keep the answers: what may change what a result line says (an
        option the kind does not declare is kept)."""
        keeps = {option.name for option in self.options if option.keeps_answers}
        return {key: value for key, value in options.items() if key not in keeps}

    def make(self) -> Callable[..., Any]:
        """The factory, its module imported now; a package it needs that is not installed is refused naming
        the extra that installs it."""
        module_name, _, function = self.factory.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise
            install = f": pip install 'audioicl[{self.extra}]'" if self.extra else ""
            raise AudioICLError(f"the {self.name} backend needs {exc.name or 'a package'}{install}") from exc
        return getattr(module, function)

    @property
    def missing(self) -> tuple[str, ...]:
        """Of ``packages``, those not installed here (found without importing them)."""
        return tuple(package for package in self.packages if not _installed(package))


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def options_table(kind: Kind) -> str:
    """The kind's ``-o`` options as a Markdown table (``docs/backends.md`` holds one per kind)."""
    lines = [
        "| option | takes | default | keeps the answers | what it does |",
        "|---|---|---|---|---|",
    ]
    for option in kind.listed:
        default = option.note or _shown(option.default)
        keeps = "yes" if option.keeps_answers else "no"
        lines.append(f"| `{option.name}` | {option.parser.expected} | {default} | {keeps} | {option.help} |")
    return "\n".join(lines)
