"""Scoring speed: 1,000,000 result lines (9 tasks, k = 1..5, mixed response styles) end to end.

Each run finds the files, reads and parses every line, judges it, aggregates and writes the summary and
detail CSVs, through the library (``audioicl.scoring``). Prints lines/s, median of the runs, for one
process (the baseline) and for the default (one worker process per CPU over the result files), and the ratio.
CPU time includes the worker processes'.

    python benchmarks/score_speed.py [--lines 1000000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from audioicl.scoring.score import ScoreOptions, find_result_files, score_files, write_detail, write_summary
from audioicl.seeding import rng_for
from audioicl.tasks import task_names

SHOTS = (1, 2, 3, 4, 5)
WORDS = ("plant", "house", "water", "light", "bread", "chair", "river", "stone")
PATTERNS = ("PBP", "EGE", "QQZ", "MMN", "TUT", "AAB")


def _answer(task: str, pick: int) -> tuple[object, str]:
    """(gt, a right answer) for one line of ``task``."""
    if task == "MorseCode":
        word = WORDS[pick % len(WORDS)]
        return word, word
    if task == "AudioRemap":
        pattern = PATTERNS[pick % len(PATTERNS)]
        return pattern, pattern
    if task == "AnomalyDetect":
        label = ("Normal", "Anomalous")[pick % 2]
        return label, label
    value = pick % 21
    return str(value), str(value)


def _response(style: int, answer: str) -> str | None:
    """Bare answers, sentences, punctuation, spacing, nulls and off-format text, in fixed proportions."""
    return (
        answer,
        f"The answer is {answer}.",
        f"{answer}.",
        f"Label: {answer}",
        " ".join(answer),
        None,
        f"I think it is '{answer}', based on the demonstrations (3 of them).",
        "I cannot tell.",
    )[style]


def write_results(folder: Path, lines: int) -> None:
    """``bench_results_k<k>.jsonl`` for k = 1..5, ``lines`` lines in all, tasks in blocks as a run writes them."""
    tasks = task_names()
    rng = rng_for(0, "benchmarks", "score_speed")
    per_file = lines // len(SHOTS)
    for k in SHOTS:
        picks = rng.integers(0, 1000, size=per_file)
        styles = rng.integers(0, 8, size=per_file)
        right = rng.random(per_file) < 0.6
        with (folder / f"bench_results_k{k}.jsonl").open("w", encoding="utf-8") as handle:
            for i in range(per_file):
                task = tasks[i * len(tasks) // per_file]
                gt, answer = _answer(task, int(picks[i]))
                if not right[i]:
                    answer = _answer(task, int(picks[i]) + 1)[1]
                record = {"id": f"AudioICL{i % 2700 + 1:05d}", "task": task}
                record |= {"response": _response(int(styles[i]), answer), "gt": gt}
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the scoring workers)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def score_once(folder: Path, workers: int | None) -> tuple[float, float]:
    """(wall seconds, CPU seconds) for one full scoring run."""
    wall, cpu = time.perf_counter(), _cpu_seconds()
    scoring = score_files(find_result_files(folder), ScoreOptions(workers=workers))
    write_summary(folder / "out" / "summary.csv", scoring.rows)
    write_detail(folder / "out" / "summary_detail.csv", scoring.rows)
    return time.perf_counter() - wall, _cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="score_speed_") as tmp:
        folder = Path(tmp)
        write_results(folder, args.lines)
        lines = sum(1 for path in folder.glob("*.jsonl") for _ in path.open(encoding="utf-8"))
        configs = {"1 process": 1, "default": None}
        times = {
            name: [score_once(folder, workers) for _ in range(args.runs)] for name, workers in configs.items()
        }
    print(
        f"{lines:,} lines, {args.runs} runs each, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print(f"{'config':<10}  {'wall s':>7}  {'CPU s':>7}  {'lines/s (wall)':>15}  {'vs 1 process':>12}")
    base = statistics.median(w for w, _ in times["1 process"])
    for name, runs in times.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"{name:<10}  {wall:>7.3f}  {cpu:>7.3f}  {lines / wall:>15,.0f}  {base / wall:>11.2f}x")


if __name__ == "__main__":
    main()
