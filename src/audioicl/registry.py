"""Name → object registries filled at import time, with errors that list the known names."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from .errors import AudioICLError

T = TypeVar("T")


def near_name(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to a mistyped one (case aside), or None where none is close."""
    names = list(known)
    by_lower = {n.lower(): n for n in names}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    near = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[near[0]] if near else None


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """'unknown task 'AudioCont' (did you mean AudioCount?)', or the known names where none is near."""
    names = list(known)
    near = near_name(name, names)
    if near is not None:
        return f"unknown {kind} {name!r} (did you mean {near}?)"
    return f"unknown {kind} {name!r} (known: {', '.join(names) or 'none'})"


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._items[name] = item
        return item

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise AudioICLError(unknown_name(self.kind, name, self._items)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def names(self) -> list[str]:
        return list(self._items)

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())
