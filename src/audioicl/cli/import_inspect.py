"""``audioicl import-inspect``: inspect_ai logs of ``audioicl/audioicl_bench`` → results files."""

from __future__ import annotations

from pathlib import Path

from audioicl.errors import AudioICLError

from .options import command


def _add(sub):
    p = sub.add_parser(
        "import-inspect",
        help="turn inspect_ai logs of audioicl/audioicl_bench into results files",
        description=(
            "Write the samples of inspect_ai logs (from 'inspect eval audioicl/audioicl_bench ...') as "
            "OUT/<model>_results_k<k>.jsonl, one line per episode (id, task, response, gt, plus status, error, "
            "k, model and inspect's own score), so that 'audioicl score OUT' scores them. <model> is the last "
            "part of inspect's model id, with +CONDITION under a study condition. Needs the inspect extra."
        ),
    )
    p.add_argument(
        "logs", nargs="+", type=Path, metavar="LOG", help=".eval/.json log files or folders of them"
    )
    p.add_argument(
        "--out", required=True, type=Path, help="folder for the results files (not holding them yet)"
    )
    p.add_argument("--name", help="<model> part of the file names (default: from the log's model)")
    p.add_argument(
        "--epoch", type=int, default=1, help="the epoch to import from a multi-epoch log (default 1)"
    )
    return p


@command(_add)
def import_inspect_command(args) -> int:
    try:
        import inspect_ai  # noqa: F401

        from audioicl.integrations.inspect_import import import_inspect
    except ImportError as exc:
        raise AudioICLError(f"needs inspect_ai ({exc}): pip install 'audioicl[inspect]'") from None
    for written in import_inspect(args.logs, args.out, name=args.name, epoch=args.epoch):
        errors = f" ({written.errors} error lines)" if written.errors else ""
        print(f"{written.path}: {written.lines} lines{errors}")
    return 0
