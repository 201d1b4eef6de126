"""How fast ``audioicl build`` is: a full default build with 1 and 2 workers, median of several runs.

Each run is a fresh ``audioicl build`` subprocess into an empty temporary folder. Printed per worker count:
wall time, CPU time (user + system of the build and its workers) and its system part, clips/s, MB/s, and
peak memory (the largest sum of resident memory over the build's process tree, sampled every 50 ms).

The builds are deleted at the end, not between runs: on ext4 without a journal, creating a file skips
every inode of its block group freed in the last seconds (``recently_deleted``), so a build started right
after deleting the previous one spent a fifth of its CPU time in the kernel allocating inodes.

    python benchmarks/build_speed.py                       # 300 episodes, workers 1 and 2, 3 runs each
    python benchmarks/build_speed.py --episodes 60 --repeats 1 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    wall_s: float
    cpu_s: float
    sys_s: float
    peak_rss_mb: float
    clips: int
    megabytes: float


def _tree_rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, in kB (0 for processes that are gone)."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def run_once(episodes: int, workers: int, out: Path) -> Run:
    shutil.rmtree(out, ignore_errors=True)  # a leftover would be resumed, not built
    command = [sys.executable, "-m", "audioicl", "build", "--out", str(out), "--quiet"]
    command += ["--episodes", str(episodes), "--workers", str(workers)]
    peak = 0
    started = time.perf_counter()
    process = subprocess.Popen(command)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kb(process.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"build failed with exit code {process.returncode}")
    manifest = out / "manifest.json"
    if not manifest.is_file():
        raise SystemExit(f"the build wrote no {manifest}")
    totals = json.loads(manifest.read_text())["totals"]
    return Run(
        wall,
        usage.ru_utime + usage.ru_stime,
        usage.ru_stime,
        peak / 1024,
        totals["audio_files"],
        totals["bytes"] / 1e6,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts (default 1,2)")
    parser.add_argument(
        "--scratch", type=Path, default=None, help="folder for the builds (default: a temp dir)"
    )
    args = parser.parse_args()
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="audioicl-bench-"))
    print(
        f"audioicl build, {args.episodes} episodes per task, median of {args.repeats}; cpus={os.cpu_count()}"
    )
    print(
        f"{'workers':>7} {'wall s':>8} {'cpu s':>8} {'sys s':>7} {'clips':>7} {'clips/s':>8} {'MB':>8} "
        f"{'MB/s':>7} {'peak MB':>8}"
    )
    outs: list[Path] = []
    for workers in [int(w) for w in args.workers.split(",")]:
        folders = [scratch / f"w{workers}-{i}" for i in range(args.repeats)]
        outs += folders
        runs = [run_once(args.episodes, workers, out) for out in folders]
        wall = statistics.median(r.wall_s for r in runs)
        cpu = statistics.median(r.cpu_s for r in runs)
        system = statistics.median(r.sys_s for r in runs)
        peak = statistics.median(r.peak_rss_mb for r in runs)
        clips, megabytes = runs[0].clips, runs[0].megabytes
        print(
            f"{workers:>7} {wall:>8.1f} {cpu:>8.1f} {system:>7.1f} {clips:>7} {clips / wall:>8.0f} "
            f"{megabytes:>8.0f} {megabytes / wall:>7.1f} {peak:>8.0f}"
        )
    for out in outs:
        shutil.rmtree(out, ignore_errors=True)
    if args.scratch is None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
