"""What the sub-commands share: the registry of commands, the parsers of option values, and the options
several commands take, each declared once here (``add_*``) with the ``RunOptions`` they make (``run_options``).
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Mapping
from typing import Any

from audioicl.backends import ModelSpec
from audioicl.errors import AudioICLError
from audioicl.inference.options import RunOptions


def option_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` as an argparse ``type``: its ``AudioICLError`` becomes the sub-command's usage error
    (``audioicl run: error: argument --k: ...``, exit 2), not the top-level one."""

    @functools.wraps(parse)
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except AudioICLError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


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


def parse_backend_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise AudioICLError(f"--backend-option must be KEY=VALUE, got {text!r}")
    return key, value


# --------------------------------------------------------------------------- options several commands take


def add_model(parser: argparse.ArgumentParser, required: bool = False) -> None:
    """``--model BACKEND:NAME``, parsed into a ``ModelSpec``; ``required=False`` where a config file may give
    it instead."""
    parser.add_argument(
        "--model",
        type=option_type(ModelSpec.parse),
        required=required,
        help="BACKEND:NAME, e.g. builtin:random or hf:Qwen/Qwen2-Audio-7B-Instruct"
        + ("" if required else "; required"),
    )


def add_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", help="<model> part of the results file names (default: from --model)")


def add_k(parser: argparse.ArgumentParser, help: str, default: str | None = None) -> None:
    """``--k``: shot counts as ``parse_int_set`` reads them (a ``default`` text goes through it too)."""
    parser.add_argument("--k", type=option_type(parse_int_set), default=default, help=help)


def add_tasks(
    parser: argparse.ArgumentParser,
    help: str = "comma-separated task names (default: all)",
    default: str | None = None,
) -> None:
    parser.add_argument("--tasks", type=option_type(parse_names), default=default, help=help)


def add_limit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, help="only the first N episodes of each task")


def add_selection(parser: argparse.ArgumentParser, k_help: str) -> None:
    """The episodes a run takes: ``--k``, ``--tasks``, ``--limit``."""
    add_k(parser, k_help)
    add_tasks(parser)
    add_limit(parser)


def add_allow_missing_audio(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-missing-audio",
        action="store_true",
        default=None,
        help="run although clips of the selected episodes are missing from the dataset (a partial dataset "
        "such as the release): their episodes get error lines naming the clip. Without it such a run is "
        "refused up front, with the number of missing clips and the first few",
    )


def add_batch_size(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch-size", type=int, help="prompts a backend runs together, e.g. on the GPU (default: 8)"
    )


def add_generation(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-new-tokens", type=int, help="greedy decoding budget (default: 16)")


def add_seed(parser: argparse.ArgumentParser, help: str, default: int | None = None) -> None:
    parser.add_argument("--seed", type=int, default=default, help=help)


def add_backend_options(parser: argparse.ArgumentParser) -> None:
    """``--backend-option/-o KEY=VALUE`` (repeatable) and ``--base-url``, the option ``base_url``
    (``backend_options`` joins them)."""
    parser.add_argument(
        "--backend-option",
        "-o",
        dest="backend_options",
        type=option_type(parse_backend_option),
        action="append",
        metavar="KEY=VALUE",
        help="option for the backend (repeatable), e.g. -o max_clip_seconds=30",
    )
    parser.add_argument(
        "--base-url",
        help="server of an openai: model, e.g. http://127.0.0.1:8000/v1 (the backend option base_url: "
        "-o base_url=URL says the same)",
    )


def add_workers(
    parser: argparse.ArgumentParser, default: int | None, help: str, metavar: str | None = None
) -> None:
    """``--workers N``; what a worker is (a process, a download) and its default are the command's."""
    parser.add_argument("--workers", type=int, default=default, metavar=metavar, help=help)


def backend_options(values: Mapping[str, Any]) -> dict[str, str]:
    """``-o`` pairs, with ``--base-url`` as the option ``base_url`` (refused when both disagree)."""
    options = dict(values.get("backend_options") or [])
    url = values.get("base_url")
    if url is not None:
        if options.get("base_url", url) != url:
            raise AudioICLError(f"--base-url {url} and -o base_url={options['base_url']} disagree; give one")
        options["base_url"] = url
    return options


RUN_FIELDS = (
    "data",
    "model",
    "out",
    "style",
    "layout",
    "batch_size",
    "max_new_tokens",
    "pad",
    "limit",
    "shard",
    "prompts",
    "morse_bank",
    "seed",
    "name",
    "retry_errors",
    "strict",
    "order",
    "window",
    "control",
    "probe",
    "allow_missing_audio",
    "draws",
    "orders",
    "prompt_variants",
)  # the RunOptions fields an option of the same name (dest) sets as it is


def run_options(values: Mapping[str, Any]) -> RunOptions:
    """The ``RunOptions`` of parsed option values (by dest; those a command lacks, or None, keep the
    defaults of ``RunOptions``)."""
    fields: dict[str, Any] = {key: values.get(key) for key in RUN_FIELDS}
    fields["shots"] = tuple(values["k"]) if values.get("k") else None
    fields["tasks"] = tuple(values["tasks"]) if values.get("tasks") else None
    fields["backend_options"] = backend_options(values)
    return RunOptions(**{key: value for key, value in fields.items() if value is not None})


COMMANDS: list[tuple[Callable[[argparse._SubParsersAction], argparse.ArgumentParser], Callable]] = []


def command(add: Callable[[argparse._SubParsersAction], argparse.ArgumentParser]):
    """Register a sub-command: ``add`` builds its parser, the decorated function runs it."""

    def decorate(run: Callable[[argparse.Namespace], int]):
        COMMANDS.append((add, run))
        return run

    return decorate
