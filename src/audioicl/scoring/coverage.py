"""Coverage: what a scored folder holds per model and k, against what its dataset holds and what its runs
selected. No number without its coverage: a crashed run, a ``--limit`` or ``--shard`` run and a folder with
tasks absent all score, and each says so next to its numbers.

The expected episodes come from the dataset (``ScoreOptions.data``, else the data root in the model's run
record ``<model>_run.json`` beside its results files, ``inference.record``); the runs' selections in that
record (``--tasks``, ``--limit``, ``--shard`` of every run) say which of them were meant to be asked (without
a record: all). The status of a (model, k):

- ``complete``: every episode of the dataset has a line under its task;
- ``subset``: every episode the runs selected has one, but they selected fewer than the dataset holds: these
  are not the benchmark's numbers;
- ``incomplete``: episodes the runs selected have no line (a crashed, unfinished or cut run);
- ``unchecked``: the dataset is unknown (no ``--data`` and no run record, or its data root is gone): only the
  benchmark's nine task names can be checked;
- ``no answers``: every line is an error line (episodes the run could not ask: a family that takes one clip a
  prompt, a server that refused every request): nothing was measured, whatever else holds; no mean, never
  "complete 0.0 %", never ranked.

The mean over tasks is over the complete tasks only (``unchecked``: over the tasks present), always with the
number of tasks it covers. The coverage CSV (``<summary stem>_coverage.csv``) holds one row per (model, k).
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from audioicl.dataset.meta import find_meta_files, read_meta
from audioicl.errors import AudioICLError
from audioicl.files import atomic_text
from audioicl.inference.record import model_run_record, record_selections
from audioicl.records import Episode
from audioicl.tasks import task_names, task_of_episode_id

COMPLETE, SUBSET, INCOMPLETE, UNCHECKED = "complete", "subset", "incomplete", "unchecked"
NO_ANSWERS = "no answers"  # every line an error line: the run asked nothing, so nothing was measured
COVERAGE_HEADER = (
    "model",
    "shots",
    "status",
    "selection",
    "tasks_expected",
    "tasks_present",
    "tasks_complete",
    "episodes_expected",
    "episodes_selected",
    "episodes_present",
    "episodes_missing",
    "errors",
    "unparsed",
    "unreadable",
    "extra_lines",
    "mean_accuracy",
    "mean_tasks",
    "missing_tasks",
    "partial_tasks",
    "complete_tasks",
    "expected_from",
)
NAMES_SEPARATOR = ";"


# --- what was meant to be asked -------------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """One run's selection: its tasks (None: all), the first ``limit`` episodes of each, one shard ``I/N``."""

    tasks: tuple[str, ...] | None = None
    limit: int | None = None
    shard: str | None = None

    @property
    def everything(self) -> bool:
        return self.tasks is None and self.limit is None and self.shard is None

    def describe(self) -> str:
        bits = []
        if self.tasks is not None:
            bits.append("tasks " + ", ".join(self.tasks))
        if self.limit is not None:
            bits.append(f"first {self.limit} episode{'' if self.limit == 1 else 's'} per task")
        if self.shard is not None:
            bits.append(f"shard {self.shard}")
        return "; ".join(bits) or "all episodes"


def describe_selection(parts: Sequence[Part]) -> str:
    """Empty when a run selected everything (or nothing says otherwise), else each run's selection."""
    if not parts or any(part.everything for part in parts):
        return ""
    return " + ".join(dict.fromkeys(part.describe() for part in parts))


