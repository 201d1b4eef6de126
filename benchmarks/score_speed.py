"""Scoring speed: result lines (9 tasks, k = 1..5, mixed response styles) end to end.

The baseline is a plain scorer, the original's loop written plainly: every line ``json.loads``-ed, judged by the
same rules (``scoring.rules``), counted per (model, k, task), the summary CSV written. Against it, the median
wall time of ``audioicl score --in DIR --out DIR`` as a user runs it (a subprocess: start-up, the summary,
detail, coverage CSVs, intervals and the cluster bootstrap included), and of the library's ``score_files`` in
one process and with its default worker processes (one per CPU over the result files). CPU time includes the
worker processes'. The ratio is the plain scorer's wall time over each (above 1: faster).

    python benchmarks/score_speed.py [--lines 600000] [--runs 3]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audioicl.scoring.rules import rule_table
from audioicl.scoring.score import (
    ScoreOptions,
    find_result_files,
    parse_result_name,
    score_files,
    write_detail,
    write_summary,
)
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


def plain_score(folder: Path, out: Path) -> None:
    """The original scorer's loop, plainly: each line parsed, judged, counted; accuracy per (model, k, task)."""
    rules, fallback = rule_table(strict=False)
    counts: dict[tuple[str, int, str], list[int]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        model, k = parse_result_name(path.name)  # type: ignore[misc]
        with path.open(encoding="utf-8") as handle:
            for text in handle:
                if not text.strip():
                    continue
                record = json.loads(text)
                task = str(record.get("task", ""))
                verdict = rules.get(task, fallback).judge(record.get("response"), record.get("gt"))
                count = counts.setdefault((model, k, task), [0, 0])
                count[0] += verdict.correct
                count[1] += 1
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("model", "shots", "task", "accuracy", "n"))
        for (model, k, task), (correct, n) in sorted(counts.items()):
            writer.writerow((model, k, task, f"{correct / n:.6f}", n))


def plain_once(folder: Path) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), _cpu_seconds()
    plain_score(folder, folder.parent / "plain.csv")
    return time.perf_counter() - wall, _cpu_seconds() - cpu


def command_once(folder: Path) -> tuple[float, float]:
    """``audioicl score`` as a user runs it."""
    wall, cpu = time.perf_counter(), _cpu_seconds()
    command = [
        sys.executable,
        "-m",
        "audioicl",
        "score",
        "--in",
        str(folder),
        "--out",
        str(folder.parent / "cli"),
    ]
    subprocess.run(command, check=True, capture_output=True)
    return time.perf_counter() - wall, _cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=600_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="score_speed_") as tmp:
        folder = Path(tmp) / "results"
        folder.mkdir()
        write_results(folder, args.lines)
        lines = sum(1 for path in folder.glob("*.jsonl") for _ in path.open(encoding="utf-8"))
        runs = {
            "plain scorer": lambda: plain_once(folder),
            "audioicl score": lambda: command_once(folder),
            "score_files, 1 process": lambda: score_once(folder, 1),
            "score_files, default": lambda: score_once(folder, None),
        }
        times = {name: [measure() for _ in range(args.runs)] for name, measure in runs.items()}
    print(
        f"{lines:,} lines, {args.runs} runs each, load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
    )
    print(f"{'config':<22}  {'wall s':>7}  {'CPU s':>7}  {'lines/s (wall)':>15}  {'vs plain':>8}")
    base = statistics.median(w for w, _ in times["plain scorer"])
    for name, measured in times.items():
        wall = statistics.median(w for w, _ in measured)
        cpu = statistics.median(c for _, c in measured)
        print(f"{name:<22}  {wall:>7.3f}  {cpu:>7.3f}  {lines / wall:>15,.0f}  {base / wall:>7.2f}x")


if __name__ == "__main__":
    main()
