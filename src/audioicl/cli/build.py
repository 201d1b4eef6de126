"""``audioicl build``: synthesize (or assemble from real corpora) the benchmark into a folder."""

from __future__ import annotations

import dataclasses
import os

from audioicl.dataset.build import BuildOptions, build
from audioicl.sources.banks import SOURCE_KINDS, parse_sources
from audioicl.sources.corpora import fetched_sources
from audioicl.tasks.context import CONSTRUCTION, original_construction

from .options import add_k, add_seed, add_tasks, add_workers, command


def _add(sub):
    p = sub.add_parser(
        "build",
        help="build the benchmark: audio, meta files, manifest and dataset card",
        description=(
            "Build AudioICL-Bench into --out: 16 kHz WAV clips under data/, meta/meta_k<k>.jsonl for every k, "
            "manifest.json (hashes, fingerprint) and a dataset card README.md. The same seed and options give "
            "byte-identical output whatever --workers is. Rerunning with the same options completes an "
            "interrupted build; a non-empty folder holding anything else is refused."
        ),
    )
    p.add_argument(
        "--out", required=True, help="output folder (new, empty, or an earlier build with the same options)"
    )
    add_seed(p, help="run seed (default 0)", default=0)
    p.add_argument("--episodes", type=int, default=300, help="episodes per task (default 300)")
    add_k(p, help="shot counts, e.g. 1-5 or 0,1,2,8 (default 1-5)", default="1-5")
    add_tasks(p, help="comma-separated task names (default: all nine)", default="")
    add_workers(p, os.cpu_count() or 1, help="processes (default: CPU count)")
    p.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="KIND=DIR",
        help=f"use a real corpus instead of synthesized sounds; KIND is one of {', '.join(SOURCE_KINDS)}",
    )
    p.add_argument(
        "--sources",
        metavar="DIR",
        help="use every corpus 'audioicl fetch-sources --out DIR' fetched there (a --source of the same kind "
        "wins); the dataset card and manifest name each corpus, its licence and checksums",
    )
    group = p.add_argument_group(
        "construction",
        "how episodes and clips are made; the first value of each is the default, `original` (or the value "
        "named so) reproduces the original benchmark's construction, flaws included",
    )
    group.add_argument(
        "--construction",
        choices=("default", "original"),
        default="default",
        help="set every construction option below to its default or to the original's (an option given "
        "explicitly wins)",
    )
    for choice in CONSTRUCTION:
        group.add_argument(
            choice.flag,
            choices=choice.values,
            default=None,
            help=f"{choice.help} (default: {choice.values[0]}; the original: {choice.original})",
        )
    p.add_argument("--quiet", action="store_true", help="no progress bar and no summary")
    return p


@command(_add)
def run(args) -> int:
    options = BuildOptions(
        seed=args.seed,
        episodes=args.episodes,
        shots=tuple(args.k),
        tasks=tuple(args.tasks),
        sources=parse_sources(_source_items(args)),
    )
    if args.construction == "original":
        options = original_construction(options)
    given = {c.field: getattr(args, c.field) for c in CONSTRUCTION if getattr(args, c.field) is not None}
    options = dataclasses.replace(options, **given)
    summary = build(args.out, options, workers=max(1, args.workers), progress=not args.quiet)
    if not args.quiet:
        print(summary.line())
        for use in summary.corpora:
            info = use.record.info if use.record else None
            what = f"{info.title} (licence: {info.licence})" if info else "a folder given with --source"
            print(f"{use.kind}: {what}")
    return 0


def _source_items(args) -> list[str]:
    """``--source KIND=DIR`` items, plus one for every kind fetched into ``--sources DIR`` that no --source
    gives."""
    given = {item.partition("=")[0].strip() for item in args.source}
    fetched = fetched_sources(args.sources) if args.sources else ()
    return [*args.source, *(f"{kind}={folder}" for kind, folder in fetched if kind not in given)]
