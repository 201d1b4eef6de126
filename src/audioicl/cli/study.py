"""``audioicl study``: one model over the grid of study conditions, scored, with the study report."""

from __future__ import annotations

from pathlib import Path

from audioicl.analysis.study.conditions import CONDITION_NAMES, CONDITIONS
from audioicl.analysis.study.run import StudyOptions, run_study

from .options import (
    add_allow_missing_audio,
    add_backend_options,
    add_batch_size,
    add_generation,
    add_model,
    add_name,
    add_seed,
    add_selection,
    command,
    option_type,
    parse_names,
    run_options,
)


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
    add_model(p, required=True)
    p.add_argument("--out", type=Path, required=True, help="folder for results, scores and the study report")
    p.add_argument(
        "--conditions",
        type=option_type(parse_names),
        help=f"comma-separated subset of {','.join(CONDITION_NAMES)} (default: all)",
    )
    add_selection(p, k_help="shots, e.g. 0,1,5 (default: 0 and every k of the dataset)")
    add_seed(p, help="run seed (default: 0)")
    add_name(p)
    add_batch_size(p)
    add_generation(p)
    add_backend_options(p)
    add_allow_missing_audio(p)
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
            run_options(vars(args)),
            conditions=tuple(args.conditions) if args.conditions else CONDITION_NAMES,
            floor=args.floor,
        )
    )
    print(f"wrote {outputs.study_report} and {outputs.html_report}")
    if outputs.errors:
        print(f"{outputs.errors} episode(s) ended in an error line (see their 'error' field)")
        return 1
    return 0
