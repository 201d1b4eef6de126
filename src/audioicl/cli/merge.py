"""``audioicl merge``: join the results of shard runs into one folder."""

from __future__ import annotations

from pathlib import Path

from audioicl.inference.results import merge_shards

from .options import command


def _add(sub):
    p = sub.add_parser(
        "merge",
        help="join shard results folders into one",
        description=(
            "Join the <model>_results_k<k>.jsonl files of shard folders (written by 'audioicl run --shard I/N') "
            "into OUT. Refuses an id given twice, an incomplete set of shards or shards run with other settings "
            "(from each model's <model>_run.json; a plain run.json of older folders is read too), and, with "
            "--data, any episode of the dataset without a result. Writes OUT/<model>_run.json per model."
        ),
    )
    p.add_argument("folders", nargs="+", type=Path, metavar="SHARD_DIR", help="shard folders to join")
    p.add_argument(
        "--out", required=True, type=Path, help="folder for the merged files (must not hold them yet)"
    )
    p.add_argument(
        "--data", type=Path, default=None, help="dataset root: check that every episode has a result"
    )
    return p


@command(_add)
def merge_command(args) -> int:
    for merged in merge_shards(args.folders, args.out, args.data):
        print(f"{merged.path}: {merged.lines} lines from {merged.sources} folder(s)")
    return 0