@dataclass(frozen=True)
class Expected:
    """What one model's results at one k should hold: the dataset's episodes for k (None: unknown), the runs'
    selections (none: everything), where the episodes come from, and why they are unknown."""

    episodes: tuple[Episode, ...] | None = None
    parts: tuple[Part, ...] = ()
    source: str = ""
    note: str = ""

    @cached_property
    def tasks_of(self) -> dict[str, str]:
        """Episode id → task, of the dataset."""
        return {ep.id: ep.task for ep in self.episodes or ()}

    @cached_property
    def selected(self) -> set[str]:
        """The ids the runs selected (every id without a run record), by the runner's own rule."""
        parts = self.parts or (Part(),)
        if self.episodes is None:
            return set()
        if any(part.everything for part in parts):
            return set(self.tasks_of)
        from audioicl.inference.options import Shard
        from audioicl.inference.runner import select_episodes  # the selection runs make, not a copy of it

        chosen: set[str] = set()
        for part in parts:
            shard = Shard.parse(part.shard) if part.shard else None
            chosen.update(ep.id for ep in select_episodes(self.episodes, part.tasks, part.limit, shard))
        return chosen


class Expectations:
    """``Expected`` per (model, k) of result files (``score.ResultFile``: ``path``, ``model``, ``shots``, and
    ``run_name``, which names the run record): from the
    dataset root ``data`` when given, else from each model's run record beside its files."""

    def __init__(self, files: Iterable, data: Path | None = None):
        self.data = None if data is None else Path(data)
        self._folders: dict[tuple[str, int], list[tuple[Path, str]]] = {}  # folder, the name of its record
        for f in files:
            folders = self._folders.setdefault((f.model, f.shots), [])
            held = (f.path.parent, f.run_name)
            if held not in folders:
                folders.append(held)
        self._metas: dict[Path, dict[int, Path]] = {}
        self._episodes: dict[Path, tuple[Episode, ...]] = {}
        self._expected: dict[tuple[str, int], Expected] = {}
        if self.data is not None:
            self._meta_files(self.data)  # a bad --data is the user's error: it raises here

    def _meta_files(self, root: Path) -> dict[int, Path]:
        if root not in self._metas:
            self._metas[root] = find_meta_files(root)
        return self._metas[root]

    def _read(self, path: Path) -> tuple[Episode, ...]:
        if path not in self._episodes:
            self._episodes[path] = tuple(read_meta(path))
        return self._episodes[path]

    def get(self, model: str, k: int) -> Expected:
        key = (model, k)
        if key not in self._expected:
            self._expected[key] = self._find(model, k)
        return self._expected[key]

    def _find(self, model: str, k: int) -> Expected:
        parts: list[Part] = []
        roots: list[str] = []
        for folder, run_name in self._folders.get((model, k), []):
            found = model_run_record(folder, run_name)
            if found is None:
                parts.append(Part())  # a folder without a record: every episode was meant
                continue
            record = found[1]
            if isinstance(record.get("data"), str):
                roots.append(record["data"])
            for selection in record_selections(record):
                shots = selection["shots"]
                if isinstance(shots, list) and k not in shots:
                    continue
                tasks = selection["tasks"]
                parts.append(Part(tuple(tasks) if tasks else None, selection["limit"], selection["shard"]))
        parts_t = tuple(parts)
        if self.data is not None:
            root, given = self.data, True
        elif roots:
            root, given = Path(roots[0]), False
        else:
            return Expected(
                None, parts_t, note="no dataset: pass --data ROOT (these result files have no run record)"
            )
        try:
            metas = self._meta_files(root)
            path = metas.get(k)
            if path is None and k == 0 and any(v > 0 for v in metas):
                path = metas[min(v for v in metas if v > 0)]  # k = 0 asks the smallest k file's queries
            if path is None:
                return Expected(None, parts_t, str(root), f"the dataset has no meta file for k={k}")
            return Expected(self._read(path), parts_t, str(root))
        except AudioICLError as exc:
            if given:
                raise
            return Expected(
                None, parts_t, str(root), f"the run record's dataset cannot be read: {exc.message}"
            )


