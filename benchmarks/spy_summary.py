"""Where each thread of a profiled run spent its time: ``py-spy record --threads --idle --format raw`` samples
summed per function, inclusive (a function counts once per sample however deep it recurs), per thread.

    py-spy record --threads --idle --rate 50 --format raw -o run.txt -- python -m audioicl run ...
    python benchmarks/spy_summary.py run.txt --rate 50 [--top 30]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter, defaultdict
from pathlib import Path

LINE_NUMBER = re.compile(r":\d+\)$")


def summarize(text: str) -> dict[str, Counter]:
    """Samples per function (its name and file, without the line) inclusive, by thread."""
    threads: dict[str, Counter] = defaultdict(Counter)
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        thread, *frames = stack.split(";")
        seen = {LINE_NUMBER.sub(")", frame) for frame in frames}
        threads[thread][" all samples"] += int(count)
        for frame in seen:
            threads[thread][frame] += int(count)
    return threads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's samples per second")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    threads = summarize(args.profile.read_text())
    for thread, counts in sorted(threads.items(), key=lambda item: -item[1][" all samples"]):
        print(f"\n## {thread}: {counts[' all samples'] / args.rate:.1f} s sampled")
        print("| s inclusive | function |\n|---|---|")
        for frame, count in counts.most_common(args.top + 1)[1:]:
            print(f"| {count / args.rate:.1f} | {frame[:150]} |")


if __name__ == "__main__":
    main()
