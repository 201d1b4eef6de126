"""The ``audioicl`` command: argument parsing only; each sub-command calls into the library.

Each sub-command lives in its own module of ``audioicl.commands`` and registers itself with ``@command``:
a function that adds its parser, decorating the function that runs it and returns the exit code.
User errors (``AudioICLError``) print as one line and exit 2 (usage) or the command's own code;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from . import __version__
from .errors import AudioICLError

EXIT_USAGE = 2


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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="audioicl",
        description="Build, run and score AudioICL-Bench, in-context learning for audio-language models.",
    )
    parser.add_argument("--version", action="version", version=f"audioicl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add, run in COMMANDS:
        add(sub).set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from . import commands  # noqa: F401  (registers the sub-commands)

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except AudioICLError as exc:  # raised by an option's type function (parse_int_set ...): a usage error
        parser.error(str(exc))
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.run(args) or 0)
    except AudioICLError as exc:
        print(f"audioicl {args.command}: error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USAGE)
    except KeyboardInterrupt:
        print(f"audioicl {args.command}: interrupted", file=sys.stderr)
        return 130
