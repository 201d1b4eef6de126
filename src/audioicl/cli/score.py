"""``audioicl score``: accuracy per model, shots and task from result files (the original's rules)."""

from __future__ import annotations

import sys
from pathlib import Path

from audioicl.files import check_output
from audioicl.scoring.coverage import coverage_path, describe_gaps, describe_mean, format_coverage
from audioicl.scoring.score import (
    SUMMARY_NAME,
    ResultKeys,
    ScoreOptions,
    detail_path,
    format_table,
    query_clips_of,
    score_folder,
    write_per_example,
)

from .options import add_workers, command, parse_int_set, parse_names


def _add(sub):
    p = sub.add_parser(
        "score",
        help="score result files into a summary CSV",
        description=(
            "Find <model>_results_k<k>.jsonl (or <model>_results_meta_k<k>.jsonl) files anywhere under --in, "
            "score every line by the original AudioICL-Bench rules and write the summary CSV "
            "(model,shots,task,accuracy,n), a detail CSV (correct, unparsed, error lines, 95% Wilson interval, "
            "and a cluster-bootstrap interval over query clips, which accounts for query clips that serve "
            "several episodes), a coverage CSV and a table. Error lines are episodes a run could not ask (a "
            "clip missing or unreadable); they count in n as wrong, as a null response does. Coverage: per "
            "model and k, the tasks and episodes present against the dataset (--data, else the data root in "
            "the run record <model>_run.json beside the results) and the runs' selection (--limit, --shard, "
            "--tasks): complete, subset, incomplete (episodes the run meant to ask have no line: a crashed or "
            "unfinished run) or unchecked (no dataset known). The mean over tasks is printed over complete "
            "tasks only, with how many of the dataset's tasks it covers and, when not complete, marked so."
        ),
    )
    p.add_argument(
        "--in", dest="input", metavar="DIR", type=Path, required=True, help="folder searched recursively"
    )
    p.add_argument(
        "--out",
        metavar="CSV",
        type=Path,
        required=True,
        help="summary CSV to write; a folder (one that exists, or a name without .csv) gets DIR/summary.csv",
    )
    p.add_argument(
        "--detail", metavar="CSV", type=Path, help="detail CSV (default: <out stem>_detail.csv next to --out)"
    )
    p.add_argument(
        "--coverage",
        metavar="CSV",
        type=Path,
        help="coverage CSV (default: <out stem>_coverage.csv next to --out)",
    )
    p.add_argument(
        "--require-complete",
        action="store_true",
        help="exit 1 (after writing every file) unless every model and k is complete: all the dataset's "
        "episodes present, no unreadable line, the dataset known. Without it an incomplete, subset or "
        "unchecked folder still exits 0, its numbers marked as such on stdout, stderr and in the coverage "
        "CSV, since scoring a run in progress or a --limit trial is routine; a pipeline that publishes "
        "numbers should pass it",
    )
    p.add_argument(
        "--only-model",
        metavar="M[,M...]",
        help="only these models (comma-separated names as in the file names)",
    )
    p.add_argument("--only-shots", metavar="K", help="only these k, e.g. 1,3 or 1-5")
    p.add_argument(
        "--per-example-dir",
        metavar="DIR",
        type=Path,
        help="also write <model>_k<k>.csv (id,task,correct) here",
    )
    p.add_argument(
        "--keep-text", action="store_true", help="per-example CSVs also hold gt and pred (response)"
    )
    p.add_argument(
        "--pred-key",
        metavar="KEY",
        default="response",
        help="key of the model's response (default: response)",
    )
    p.add_argument("--gt-key", metavar="KEY", default="gt", help="key of the ground truth (default: gt)")
    p.add_argument("--task-key", metavar="KEY", default="task", help="key of the task name (default: task)")
    p.add_argument("--id-key", metavar="KEY", default="id", help="key of the episode id (default: id)")
    p.add_argument(
        "--data",
        metavar="ROOT",
        type=Path,
        help="dataset the results came from: the episodes the coverage expects (default: the data root in "
        "each model's run record), and each line's query clip when the line does not list its audio_paths "
        "(the original's result files), for the cluster-bootstrap interval",
    )
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="count a malformed line as wrong in its task (told by its id, through the dataset or the id "
        "blocks, or by its text) instead of stopping with an error; a line whose task cannot be told is "
        "reported apart as unreadable, in no task, no n and no mean",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="NOT the original protocol: a response counts only if it is the bare answer",
    )
    add_workers(
        p,
        None,
        help="processes for large inputs (default: one per CPU; 1: none). Results do not depend on it",
        metavar="N",
    )
    return p


