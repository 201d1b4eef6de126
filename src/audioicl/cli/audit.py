"""``audioicl audit ROOT``: what a dataset gives away without listening, per task and k."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from audioicl.analysis.audit import DEFAULT_MARGIN, audit, format_report
from audioicl.errors import AudioICLError
from audioicl.files import check_output, write_atomic

from .options import add_workers, command


def _add(sub):
    p = sub.add_parser(
        "audit",
        help="measure the shortcuts a dataset offers (text-only floor, priors, reuse, names, trivial features)",
        description=(
            "For every task and k of a dataset (ours, the released one, any build): the text-only floor, "
            "the query label distribution, recurring and duplicate clips, labels readable from file names, "
            "and how well duration, RMS, background level and energy below 20 Hz alone predict the label. "
            "Works without the audio (paths only: the feature and duplicate checks are skipped). Prints a "
            "table (and, with --json FILE, JSON), exits 1 when a shortcut beats the baseline (chance; the text-only floor "
            "for the count and operator tasks, whose published construction it is) by more than --margin "
            "and significantly (exact one-sided binomial test, Holm's correction over every shortcut "
            "tested); a shortcut with too few episodes to reach significance is reported, not failed."
        ),
    )
    p.add_argument("root", type=Path, help="dataset root (meta files in ROOT/meta or ROOT)")
    p.add_argument(
        "--json",
        type=Path,
        metavar="FILE",
        help="also write the report as JSON to FILE (default: none; it was ./audit.json, overwritten unsaid)",
    )
    p.add_argument(
        "--margin",
        type=float,
        default=DEFAULT_MARGIN,
        help=f"points a shortcut may beat the baseline by before it fails (default {DEFAULT_MARGIN:g})",
    )
    add_workers(p, os.cpu_count() or 1, help="processes reading audio (default: CPU count)")
    return p


@command(_add)
def run(args) -> int:
    if args.workers < 1:
        raise AudioICLError("--workers must be at least 1")
    if args.json is not None:
        check_output(args.json, "--json", folder=False)  # before the audit, not after it
    report = audit(
        args.root, margin=args.margin, workers=args.workers, say=lambda line: print(line, file=sys.stderr)
    )
    if args.json is not None:  # said first: the report's last lines are its verdict
        replaced = " (replacing the earlier one)" if args.json.exists() else ""
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.json, json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}{replaced}\n")
    print(format_report(report))
    return 0 if report.ok else 1
