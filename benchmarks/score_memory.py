"""Scoring memory: the peak resident memory of ``audioicl score`` as a sweep's results grow.

Lines as ``audioicl run`` writes them (prompt text, hashes, audio paths, usage; about 1.2 KB a line), over the
default build's 2,700 episodes per k, in two shapes of sweep: ``models``, model after model, each with its
``<model>_results_k<k>.jsonl`` for k = 1..5; ``draws``, one model run with ``--draws N`` (each file holds every
episode N times, ``"draw": d``), until the folder holds the asked number of lines. Each size is scored ``--runs`` times as a
user runs it (``python -m audioicl score --in DIR --out DIR``, a subprocess, with its default workers and with
``--workers 1``); the table gives the median peak RSS (the child's ``ru_maxrss``, its worker processes
included as the largest of them), the wall time, and the RSS growth per added line against the smallest size.
Memory that stays flat as lines grow: the growth per line is a few bytes (each cell's id and clip tallies),
not the line's size.

    python benchmarks/score_memory.py [--sizes 100000,300000,600000] [--runs 3]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audioicl.seeding import rng_for
from audioicl.tasks import task_names

SHOTS = (1, 2, 3, 4, 5)
EPISODES = 2_700  # per k: the default build's 300 episodes of 9 tasks
PROMPT = (
    "system: You are a helpful assistant.\nuser: Each audio clip below comes with a label. A hidden rule, the same "
    "for every clip in this set, maps the audio to its label: the label is a number determined by what you hear "
    "in the clip. Work out the rule from the labelled examples and apply it to the query clip. Answer with a "
    "single integer only.\n\n"
)


def _line(model: str, k: int, index: int, task: str, answer: int, right: bool, draw: int | None) -> str:
    digest = hashlib.sha256(f"{model}{k}{index}{draw}".encode()).hexdigest()
    paths = [f"data/{task.lower()}/easy/{index:05d}_c{c:02d}.wav" for c in range(k + 1)]
    demos = "".join(f"[Demo Audio {d + 1}] <audio> Label: {d}\n" for d in range(k))
    record = {
        "id": f"AudioICL{index + 1:05d}",
        "task": task,
        "response": str(answer if right else answer + 1),
        "gt": str(answer),
        "status": "ok",
        "error": None,
        "seconds": 0.0421,
        "usage": {"prompt_tokens": 180 * (k + 1), "completion_tokens": 2},
        "prompt_sha256": digest,
        "audio_sha256": hashlib.sha256(digest.encode()).hexdigest(),
        "prompt": PROMPT + demos + "[Query Audio] <audio> Label:",
        "audio_paths": paths,
        "k": k,
        "model": model,
    }
    if draw is not None:
        record["draw"] = draw
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_sweep(folder: Path, lines: int, shape: str) -> int:
    """Results files of ``shape`` until ``lines`` lines are written; the number written."""
    tasks = task_names()
    rng = rng_for(0, "benchmarks", "score_memory")
    per_file = EPISODES if shape == "models" else -(-lines // len(SHOTS))
    written, model = 0, 0
    while written < lines:
        name = f"model{model:03d}"
        for k in SHOTS:
            count = min(per_file, lines - written)
            if count <= 0:
                break
            answers = rng.integers(0, 20, size=count)
            right = rng.random(count) < 0.6
            with (folder / f"{name}_results_k{k}.jsonl").open("w", encoding="utf-8") as handle:
                for i in range(count):
                    episode, draw = i % EPISODES, (i // EPISODES if shape == "draws" else None)
                    task = tasks[episode * len(tasks) // EPISODES]
                    handle.write(_line(name, k, episode, task, int(answers[i]), bool(right[i]), draw))
            written += count
        model += 1
    return written


def score_once(folder: Path, out: Path, workers: str | None) -> tuple[float, float]:
    """(peak RSS MiB, wall seconds) of one ``audioicl score`` subprocess."""
    command = [sys.executable, "-m", "audioicl", "score", "--in", str(folder), "--out", str(out)]
    if workers is not None:
        command += ["--workers", workers]
    start = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    stderr = child.stderr.read().decode() if child.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"audioicl score failed: {stderr}")
    return usage.ru_maxrss / 1024, wall  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100000,300000,600000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shapes", default="models,draws")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="score_memory_") as tmp:
        for shape in args.shapes.split(","):
            for size in sizes:
                folder = Path(tmp) / f"{shape}{size}"
                folder.mkdir()
                lines = write_sweep(folder, size, shape)
                megabytes = sum(p.stat().st_size for p in folder.iterdir()) / 2**20
                for label, workers in (("default workers", None), ("--workers 1", "1")):
                    measured = [score_once(folder, Path(tmp) / "out", workers) for _ in range(args.runs)]
                    rss = statistics.median(m[0] for m in measured)
                    wall = statistics.median(m[1] for m in measured)
                    rows.append((f"{shape}, {label}", lines, megabytes, rss, wall))
                for path in folder.iterdir():
                    path.unlink()
    print(f"{args.runs} runs each (median), {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    header = f"{'shape, config':<24}  {'lines':>8}  {'input MiB':>9}  {'peak RSS MiB':>12}  {'wall s':>7}"
    print(f"{header}  {'B/line vs first':>15}")
    first: dict[str, tuple[int, float]] = {}
    for label, lines, megabytes, rss, wall in rows:
        base = first.setdefault(label, (lines, rss))
        growth = (rss - base[1]) * 2**20 / (lines - base[0]) if lines != base[0] else float("nan")
        print(f"{label:<24}  {lines:>8,}  {megabytes:>9.0f}  {rss:>12.0f}  {wall:>7.2f}  {growth:>15.0f}")


if __name__ == "__main__":
    main()
