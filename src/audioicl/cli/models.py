"""``audioicl models``: the audio-language model families audioicl runs, with their backends, limits and what
is verified (``--json``: the same as JSON; ``--markdown``: the table of ``docs/models.md``)."""

from __future__ import annotations

import json

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
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--json", action="store_true", help="print the list as JSON")
    shape.add_argument("--markdown", action="store_true", help="print the table as Markdown (docs/models.md)")
    return p


def format_models(rows: list[dict[str, str]]) -> str:
    table = [COLUMNS, *(tuple(row[c] for c in COLUMNS) for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]
    lines.append("")
    lines += [f"{row['family']}: {row['checkpoints'] or '-'}" for row in rows]
    return "\n".join(lines)


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
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    elif args.markdown:
        print(markdown_models(rows))
    else:
        print(format_models(rows))
    return 0
