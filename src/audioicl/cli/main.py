"""The ``audioicl`` command: argument parsing only; each sub-command calls into the library.

Each sub-command lives in its own module of ``audioicl.cli``, imported below by name, and registers itself
with ``options.command``:
a function that adds its parser, decorating the function that runs it and returns the exit code.
User errors (``AudioICLError``) print as one line and exit 2 (usage) or the command's own code;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from audioicl import __version__
from audioicl.errors import AudioICLError

from . import (  # noqa: F401  (each registers its sub-command, in this order)
    audit,
    build,
    chat_template,
    compare,
    demo,
    download,
    fetch_sources,
    merge,
    report,
    run,
    score,
    study,
    validate,
)
from .options import COMMANDS

EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="audioicl",
        description="Build, run and score AudioICL-Bench, in-context learning for audio-language models.",
    )
    parser.add_argument("--version", action="version", version=f"audioicl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add, handler in COMMANDS:
        add(sub).set_defaults(run=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
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
