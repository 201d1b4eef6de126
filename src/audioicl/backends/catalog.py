"""What each backend kind is, for ``audioicl backends``: its declaration (``kinds.Kind``: summary, spec, ``-o``
options with their defaults, the extra that installs what it needs), whether those packages are installed here
(found without importing them) and, for ``builtin``, the solvers it serves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .base import backend_kinds, kind_of
from .kinds import Kind, options_table


def _first_sentence(text: str | None) -> str:
    if not text:
        return ""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


@dataclass(frozen=True)
class BackendKind:
    """A kind as ``audioicl backends`` shows it."""

    kind: Kind
    missing: tuple[str, ...]
    solvers: tuple[tuple[str, str], ...] = ()  # (name, summary) of the built-in solvers

    @property
    def installed(self) -> bool:
        return not self.missing

    def to_json(self) -> dict[str, Any]:
        kind = self.kind
        return {
            "kind": kind.name,
            "summary": kind.summary,
            "spec": kind.spec,
            "options": [
                {
                    "name": o.name,
                    "takes": o.parser.expected,
                    "default": o.default,
                    "keeps_answers": o.keeps_answers,
                    "note": o.note,
                    "help": o.help,
                }
                for o in kind.listed
            ],
            "extra": kind.extra,
            "install": f"pip install 'audioicl[{kind.extra}]'" if kind.extra else None,
            "packages": list(kind.packages),
            "installed": self.installed,
            "missing": list(self.missing),
            "solvers": [{"name": name, "summary": summary} for name, summary in self.solvers],
        }


def describe_kind(name: str) -> BackendKind:
    kind = kind_of(name)
    solvers: tuple[tuple[str, str], ...] = ()
    if name == "builtin":
        from audioicl.solvers import SOLVERS

        solvers = tuple((solver, _first_sentence(factory.__doc__)) for solver, factory in SOLVERS.items())
    return BackendKind(kind, kind.missing, solvers)


def describe_backends() -> list[BackendKind]:
    """Every backend kind: this package's, then any registered from elsewhere."""
    return [describe_kind(name) for name in backend_kinds()]


def options_markdown() -> str:
    """The options of every kind as Markdown, a section each: what ``docs/backends.md`` holds between its
    generated markers (``audioicl backends --markdown`` prints it; a test fails when the page is stale)."""
    sections = []
    for entry in describe_backends():
        kind = entry.kind
        install = f"`pip install 'audioicl[{kind.extra}]'`" if kind.extra else "nothing more to install"
        sections.append(
            f"### `{kind.name}`: `{kind.spec}`\n\n{kind.summary} Needs {install}.\n\n{options_table(kind)}\n"
        )
    return "\n".join(sections)
