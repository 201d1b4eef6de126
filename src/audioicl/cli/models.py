"""``audioicl models``: the audio-language model families audioicl runs, with their backends, limits and what
is verified (``--json``: the same as JSON; ``--markdown``: the table of ``docs/models.md``)."""

from __future__ import annotations

import json
import textwrap

from audioicl.errors import AudioICLError
from audioicl.registry import unknown_name

from .options import command

COLUMNS = (
    "family",
    "backends",
    "clips per prompt",
    "s per clip",
    "audio tokens/s",
    "hf",
    "vllm",
    "transformers",
    "tiny",
)
# the default listing, to fit 100 columns: a short header for each and the verification in a word or two
# (the whole table: --verbose; one family's every detail: audioicl models NAME)
SHORT_COLUMNS = {
    "family": "family",
    "clips per prompt": "clips",
    "s per clip": "s/clip",
    "audio tokens/s": "tok/s",
    "hf": "hf",
    "vllm": "vllm",
    "tiny": "tiny",
}
SHORT_VERIFIED = {"tiny checkpoint in CI": "CI", "full size on GPU + CI": "GPU+CI"}


def _add(sub):
    p = sub.add_parser(
        "models",
        help="list the model families: backends, clips per prompt, seconds per clip, what is verified",
        description=(
            "List the audio-language model families that hf: and vllm: run: the clips one prompt may hold, the "
            "longest clip the model takes (window: the feature extractor's), audio tokens per second, what is "
            "verified (a tiny checkpoint of the real classes in CI, the full size on a GPU, or untested), the "
            "name audioicl.testing.tiny_checkpoint takes for its tiny checkpoint (its model type) and the "
            "public checkpoints each covers ((base): a pretrained base model, run with --layout continuation)."
        ),
    )
    p.add_argument("name", nargs="?", help="one family (its name or model type): every detail of it")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--verbose", action="store_true", help="every column (backends, transformers)")
    shape.add_argument("--json", action="store_true", help="print the list as JSON")
    shape.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/models.md)")
    return p


def _aligned(table: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]


def format_models(rows: list[dict[str, str]], verbose: bool = False) -> str:
    """The families as a table: within 100 columns (``verbose``: every column, and each family's
    checkpoints below it)."""
    if verbose:
        lines = _aligned([COLUMNS, *(tuple(row[c] for c in COLUMNS) for row in rows)])
        return "\n".join([*lines, "", *(f"{row['family']}: {row['checkpoints'] or '-'}" for row in rows)])
    cells = [tuple(_short(column, row[column]) for column in SHORT_COLUMNS) for row in rows]
    lines = _aligned([tuple(SHORT_COLUMNS.values()), *cells])
    note = (
        "hf, vllm: verified with a tiny checkpoint in CI, at full size on a GPU, or untested; every column: "
        "--verbose; one family's details and checkpoints: audioicl models NAME"
    )
    return "\n".join([*lines, "", *textwrap.wrap(note, 100)])


def _short(column: str, value: str) -> str:
    """A cell of the default listing: the verification in a word, a rate to three digits (16.6667: 16.7),
    "(ASR only)" as "(ASR)", "(remote code)" as "(remote)"."""
    if column in ("hf", "vllm"):
        return SHORT_VERIFIED.get(value, value)
    if column == "family":
        return value.replace(" (ASR only)", " (ASR)").replace(" (remote code)", " (remote)")
    if column == "audio tokens/s" and "." in value:
        return f"{float(value):.3g}"
    return value


def format_family(row: dict[str, str]) -> str:
    """One family's every detail, a line each."""
    width = max(len(key) for key in row)
    return "\n".join(f"{key:<{width}}  {value or '-'}" for key, value in row.items())


def markdown_models(rows: list[dict[str, str]]) -> str:
    columns = (*COLUMNS, "checkpoints")
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(row[c] for c in columns) + " |" for row in rows]
    return "\n".join(lines)


@command(_add)
def run(args) -> int:
    import audioicl.backends.families  # noqa: F401  (registers every family)
    from audioicl.backends.families.registry import model_rows

    rows = model_rows()
    if args.name:
        wanted = args.name.lower()
        found = [
            r for r in rows if wanted in (r["family"].lower(), r["model_type"].lower(), r["tiny"].lower())
        ]
        if not found:
            names = [r["tiny"] if r["tiny"] != "-" else r["model_type"] for r in rows]
            raise AudioICLError(unknown_name("model family", args.name, names))
        rows = found
        if not (args.json or args.markdown):
            print("\n\n".join(format_family(row) for row in rows))
            return 0
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    elif args.markdown:
        print(markdown_models(rows))
    else:
        print(format_models(rows, verbose=args.verbose))
    return 0
