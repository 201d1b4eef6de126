"""Line and branch coverage by package of ``audioicl`` from coverage.py's JSON report: one markdown table.

``python scripts/coverage_table.py coverage.json [--json OUT]``: a package is ``audioicl.<name>`` (a top-level
module counts under ``audioicl``); --json also writes the figures, for comparing two runs.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def package_of(path: str) -> str:
    parts = Path(path).parts
    inner = parts[parts.index("audioicl") + 1 :]
    return f"audioicl.{inner[0]}" if len(inner) > 1 else "audioicl"


def by_package(report: dict) -> dict[str, dict[str, int]]:
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for path, entry in report["files"].items():
        summary = entry["summary"]
        row = totals[package_of(path)]
        row["statements"] += summary["num_statements"]
        row["covered_lines"] += summary["covered_lines"]
        row["branches"] += summary.get("num_branches", 0)
        row["covered_branches"] += summary.get("covered_branches", 0)
    return {name: dict(row) for name, row in sorted(totals.items())}


def percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "-"


def table(rows: dict[str, dict[str, int]]) -> str:
    lines = ["| package | statements | lines % | branches | branches % |", "|---|---|---|---|---|"]
    total: dict[str, int] = defaultdict(int)
    for name, row in rows.items():
        for key, value in row.items():
            total[key] += value
        lines.append(_line(name, row))
    lines.append(_line("**all**", total))
    return "\n".join(lines)


def _line(name: str, row: dict[str, int]) -> str:
    return (
        f"| {name} | {row['statements']} | {percent(row['covered_lines'], row['statements'])} "
        f"| {row['branches']} | {percent(row['covered_branches'], row['branches'])} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="coverage.py's JSON report (coverage json)")
    parser.add_argument("--json", type=Path, help="also write the figures by package here")
    args = parser.parse_args()
    rows = by_package(json.loads(args.report.read_text()))
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
