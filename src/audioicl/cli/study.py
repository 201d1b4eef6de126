"""``audioicl study``: one model over the grid of study conditions, scored, with the study report."""

from __future__ import annotations

from pathlib import Path

from audioicl.analysis.study.conditions import CONDITION_NAMES, CONDITIONS
from audioicl.analysis.study.run import StudyOptions, run_study

from .options import command, parse_int_set, parse_names
from .run import _backend_option


def _add(sub):
    p = sub.add_parser(
        "study",
        help="what did the model learn? zero-shot, controls, probes and paired statistics in one report",
        description=(
            "Run one model over a grid of conditions into OUT/results (resumable: a rerun skips what is done), "
            "score it into OUT/scores and write OUT/study.md, OUT/study.html and OUT/comparisons.csv: "
            "perception (probe), text ICL (transcript) and audio ICL side by side per task, the controls "
            "against the plain run, paired tests with the Holm correction, and the claims the numbers "
            "support. Conditions: " + "; ".join(f"{c.name}: {c.tells}" for c in CONDITIONS) + "."
        ),
    )
    p.add_argument("--data", type=Path, required=True, help="dataset root")
    p.add_argument("--model", required=True, help="BACKEND:NAME, e.g. builtin:icl or hf:/path/to/model")
    p.add_argument("--out", type=Path, required=True, help="folder for results, scores and the study report")
    p.add_argument(
        "--conditions",
        type=parse_names,
        help=f"comma-separated subset of {','.join(CONDITION_NAMES)} (default: all)",
    )
    p.add_argument(
        "--k", type=parse_int_set, help="shots, e.g. 0,1,5 (default: 0 and every k of the dataset)"
    )
    p.add_argument("--tasks", type=parse_names, help="comma-separated task names (default: all)")
    p.add_argument("--limit", type=int, help="only the first N episodes of each task")
    p.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    p.add_argument("--name", help="<model> part of the results file names (default: from --model)")
    p.add_argument("--batch-size", type=int, default=8, help="prompts a backend runs together (default 8)")
    p.add_argument("--max-new-tokens", type=int, default=16, help="greedy decoding budget (default 16)")
    p.add_argument(
        "--backend-option",
        "-o",
        dest="backend_options",
        type=_backend_option,
        action="append",
        metavar="KEY=VALUE",
        help="option for the backend (repeatable)",
    )
    p.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="do not also run builtin:text-only (the floor from the prompt's text alone) at the plain run's k",
    )
    return p


@command(_add)
def study_command(args) -> int:
    outputs = run_study(
        StudyOptions(
            data=args.data,
            model=args.model,
            out=args.out,
            conditions=tuple(args.conditions) if args.conditions else CONDITION_NAMES,
            shots=tuple(args.k) if args.k else None,
            tasks=tuple(args.tasks) if args.tasks else None,
            limit=args.limit,
            seed=args.seed,
            name=args.name,
            batch_size=args.batch_size,
            max_new_tokens=args.max_new_tokens,
            backend_options=dict(args.backend_options or []),
            floor=args.floor,
        )
    )
    print(f"wrote {outputs.study_report} and {outputs.html_report}")
    if outputs.errors:
        print(f"{outputs.errors} episode(s) ended in an error line (see their 'error' field)")
        return 1
    return 0
