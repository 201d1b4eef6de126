"""Peak memory and wall time of the pipeline's stages as the work grows.

Runs ``build``, ``run --model builtin:icl``, ``score`` and ``report`` as a user would (one ``audioicl`` process
each) at several multiples of a base episode count, and prints per stage and scale the wall time, the peak
resident memory of that process (``wait4``'s ``ru_maxrss``) and both as ratios against the smallest scale.
Memory should stay flat or grow by less than the data does; time should grow linearly (ratio ≈ scale).

    python benchmarks/scaling.py --episodes 20 --scales 1,4,10 --out /tmp/scaling

``--repeats N`` runs each stage N times and reports the median (a rerun of ``build`` or ``run`` over the same
folder would resume, so every repeat starts from empty folders).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

STAGES = ("build", "run", "score", "report")


def command(stage: str, root: Path, episodes: int, workers: int) -> list[str]:
    data, results, scores, report = root / "data", root / "results", root / "scores", root / "report"
    args = {
        "build": ["build", "--out", data, "--episodes", episodes, "--workers", workers, "--quiet"],
        "run": ["run", "--data", data, "--model", "builtin:icl", "--out", results],
        "score": ["score", "--in", results, "--out", scores / "summary.csv", "--data", data],
        "report": ["report", "--scores", scores / "summary.csv", "--results", results, "--out", report],
    }[stage]
    return [sys.executable, "-m", "audioicl", *map(str, args)]


def measured(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one child process."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    stderr = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{stderr[-2000:]}")
    return seconds, usage.ru_maxrss / 1024  # Linux: kilobytes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=20, help="episodes per task at scale 1 (default 20)")
    p.add_argument("--scales", default="1,4,10", help="multiples of --episodes (default 1,4,10)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="build processes")
    p.add_argument("--repeats", type=int, default=1, help="runs per stage and scale (median reported)")
    p.add_argument("--out", type=Path, required=True, help="scratch folder (emptied first)")
    args = p.parse_args()
    scales = [int(s) for s in args.scales.split(",")]
    rows: dict[tuple[str, int], tuple[float, float]] = {}
    for scale in scales:
        episodes = args.episodes * scale
        runs: dict[str, list[tuple[float, float]]] = {stage: [] for stage in STAGES}
        for _ in range(args.repeats):
            root = args.out / f"x{scale}"
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            for stage in STAGES:
                runs[stage].append(measured(command(stage, root, episodes, args.workers)))
                seconds, rss = runs[stage][-1]
                print(f"x{scale} {stage}: {seconds:.1f} s, {rss:.0f} MiB", file=sys.stderr, flush=True)
        for stage in STAGES:
            rows[stage, scale] = (
                statistics.median(s for s, _ in runs[stage]),
                statistics.median(m for _, m in runs[stage]),
            )
    base = scales[0]
    print("| stage | scale | episodes/task | wall s | peak RSS MiB | wall ratio | RSS ratio |")
    print("|---|---|---|---|---|---|---|")
    for stage in STAGES:
        for scale in scales:
            seconds, rss = rows[stage, scale]
            s0, m0 = rows[stage, base]
            print(
                f"| {stage} | {scale}x | {args.episodes * scale} | {seconds:.1f} | {rss:.0f} | "
                f"{seconds / s0:.2f} | {rss / m0:.2f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
