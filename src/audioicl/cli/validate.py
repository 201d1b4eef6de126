"""``audioicl validate ROOT``: check a dataset folder and print what it holds and what is wrong with it."""

from __future__ import annotations

import json
from pathlib import Path

from audioicl.dataset.validate import format_report, validate
from audioicl.errors import AudioICLError
from audioicl.files import check_output, write_atomic

from .main import one_line
from .options import command


def _add(sub):
    p = sub.add_parser(
        "validate",
        help="check a dataset folder (meta files, labels, audio, manifest)",
        description=(
            "Check every meta file, episode shape, label and audio file of a dataset root and print a table "
            "per task and k, whether episodes are nested across k (information only), and every problem as "
            "'file:line id: what'. Exit 0 when clean, 1 when problems were found, 2 on usage errors."
        ),
    )
    p.add_argument("root", type=Path, help="dataset root (holding meta/ and data/)")
    p.add_argument("--all", action="store_true", help="list every problem, not the first 20 of each kind")
    p.add_argument("--quick", action="store_true", help="read audio headers only, do not decode whole files")
    p.add_argument(
        "--verify-hashes", action="store_true", help="check the sha256 of files listed in manifest.json"
    )
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the report as JSON to FILE")
    p.add_argument(
        "--jobs", type=int, default=None, help="threads for audio checks (default: 4 per core, max 16)"
    )
    return p


@command(_add)
def run(args) -> int:
    if args.jobs is not None and args.jobs < 1:
        raise AudioICLError("--jobs must be at least 1")
    if args.json:
        check_output(args.json, "--json", folder=False)
    report = validate(args.root, quick=args.quick, verify_hashes=args.verify_hashes, jobs=args.jobs)
    # ids and paths come from the meta files: their control characters (an escape sequence) shown as \xNN
    print("\n".join(one_line(line) for line in format_report(report, show_all=args.all).split("\n")))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.json, json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
    return 0 if report.ok else 1