# --- what was found -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoverageRow:
    """One model at one k: its status, the runs' selection (empty: everything), tasks and episodes expected
    (the dataset's), selected (by the runs), present (a line under their task) and missing (selected without
    one), error lines, unparsed responses, unreadable lines (malformed, in no task), lines that are no
    expected episode (``extra_lines``: duplicates, other tasks, ids not in the dataset), the mean accuracy over
    ``mean_tasks`` tasks (the complete ones; ``unchecked``: those present) and the tasks by kind. ``None``:
    unknown (the dataset is). ``per_task``: task → (present, selected), not written to the CSV."""

    model: str
    shots: int
    status: str
    selection: str = ""
    tasks_expected: int | None = None
    tasks_present: int = 0
    tasks_complete: int | None = None
    episodes_expected: int | None = None
    episodes_selected: int | None = None
    episodes_present: int | None = None
    episodes_missing: int | None = None
    errors: int = 0
    unparsed: int = 0
    unreadable: int = 0
    extra_lines: int | None = None
    mean_accuracy: float | None = None
    mean_tasks: int = 0
    missing_tasks: tuple[str, ...] = ()
    partial_tasks: tuple[tuple[str, int, int], ...] = ()  # (task, present, selected)
    complete_tasks: tuple[str, ...] = ()
    expected_from: str = ""
    note: str = field(default="", compare=False)
    per_task: Mapping[str, tuple[int, int]] = field(default_factory=dict, compare=False)

    @property
    def complete(self) -> bool:
        return self.status == COMPLETE and self.unreadable == 0

    @property
    def mean_over(self) -> tuple[str, ...] | None:
        """The tasks the mean averages: the complete ones; None for ``unchecked`` (all present)."""
        return None if self.status == UNCHECKED else self.complete_tasks


def coverage_row(
    model: str,
    shots: int,
    rows: Sequence,
    ids: Mapping[str, set],
    unreadable: int,
    expected: Expected,
    identities: Mapping[str, set[tuple[str, int, int, int]]] | None = None,
) -> CoverageRow:
    """The coverage of one (model, k) from its summary rows (``task``, ``accuracy``, ``n``, ``errors``,
    ``unparsed``), the ids scored under each task and the unreadable lines. ``identities``: task → the
    distinct (id, draw, order, variant) of lines that hold draws (one id, several draws: one line each, not
    extra lines); None: one line per id, as a plain run. Lines that are all error lines: ``no answers``."""
    accuracy = {r.task: r.accuracy for r in rows}
    counts = {
        "errors": sum(r.errors or 0 for r in rows),
        "unparsed": sum(r.unparsed or 0 for r in rows),
        "unreadable": unreadable,
    }
    selection = describe_selection(expected.parts)
    if expected.episodes is None:
        return _no_answers(_unchecked(model, shots, accuracy, counts, selection, expected), rows)
    by_task: dict[str, set[str]] = {}
    for episode, task in expected.tasks_of.items():
        by_task.setdefault(task, set()).add(episode)
    selected = expected.selected
    complete, missing, partial, per_task = [], [], [], {}
    present_total, missing_total, tasks_present, answered = 0, 0, 0, 0
    for task, wanted in by_task.items():
        have = ids.get(task, set()) & wanted
        if identities is not None:
            answered += sum(1 for identity in identities.get(task, ()) if identity[0] in wanted)
        chosen = wanted & selected
        per_task[task] = (len(have & chosen), len(chosen))
        present_total += len(have)
        tasks_present += bool(have)
        lost = len(chosen - have)
        missing_total += lost
        if not chosen:
            continue
        if not lost:
            complete.append(task)
        elif not have & chosen:
            missing.append(task)
        else:
            partial.append((task, len(have & chosen), len(chosen)))
    if present_total == len(expected.tasks_of):
        status = COMPLETE
    elif missing_total:
        status = INCOMPLETE
    else:
        status = SUBSET
    values = [accuracy[task] for task in complete]
    row = CoverageRow(
        model,
        shots,
        status,
        selection,
        tasks_expected=len(by_task),
        tasks_present=tasks_present,
        tasks_complete=len(complete),
        episodes_expected=len(expected.tasks_of),
        episodes_selected=len(selected),
        episodes_present=present_total,
        episodes_missing=missing_total,
        extra_lines=sum(r.n for r in rows) - (present_total if identities is None else answered),
        mean_accuracy=sum(values) / len(values) if values else None,
        mean_tasks=len(values),
        missing_tasks=tuple(missing),
        partial_tasks=tuple(partial),
        complete_tasks=tuple(complete),
        expected_from=expected.source,
        per_task=per_task,
        **counts,
    )
    return _no_answers(row, rows)


