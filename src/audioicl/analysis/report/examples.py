"""Example episodes for the report: read result lines, judge them, pick a few per task deterministically.

Per task, examples come from the highest k in the results. An episode counts as solved when any model got
it right; examples alternate solved and unsolved episodes in id order (first solved, first unsolved, ...),
so a reader sees both successes and failures, and every model's answer to the same episode side by side.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl.inference.record import LEGACY_RUN_FILE, read_run_record, run_record_name
from audioicl.inference.results import read_result_lines
from audioicl.scoring.rules import Verdict
from audioicl.scoring.score import ScoredLine, find_result_files, iter_scored_lines
from audioicl.tasks.chance import order_tasks

RUN_DATA_KEY = "data"  # the data root, as the runner writes <model>_run.json


@dataclass(frozen=True)
class ModelAnswer:
    model: str
    response: str | None
    verdict: Verdict
    error: str | None  # the runner's error message for a failed episode


@dataclass(frozen=True)
class Example:
    task: str
    k: int
    id: str
    gt: Any
    prompt: str | None  # None when the result lines do not record it (e.g. the original's files)
    audio_paths: tuple[str, ...] | None
    data_root: Path | None
    answers: tuple[ModelAnswer, ...]

    @property
    def solved(self) -> bool:
        return any(answer.verdict.correct for answer in self.answers)


def _recorded_root(run_file: Path) -> Path | None:
    value = (read_run_record(run_file) or {}).get(RUN_DATA_KEY)
    return run_file.parent / value if isinstance(value, str) and value else None


def run_data_root(results_file: Path, top: Path, model: str) -> Path | None:
    """The data root recorded for ``model`` (the ``<model>`` of the file name) in the nearest
    ``<model>_run.json``, or a folder-wide ``run.json`` of older runs, between the file's folder and ``top``
    (a relative path is taken from the record's folder)."""
    folder = results_file.parent
    while True:
        for run_file in (folder / run_record_name(model), folder / LEGACY_RUN_FILE):
            if run_file.is_file():
                return _recorded_root(run_file)
        if folder == top or folder.parent == folder:
            return None
        folder = folder.parent


def read_scored(folder: Path) -> list[ScoredLine]:
    """Every non-blank result line under ``folder``, judged (malformed lines raise, naming file and line)."""
    return [line for result in find_result_files(folder) for line in iter_scored_lines(result)]


class RecordReader:
    """The full JSON record behind a scored line (scoring keeps only the original's four fields)."""

    def __init__(self) -> None:
        self._lines: dict[Path, list[str]] = {}

    def record(self, scored: ScoredLine) -> dict[str, Any]:
        if scored.file not in self._lines:
            self._lines[scored.file] = read_result_lines(scored.file)
        return json.loads(self._lines[scored.file][scored.line - 1])


def _audio_paths(record: dict[str, Any]) -> tuple[str, ...] | None:
    paths = record.get("audio_paths")
    if isinstance(paths, list) and all(isinstance(p, str) for p in paths):
        return tuple(paths)
    return None


def _example(lines: list[ScoredLine], reader: RecordReader, data: Path | None, top: Path) -> Example:
    lines = sorted(lines, key=lambda s: (s.model, str(s.file), s.line))
    records = [reader.record(s) for s in lines]
    prompt = next((p for r in records if isinstance(p := r.get("prompt"), str)), None)
    answers = tuple(
        ModelAnswer(
            s.model, None if s.response is None else str(s.response), s.verdict, r.get("error") or None
        )
        for s, r in zip(lines, records, strict=True)
    )
    first = lines[0]
    return Example(
        first.task,
        first.shots,
        str(first.id),
        first.gt,
        prompt,
        _audio_paths(records[0]),
        data or run_data_root(first.file, top, first.model),
        answers,
    )


def interleave(solved: list[str], unsolved: list[str], count: int) -> list[str]:
    """First solved, first unsolved, second solved, ...; the longer list fills in when one runs out."""
    picked: list[str] = []
    for index in range(max(len(solved), len(unsolved))):
        picked.extend(group[index] for group in (solved, unsolved) if index < len(group))
    return picked[:count]


def select_examples(
    lines: list[ScoredLine], per_task: int, folder: Path, data: Path | None = None
) -> dict[str, list[Example]]:
    """Up to ``per_task`` examples for every task, at the highest k that task has in the results.

    ``data`` (``--data``) is the clips' root; without it, the ``<model>_run.json`` (or ``run.json``) next to
    the results file of the example's first model.
    """
    by_task: dict[str, list[ScoredLine]] = defaultdict(list)
    for scored in lines:
        by_task[scored.task].append(scored)
    reader = RecordReader()
    chosen: dict[str, list[Example]] = {}
    for task in order_tasks(set(by_task)):
        top_k = max(s.shots for s in by_task[task])
        by_id: dict[str, list[ScoredLine]] = defaultdict(list)
        for scored in by_task[task]:
            if scored.shots == top_k:
                by_id[str(scored.id)].append(scored)
        ids = sorted(by_id)
        solved = {i for i in ids if any(s.verdict.correct for s in by_id[i])}
        picked = interleave([i for i in ids if i in solved], [i for i in ids if i not in solved], per_task)
        chosen[task] = [_example(by_id[i], reader, data, folder) for i in picked]
    return chosen
