"""``audioicl leaderboard``: one static page comparing many models, from results folders alone."""

from __future__ import annotations

import sys
from pathlib import Path

from audioicl.analysis.leaderboard import LeaderboardOptions, write_leaderboard
from audioicl.files import check_output

from .options import add_k, command


def _add(sub):
    p = sub.add_parser(
        "leaderboard",
        help="one static HTML page comparing many models, from results folders",
        description=(
            "Score the results files of every RESULTS folder (<model>_results_k<k>.jsonl, with the run records "
            "<model>_run.json beside them; no model is loaded) and write into --out: index.html (self-contained: "
            "a ranking by mean accuracy over complete tasks per k and overall, with cluster-bootstrap intervals "
            "and coverage stated; the controls, <model>+<condition>, and the built-in floors and solvers beside "
            "the models; accuracy-vs-shots plots per task; format compliance; the spread over draws; a "
            "reproducibility block per model from its run record), scores.csv (one row per scored line) and, "
            "where pyarrow is importable, scores.parquet."
        ),
    )
    p.add_argument(
        "results", nargs="+", type=Path, metavar="RESULTS", help="results folders (searched recursively)"
    )
    p.add_argument("--out", type=Path, required=True, help="folder to write the site into")
    p.add_argument(
        "--data",
        type=Path,
        help="dataset root: the coverage's episodes and the dataset fingerprint where a run record lacks them "
        "(default: each run record's data root)",
    )
    add_k(p, "only these shot counts, e.g. 1-5 (default: all)")
    return p


@command(_add)
def run(args) -> int:
    check_output(args.out, "--out", folder=True)
    files = write_leaderboard(
        LeaderboardOptions(
            results=tuple(args.results), out=args.out, data=args.data, shots=tuple(args.k) if args.k else None
        )
    )
    kinds = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in files.entries.items() if n)
    print(f"wrote {files.html} ({kinds})")
    parquet = (
        f" and {files.parquet.name}" if files.parquet else " (no scores.parquet: pyarrow is not importable)"
    )
    print(f"wrote {files.csv}{parquet}: {files.rows} scored lines")
    for warning in files.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