def _no_answers(row: CoverageRow, rows: Sequence) -> CoverageRow:
    """``row`` as ``no answers`` where every one of its lines is an error line (and the rows say so)."""
    lines = sum(r.n for r in rows)
    if lines and all(r.errors is not None for r in rows) and row.errors == lines:
        return replace(row, status=NO_ANSWERS, mean_accuracy=None, mean_tasks=0, complete_tasks=())
    return row


def _unchecked(
    model: str, shots: int, accuracy: Mapping[str, float], counts: dict, selection: str, expected: Expected
) -> CoverageRow:
    """No dataset: the mean over the tasks present; missing tasks told against the benchmark's nine (or the
    tasks the runs selected) when every task present is one of them."""
    names = task_names()
    chosen = [p.tasks for p in expected.parts]
    if chosen and all(tasks is not None for tasks in chosen):
        wanted = [t for t in names if any(t in tasks for tasks in chosen)]
    else:
        wanted = names
    known = set(accuracy) <= set(names)
    values = list(accuracy.values())
    return CoverageRow(
        model,
        shots,
        UNCHECKED,
        selection,
        tasks_expected=len(wanted) if known else None,
        tasks_present=len(accuracy),
        mean_accuracy=sum(values) / len(values) if values else None,
        mean_tasks=len(values),
        missing_tasks=tuple(t for t in wanted if t not in accuracy) if known else (),
        expected_from=expected.source,
        note=expected.note,
        **counts,
    )


# --- the task of a malformed line -----------------------------------------------------------------------

_NUMBERED = re.compile(r"(.*?)(\d+)")


def task_of_broken_line(
    episode: object, hint: str | None, expected: Expected, ids: Mapping[str, set]
) -> str | None:
    """The task a malformed result line belongs to, or None (an unreadable line): its id's task in the
    dataset; else the task its text names, when that is a known task; else the one task whose id range (among
    the well-formed lines ``ids``, task → ids, of the same file) holds its id; else, without a dataset, its
    id's block in the released numbering (SPEC §1) when every well-formed line's id agrees with it."""
    if isinstance(episode, str) and episode in expected.tasks_of:
        return expected.tasks_of[episode]
    if hint is not None and (hint in ids or hint in set(task_names()) or hint in expected.tasks_of.values()):
        return hint
    if not isinstance(episode, str):
        return None
    match = _NUMBERED.fullmatch(episode)
    if match is not None:
        prefix, number = match[1], int(match[2])
        holding = []
        for task, task_ids in ids.items():
            numbers = [
                int(m[2]) for i in task_ids if (m := _NUMBERED.fullmatch(i)) is not None and m[1] == prefix
            ]
            if numbers and min(numbers) <= number <= max(numbers):
                holding.append(task)
        if len(holding) == 1:
            return holding[0]
        if holding:
            return None
    block = task_of_episode_id(episode)
    if block is None or expected.episodes is not None:
        return None
    agrees = all(task_of_episode_id(i) in (task, None) for task, task_ids in ids.items() for i in task_ids)
    return block if agrees else None


# --- the CSV and the text -------------------------------------------------------------------------------


