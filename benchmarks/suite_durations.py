"""The test suite's time by file from pytest's ``--durations`` lines: one markdown table, two runs side by side.

``python benchmarks/suite_durations.py BEFORE.log [AFTER.log] [--top 25]``: each log is a pytest run's output
with ``--durations=0`` (every test's setup, call and teardown; ``--durations=N`` counts the N slowest only, and
the table says so). Seconds are worker seconds (with ``-n 2`` the wall time is about half their sum).
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^\s*(?P<seconds>\d+\.\d+)s (?P<phase>setup|call|teardown)\s+(?P<test>\S+)")
HEADER = re.compile(r"=+ slowest (?:(?P<count>\d+) )?durations =+")
SUMMARY = re.compile(r"^=* ?(?P<summary>.*(?:passed|failed).*) in (?P<wall>[\d.]+)s")


def by_file(log: Path) -> tuple[dict[str, float], str, str]:
    """File → worker seconds; which durations the log holds; pytest's closing line."""
    files: dict[str, float] = defaultdict(float)
    held, closing = "none", ""
    for text in log.read_text(errors="replace").splitlines():
        if header := HEADER.search(text):
            held = f"the {header['count']} slowest" if header["count"] else "all"
        elif match := LINE.match(text):
            files[match["test"].split("::")[0]] += float(match["seconds"])
        elif summary := SUMMARY.search(text):
            closing = f"{summary['summary']} in {summary['wall']} s"
    return dict(files), held, closing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25, help="files shown (the rest summed)")
    args = parser.parse_args()
    runs = [by_file(log) for log in args.logs]
    order = sorted(runs[0][0], key=lambda name: -runs[0][0][name])
    order += sorted({name for files, *_ in runs[1:] for name in files} - set(order))
    names = [log.name for log in args.logs]
    print("| file | " + " | ".join(f"{n} (s)" for n in names) + (" | ratio |" if len(runs) == 2 else " |"))
    print("|---" * (len(runs) + 1 + (len(runs) == 2)) + "|")

    def row(label: str, values: list[float]) -> str:
        cells = " | ".join(f"{v:.1f}" for v in values)
        ratio = (
            f" | {values[0] / values[1]:.2f}x"
            if len(values) == 2 and values[1]
            else (" | -" if len(values) == 2 else "")
        )
        return f"| {label} | {cells}{ratio} |"

    for name in order[: args.top]:
        print(row(name, [files.get(name, 0.0) for files, *_ in runs]))
    rest = order[args.top :]
    print(row(f"{len(rest)} other files", [sum(files.get(n, 0.0) for n in rest) for files, *_ in runs]))
    print(row("**all**", [sum(files.values()) for files, *_ in runs]))
    for name, (_, held, closing) in zip(names, runs, strict=True):
        print(f"\n{name}: durations of {held} tests; pytest: {closing or '(no closing line)'}")


if __name__ == "__main__":
    main()
