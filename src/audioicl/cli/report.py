"""``audioicl report``: plots, a markdown table and a self-contained HTML page from a summary CSV."""

from __future__ import annotations

from pathlib import Path

from audioicl.analysis.report import (
    DEFAULT_AUDIO_BUDGET,
    FLOOR_MODEL,
    ReportOptions,
    write_report,
)
from audioicl.analysis.report.accuracy import INTERVALS
from audioicl.analysis.report.media import megabytes
from audioicl.errors import AudioICLError
from audioicl.files import check_output
from audioicl.scoring.score import SUMMARY_NAME

from .options import command


def _add(sub):
    p = sub.add_parser(
        "report",
        help="plots, a markdown table and an HTML page from scores",
        description=(
            "Write accuracy-vs-shots plots (one PNG per task and an overview), report.md (accuracy table with "
            "95% intervals: Wilson, or with --interval cluster also spanning the cluster bootstrap over query "
            "clips) and a self-contained report.html. With --results, the page also shows a few example "
            "episodes per task with their audio, prompt and each model's response."
        ),
    )
    p.add_argument(
        "--scores",
        type=Path,
        required=True,
        help="summary CSV written by 'audioicl score' (or the folder holding its summary.csv)",
    )
    p.add_argument("--results", type=Path, help="results folder, for example episodes")
    p.add_argument(
        "--data",
        type=Path,
        help="dataset root for the example clips (default: from the run record next to the results)",
    )
    p.add_argument("--out", type=Path, required=True, help="folder to write the report into")
    p.add_argument("--examples", type=int, default=3, help="example episodes per task (default 3)")
    p.add_argument(
        "--audio-budget-mb",
        type=float,
        default=DEFAULT_AUDIO_BUDGET / 1e6,
        help="most audio report.html plays (its clips/ folder), in MB of 16 kHz 16-bit FLAC, each distinct clip "
        "once; the tasks take turns, one example each, and an example whose clips do not fit is left out rather than "
        f"shown silent; 0 shows the examples without audio (default {DEFAULT_AUDIO_BUDGET / 1e6:g})",
    )
    p.add_argument(
        "--floor",
        default=FLOOR_MODEL,
        metavar="MODEL",
        help=f"the model drawn as the text-only floor, not as a model (default {FLOOR_MODEL}, the results of "
        "builtin:text-only)",
    )
    p.add_argument(
        "--interval",
        choices=tuple(INTERVALS),
        default="wilson",
        help="the 95%% interval drawn and tabled: wilson (episodes independent; default) or cluster (spanning "
        "Wilson's and the cluster bootstrap's over query clips from the detail CSV, wider where a query clip "
        "serves several episodes; needs scores made with the query clips known)",
    )
    return p


@command(_add)
def run(args) -> int:
    if args.examples < 0:
        raise AudioICLError(f"--examples must be >= 0, got {args.examples}")
    if args.audio_budget_mb < 0:
        raise AudioICLError(f"--audio-budget-mb must be >= 0, got {args.audio_budget_mb}")
    check_output(args.out, "--out", folder=True)
    if args.scores.is_dir():
        args.scores = args.scores / SUMMARY_NAME
    files = write_report(
        ReportOptions(
            scores=args.scores,
            out=args.out,
            results=args.results,
            data=args.data,
            examples=args.examples,
            audio_budget=int(args.audio_budget_mb * 1e6),
            floor=args.floor,
            interval=args.interval,
            same_results=True,
        )
    )
    left_out = f"; {files.examples_left_out} examples left out" if files.examples_left_out else ""
    print(
        f"wrote {files.html} ({files.audio_clips} clips, {megabytes(files.audio_bytes)} of audio{left_out})"
    )
    print(f"wrote {files.markdown}, {files.overview.name} and {len(files.plots)} task plots")
    return 0