def summary_file(out: Path) -> Path:
    """``--out`` as the summary CSV: a folder (existing, or a new name without the ``.csv`` suffix, as the
    other commands' ``--out`` are folders) holds ``summary.csv``."""
    if out.is_dir() or not out.exists() and out.suffix.lower() != ".csv":
        return out / SUMMARY_NAME
    return out


@command(_add)
def run(args) -> int:
    models = parse_names(args.only_model) if args.only_model else None
    shots = parse_int_set(args.only_shots) if args.only_shots else None
    options = ScoreOptions(
        keys=ResultKeys(response=args.pred_key, gt=args.gt_key, task=args.task_key, id=args.id_key),
        strict=args.strict,
        skip_bad_lines=args.skip_bad_lines,
        workers=args.workers,
        query_clips=query_clips_of(args.data) if args.data else None,
        data=args.data,
    )
    args.out = summary_file(args.out)
    detail = args.detail or detail_path(args.out)
    coverage = args.coverage or coverage_path(args.out)
    check_output(args.out, "--out", folder=False)
    check_output(detail, "--detail", folder=False)
    check_output(coverage, "--coverage", folder=False)
    if args.per_example_dir is not None:
        check_output(args.per_example_dir, "--per-example-dir", folder=True)
    scoring = score_folder(
        args.input,
        args.out,
        options,
        detail=detail,
        models=models,
        shots=shots,
        keep_examples=args.per_example_dir is not None,
        coverage=coverage,
    )
    if args.strict:
        print("STRICT scoring: only bare answers count; these are NOT the original protocol's numbers.")
    print(format_table(scoring.rows, scoring.coverage))
    print(f"\ncoverage and mean over tasks (complete tasks only)\n{format_coverage(scoring.coverage)}")
    print(f"\nscored {len(scoring.files)} file(s): summary {args.out}, detail {detail}, coverage {coverage}")
    recurring = [r for r in scoring.rows if r.recurring]
    unknown = [r for r in scoring.rows if r.query_clips is None]
    if recurring:
        print(
            f"{len(recurring)} row(s) have query clips that serve several episodes: their "
            "cluster_ci_low/high in the detail CSV account for it, the Wilson interval does not"
        )
    if unknown:
        print(
            f"{len(unknown)} row(s) without known query clips (lines without audio_paths): the detail CSV's "
            "interval assumes independent episodes; pass --data ROOT to account for recurring query clips"
        )
    if args.per_example_dir is not None:
        written = write_per_example(args.per_example_dir, scoring, keep_text=args.keep_text)
        print(f"per-example: {len(written)} file(s) in {args.per_example_dir}")
    if scoring.malformed:
        placed = scoring.malformed - scoring.unreadable
        print(
            f"warning: {placed} malformed line(s) counted as wrong in their task (--skip-bad-lines)"
            + (
                f"; {scoring.unreadable} unreadable line(s) whose task cannot be told, in no task and no mean"
                if scoring.unreadable
                else ""
            ),
            file=sys.stderr,
        )
    for note in scoring.notes:
        print(f"warning: {note}", file=sys.stderr)
    return _report_coverage(scoring.coverage, args.require_complete)


def _report_coverage(coverage, require_complete: bool) -> int:
    """One warning line on stderr per (model, k) that is not complete or holds lines that are no episode of
    its dataset; exit 1 for any not complete with --require-complete."""
    short = [c for c in coverage if not c.complete]
    for c in short:
        gaps = "; ".join(describe_gaps(c))
        print(f"warning: {c.model} k={c.shots}: {gaps}; mean {describe_mean(c)}", file=sys.stderr)
    for c in coverage:
        if c.extra_lines:
            print(
                f"warning: {c.model} k={c.shots}: {c.extra_lines} line(s) answer no episode of its dataset "
                "(an id twice, in another task, or not in the dataset): they count in n",
                file=sys.stderr,
            )
    if short and require_complete:
        print(
            f"error: {len(short)} of {len(coverage)} model/k cell(s) not complete (--require-complete)",
            file=sys.stderr,
        )
        return 1
    return 0
