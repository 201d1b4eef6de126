"""What the sub-commands share: the registry of commands and the parsers of option values."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from audioicl.errors import AudioICLError


def parse_int_set(text: str) -> list[int]:
    """``"1-3,5"`` → ``[1, 2, 3, 5]`` (sorted, unique, non-negative)."""
    values: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                low, high = part.split("-", 1)
                values.update(range(int(low), int(high) + 1))
            else:
                values.add(int(part))
        except ValueError:
            raise AudioICLError(f"not a number or range: {part!r}") from None
    if not values:
        raise AudioICLError(f"empty list: {text!r}")
    return sorted(values)


def parse_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


COMMANDS: list[tuple[Callable[[argparse._SubParsersAction], argparse.ArgumentParser], Callable]] = []


def command(add: Callable[[argparse._SubParsersAction], argparse.ArgumentParser]):
    """Register a sub-command: ``add`` builds its parser, the decorated function runs it."""

    def decorate(run: Callable[[argparse.Namespace], int]):
        COMMANDS.append((add, run))
        return run

    return decorate
