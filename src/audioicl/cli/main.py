"""The ``audioicl`` command: argument parsing only; each sub-command calls into the library.

Each sub-command lives in its own module of ``audioicl.cli``, named in ``COMMAND_MODULES`` and imported once
the signal handlers are set, and registers itself with ``options.command``:
a function that adds its parser, decorating the function that runs it and returns the exit code.
User errors (``AudioICLError``) print as one line and exit 2 (usage) or the command's own code;
anything else is a bug and keeps its traceback. Not bugs either, and one line each: a write the system
refused (``WriteFailed``, or an ``OSError`` of full or read-only storage from a library's own write: exit 1,
with ``: it resumes`` for the commands in ``RESUMING``) and a command stopped by a signal (``Stopped``: exit
128 + the signal's number). SIGTERM and SIGINT are handled alike for every command from the start of ``main``:
the signal raises ``Stopped`` where the command is, so that its locks are let go and its atomic writes left
whole on the way out; ``run`` handles them itself while it runs, stopping at its next safe point. SIGUSR1
prints where every thread of the command is (Python's ``faulthandler``) to stderr and lets it go on: how to
see what a command that seems stuck waits for, its build workers too (they inherit it).
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence

from audioicl import __version__
from audioicl.errors import STORAGE_ERRNOS, AudioICLError, Stopped, WriteFailed, write_failed

# Each registers its sub-command when imported, in this order; imported by ``build_parser``, after ``main`` has
# set the signal handlers, so that a Ctrl-C during the imports (a second or more) is heard as any other.
COMMAND_MODULES = (
    "audit",
    "backends",
    "build",
    "chat_template",
    "compare",
    "demo",
    "download",
    "export",
    "fetch_sources",
    "import_inspect",
    "import_lmms_eval",
    "leaderboard",
    "lmms_eval_path",
    "merge",
    "models",
    "report",
    "run",
    "score",
    "study",
    "tasks",
    "validate",
)
EXIT_USAGE = 2
# The commands that, run again after a failed write, pick up where they stopped (the others start over).
RESUMING = frozenset({"build", "demo", "download", "fetch-sources", "merge", "run", "study"})
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# prints every thread's stack and goes on (not on Windows, which has no SIGUSR1)
WHERE_SIGNAL = getattr(signal, "SIGUSR1", None)


_LINE_BREAKS = str.maketrans({"\r": " ", "\n": " "})


def one_line(text: str) -> str:
    """``text`` as one line a terminal shows as it is: line breaks (a server's multi-line body, a path) as
    spaces, any other control character (an escape sequence in an id or a server's answer) as its ``\\xNN``."""
    text = text.translate(_LINE_BREAKS)
    return "".join(f"\\x{ord(c):02x}" if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text)


def _stopper(command_pid: int):
    """The handler of ``STOP_SIGNALS``: in the command's process, raise ``Stopped``; in a worker process
    forked from it (a build's pool), die by the signal as a worker should (the build ends its workers with it)."""

    def stop_here(signum: int, _frame: object) -> None:
        if os.getpid() != command_pid:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        name = signal.Signals(signum).name
        raise Stopped(f"stopped by {name}", exit_code=128 + signum, signal=name)

    return stop_here


class Parser(argparse.ArgumentParser):
    """argparse's parser with a usage error on one line: what is wrong and where the usage is, not the
    sub-command's usage (16 lines for ``run``) above the line that matters."""

    def error(self, message: str):  # type: ignore[override]  (argparse's signature: it does not return)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every sub-command or, for a ``command`` known by name, of that one alone: its module is
    the only one imported (``audioicl score`` starts without the other twenty), and its help and errors are
    what the full parser gives for it."""
    module = None if command is None else command.replace("-", "_")
    chosen = (module,) if module in COMMAND_MODULES else COMMAND_MODULES
    for name in chosen:
        importlib.import_module(f"{__package__}.{name}")
    from .options import COMMANDS

    def module_of(entry: tuple) -> str:
        return entry[1].__module__.rsplit(".", 1)[-1]

    parser = Parser(
        prog="audioicl",
        description="Build, run and score AudioICL-Bench, in-context learning for audio-language models.",
    )
    parser.add_argument("--version", action="version", version=f"audioicl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # in the listing's order, whatever the order of import in this process
    for add, handler in sorted(COMMANDS, key=lambda entry: COMMAND_MODULES.index(module_of(entry))):
        if module_of((add, handler)) in chosen:
            add(sub).set_defaults(run=handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    handler = _stopper(os.getpid())
    in_main_thread = threading.current_thread() is threading.main_thread()  # where handlers may be set
    previous = {signum: signal.signal(signum, handler) for signum in STOP_SIGNALS if in_main_thread}
    telling = in_main_thread and _tell_where_on_signal()
    try:
        return _main(argv)
    finally:
        if telling:
            faulthandler.unregister(WHERE_SIGNAL)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _tell_where_on_signal() -> bool:
    """``WHERE_SIGNAL`` prints every thread's stack to stderr from now on; False where it cannot (no such signal,
    a stderr that is no file: a test's capture)."""
    if WHERE_SIGNAL is None or sys.stderr is None:
        return False
    try:
        faulthandler.register(WHERE_SIGNAL, file=sys.stderr, all_threads=True)
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is both of the last two
        return False
    return True


def _main(argv: Sequence[str] | None) -> int:
    try:
        given = list(sys.argv[1:] if argv is None else argv)
        parser = build_parser(given[0] if given and not given[0].startswith("-") else None)
    except Stopped as exc:  # while the commands were imported: nothing started yet
        print(f"audioicl: {exc}", file=sys.stderr)
        return exc.exit_code
    try:
        args = parser.parse_args(argv)
    except AudioICLError as exc:  # raised by an option's type function (parse_int_set ...): a usage error
        parser.error(str(exc))
    if not getattr(args, "run", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.run(args) or 0)
    except Stopped as exc:
        said = str(exc)
        if args.command in RESUMING and "run the same command again" not in said:
            said += "; run the same command again: it resumes"
        print(f"audioicl {args.command}: {one_line(said)}", file=sys.stderr)
        return exc.exit_code
    except WriteFailed as exc:
        return _write_failed(args.command, exc)
    except AudioICLError as exc:
        print(f"audioicl {args.command}: error: {one_line(str(exc))}", file=sys.stderr)
        return getattr(exc, "exit_code", EXIT_USAGE)
    except BrokenPipeError:  # the reader of stdout went away (| head): as a tool killed by SIGPIPE, silently
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's flush at exit would fail
        return 128 + signal.SIGPIPE
    except OSError as exc:
        if exc.errno not in STORAGE_ERRNOS:
            raise
        return _write_failed(args.command, write_failed(exc.filename or _output_of(args), exc))
    except KeyboardInterrupt:
        print(f"audioicl {args.command}: interrupted", file=sys.stderr)
        return 130


def _output_of(args: argparse.Namespace) -> str:
    """What a command writes, for a refused write whose error names no file (a library's own write)."""
    for option in ("out", "json", "detail", "coverage"):
        if getattr(args, option, None):
            return f"into {getattr(args, option)}"
    return "a file"


def _write_failed(command: str, exc: WriteFailed) -> int:
    resumes = ": it resumes" if command in RESUMING else ""
    print(f"audioicl {command}: error: {one_line(str(exc))}{resumes}", file=sys.stderr)
    return exc.exit_code
