"""``audioicl import-lmms-eval``: lmms-eval sample logs of the audioicl tasks → results files."""

from __future__ import annotations

from pathlib import Path

from audioicl.integrations.lmms_eval_import import import_lmms_eval

from .options import command


def _add(sub):
    p = sub.add_parser(
        "import-lmms-eval",
        help="turn lmms-eval sample logs of the audioicl tasks into results files",
        description=(
            "Write the samples that 'lmms-eval --tasks audioicl_... --log_samples --output_path DIR' logged "
            "(DIR/<model>/<date>_samples_<task>.jsonl) as OUT/<model>_results_k<k>.jsonl, one line per episode "
            "(id, task, response, gt, plus k, model and lmms-eval's own verdict), so that 'audioicl score OUT' "
            "scores them. <model> is the last part of the run's model name. lmms-eval is not needed for this."
        ),
    )
    p.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH", help="samples .jsonl files or lmms-eval output folders"
    )
    p.add_argument(
        "--out", required=True, type=Path, help="folder for the results files (not holding them yet)"
    )
    p.add_argument("--name", help="<model> part of the file names (default: from the run's model)")
    return p


@command(_add)
def import_lmms_eval_command(args) -> int:
    for written in import_lmms_eval(args.paths, args.out, name=args.name):
        print(f"{written.path}: {written.lines} lines")
    return 0