def coverage_path(summary: Path) -> Path:
    """Where the coverage CSV goes by default: ``<summary stem>_coverage.csv`` next to the summary (next to a
    ``<stem>_detail.csv``: ``<stem>_coverage.csv`` too)."""
    summary = Path(summary)
    stem = summary.stem
    if stem.endswith("_detail") and not summary.with_name(f"{stem}_coverage.csv").is_file():
        stem = stem[: -len("_detail")]
    return summary.with_name(f"{stem}_coverage.csv")


def _number(value: int | None) -> str:
    return "" if value is None else str(value)


def write_coverage(path: Path, rows: Iterable[CoverageRow]) -> None:
    """One row per (model, k) in summary order, csv defaults (CRLF) like the summary; empty: unknown."""
    path = Path(path)
    with atomic_text(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(COVERAGE_HEADER)
        for r in rows:
            writer.writerow(
                (r.model, r.shots, r.status, r.selection)
                + tuple(
                    _number(v)
                    for v in (
                        r.tasks_expected,
                        r.tasks_present,
                        r.tasks_complete,
                        r.episodes_expected,
                        r.episodes_selected,
                        r.episodes_present,
                        r.episodes_missing,
                        r.errors,
                        r.unparsed,
                        r.unreadable,
                        r.extra_lines,
                    )
                )
                + ("" if r.mean_accuracy is None else f"{r.mean_accuracy:.6f}", r.mean_tasks)
                + (
                    NAMES_SEPARATOR.join(r.missing_tasks),
                    NAMES_SEPARATOR.join(f"{t}:{have}/{of}" for t, have, of in r.partial_tasks),
                    NAMES_SEPARATOR.join(r.complete_tasks),
                    r.expected_from,
                )
            )


def read_coverage(path: Path) -> list[CoverageRow]:
    """The rows of a coverage CSV; errors name the file and line."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise AudioICLError(f"cannot read coverage: {exc.strerror}", file=str(path)) from None
    with handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or tuple(reader.fieldnames[:3]) != COVERAGE_HEADER[:3]:
            raise AudioICLError(
                f"not a coverage CSV: header must start {','.join(COVERAGE_HEADER[:3])}",
                file=str(path),
                line=1,
            )
        rows = []
        for record in reader:
            try:
                rows.append(_coverage_from(record))
            except (ValueError, KeyError, TypeError):
                raise AudioICLError(
                    f"bad coverage row {list(record.values())!r}", file=str(path), line=reader.line_num
                ) from None
    return rows


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split(NAMES_SEPARATOR)) if text else ()


def _partial(text: str) -> tuple[tuple[str, int, int], ...]:
    parts = []
    for item in _names(text):
        task, _, counts = item.rpartition(":")
        have, of = counts.split("/")
        parts.append((task, int(have), int(of)))
    return tuple(parts)


def _coverage_from(record: Mapping[str, str]) -> CoverageRow:
    def number(name: str) -> int | None:
        return int(record[name]) if record[name] != "" else None

    mean = record["mean_accuracy"]
    return CoverageRow(
        record["model"],
        int(record["shots"]),
        record["status"],
        record["selection"],
        tasks_expected=number("tasks_expected"),
        tasks_present=int(record["tasks_present"]),
        tasks_complete=number("tasks_complete"),
        episodes_expected=number("episodes_expected"),
        episodes_selected=number("episodes_selected"),
        episodes_present=number("episodes_present"),
        episodes_missing=number("episodes_missing"),
        errors=int(record["errors"]),
        unparsed=int(record["unparsed"]),
        unreadable=int(record["unreadable"]),
        extra_lines=number("extra_lines"),
        mean_accuracy=float(mean) if mean else None,
        mean_tasks=int(record["mean_tasks"]),
        missing_tasks=_names(record["missing_tasks"]),
        partial_tasks=_partial(record["partial_tasks"]),
        complete_tasks=_names(record["complete_tasks"]),
        expected_from=record["expected_from"],
    )


def describe_mean(row: CoverageRow) -> str:
    """The mean over tasks with its coverage: ``83.3% over all 9 tasks``, ``100.0% over 4 of 9 tasks:
    incomplete``, ``55.0% over 9 of 9 tasks: subset (first 2 episodes per task)``."""
    value = "–" if row.mean_accuracy is None else f"{100 * row.mean_accuracy:.1f}%"
    if row.status == NO_ANSWERS:
        return f"– (no answers: {row.errors} error lines)"
    if row.status == COMPLETE:
        return (
            f"{value} over the one task"
            if row.mean_tasks == 1
            else f"{value} over all {row.mean_tasks} tasks"
        )
    of = "" if row.tasks_expected is None else f" of {row.tasks_expected}"
    base = f"{value} over {row.mean_tasks}{of} {'task' if row.mean_tasks == 1 and not of else 'tasks'}"
    if row.status == SUBSET:
        return f"{base}: subset ({row.selection})" if row.selection else f"{base}: subset"
    if row.status == UNCHECKED:
        return f"{base}: coverage unchecked"
    return f"{base}: incomplete"


def describe_gaps(row: CoverageRow) -> list[str]:
    """What keeps a (model, k) from complete, one phrase each."""
    gaps = []
    if row.status == SUBSET:
        gaps.append(
            f"subset: {row.selection or 'fewer episodes than the dataset'} "
            f"({row.episodes_selected} of {row.episodes_expected} episodes)"
        )
    if row.status == INCOMPLETE:
        gaps.append(
            f"incomplete: {row.episodes_missing} of the {row.episodes_selected} episodes"
            + (f" selected ({row.selection})" if row.selection else "")
            + " have no line"
        )
    if row.status == NO_ANSWERS:
        gaps.append(f"no answers: every one of the {row.errors} lines is an error line (nothing was asked)")
    if row.status == UNCHECKED:
        gaps.append(f"coverage unchecked: {row.note or 'the dataset is unknown'}")
    if row.missing_tasks:
        absent = "absent" if row.status != UNCHECKED else "absent of the benchmark's tasks"
        gaps.append(f"{len(row.missing_tasks)} task(s) {absent}: {', '.join(row.missing_tasks)}")
    if row.partial_tasks:
        gaps.append("partial: " + ", ".join(f"{t} {have}/{of}" for t, have, of in row.partial_tasks))
    if row.unreadable:
        gaps.append(f"{row.unreadable} unreadable line(s) in no task")
    return gaps


def format_coverage(rows: Sequence[CoverageRow]) -> str:
    """A plain-text table (model, k, status, tasks present/expected, episodes present/selected of the
    dataset's, missing, error lines, unparsed, unreadable, the mean over tasks with its coverage) and, under it,
    what keeps each (model, k) that is not complete from complete."""
    header = ("model", "k", "coverage", "tasks", "episodes", "missing", "errors", "unparsed", "unreadable")
    header += ("mean over tasks",)
    body = []
    for r in rows:
        tasks = (
            f"{r.tasks_present}/{r.tasks_expected}" if r.tasks_expected is not None else str(r.tasks_present)
        )
        if r.episodes_present is None:
            episodes = "?"
        elif r.episodes_selected != r.episodes_expected:
            episodes = f"{r.episodes_present}/{r.episodes_selected} of {r.episodes_expected}"
        else:
            episodes = f"{r.episodes_present}/{r.episodes_expected}"
        body.append(
            (
                r.model,
                str(r.shots),
                r.status,
                tasks,
                episodes,
                _number(r.episodes_missing) or "?",
                str(r.errors),
                str(r.unparsed),
                str(r.unreadable),
                describe_mean(r),
            )
        )
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    right = {1, 3, 4, 5, 6, 7, 8}
    lines = [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in (header, *body)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in rows:
        gaps = describe_gaps(r)
        if gaps:
            lines.append(f"{r.model} k={r.shots}: " + "; ".join(gaps))
    return "\n".join(lines)
