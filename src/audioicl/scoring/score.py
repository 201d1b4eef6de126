"""Scoring result folders against ground truth (SPEC §5): result files found, each line judged by the rules
(``scoring.rules``), accuracies per (model, shots, task) with their intervals (``scoring.stats``), the coverage
of each (model, shots) against its dataset and its runs' selection (``scoring.coverage``), CSV output.

The default numbers are the original's. Our additions never change them: unparsed responses and error lines
(``status: "error"``: episodes a run could not ask, e.g. for a missing clip) counted separately (both stay in
the denominator, as wrong), Wilson and cluster-bootstrap intervals, an opt-in strict mode
(``ScoreOptions.strict``) that only accepts a response that is the bare answer, and the coverage CSV. A
malformed line (which the original cannot score: it stops) is, with ``skip_bad_lines``, counted as wrong in
its task when its id or text tells the task, else reported apart as unreadable: never a task of its own.

Everything here is a plain function over typed records so the report module can reuse it:
``find_result_files`` → ``iter_scored_lines`` / ``score_files`` → ``write_summary`` → ``read_summary``.
"""

from __future__ import annotations

import csv
import json
import multiprocessing
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from audioicl.dataset.meta import find_meta_files, id_in_broken_line, json_limit_problem, read_meta
from audioicl.errors import AudioICLError
from audioicl.files import atomic_text, writing
from audioicl.inference.results import RESULTS_PATTERN, iter_result_lines_or_none
from audioicl.registry import near_name
from audioicl.tasks import task_names

from .coverage import (
    CoverageRow,
    Expectations,
    coverage_path,
    coverage_row,
    task_of_broken_line,
    write_coverage,
)
from .draws import DrawRow, draw_rows, draws_path, write_draws
from .identity import identity_notes, separate_runs
from .lines import PLAIN, REPLICATE_KEYS, ResultFile, ScoredLine
from .provenance import provenance, runs_path, write_provenance
from .rules import UNPARSED, Verdict, rule_table
from .stats import cluster_bootstrap, wilson_interval

SUMMARY_HEADER = ("model", "shots", "task", "accuracy", "n")
SUMMARY_NAME = "summary.csv"  # the summary CSV's name in a folder given for it
DETAIL_COUNTS = ("correct", "unparsed", "errors")
DETAIL_CLUSTERS = ("query_clips", "cluster_ci_low", "cluster_ci_high")
DETAIL_COMPLIANCE = ("parsed_share", "accuracy_parsed")
DETAIL_HEADER = (
    *SUMMARY_HEADER,
    *DETAIL_COUNTS,
    "ci_low",
    "ci_high",
    "scoring",
    *DETAIL_CLUSTERS,
    *DETAIL_COMPLIANCE,
)
UNKNOWN_CLIPS = "unknown"
VERDICT_MEMO = 65_536  # distinct (task, response, gt) remembered per file, then forgotten all at once
_DECODER = json.JSONDecoder()


# --- finding result files ------------------------------------------------------------------------------


def parse_result_name(name: str) -> tuple[str, int] | None:
    """``<model>_results[_meta]_k<k>.jsonl`` → (model, k), model the shortest prefix that fits."""
    match = RESULTS_PATTERN.match(name)
    return (match["model"], int(match["k"])) if match else None


def find_result_files(
    root: Path, *, models: Iterable[str] | None = None, shots: Iterable[int] | None = None
) -> list[ResultFile]:
    """Result files anywhere under ``root``, in sorted path order (the original's), optionally filtered; the
    runs of one name that measured different things made apart (``scoring.identity.separate_runs``)."""
    root = Path(root)
    if not root.is_dir():
        raise AudioICLError("results folder does not exist or is not a folder", file=str(root))
    wanted_models = None if models is None else set(models)
    wanted_shots = None if shots is None else set(shots)
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        parsed = parse_result_name(path.name)
        if parsed is None or not path.is_file():
            continue
        model, k = parsed
        if (wanted_models is None or model in wanted_models) and (wanted_shots is None or k in wanted_shots):
            found.append(ResultFile(path, model, k))
    return separate_runs(found)


# --- reading and scoring result lines ------------------------------------------------------------------


@dataclass(frozen=True)
class ResultKeys:
    """Which JSON keys hold the response, ground truth, task and id (the original's options)."""

    response: str = "response"
    gt: str = "gt"
    task: str = "task"
    id: str = "id"


@dataclass(frozen=True)
class ScoreOptions:
    keys: ResultKeys = field(default_factory=ResultKeys)
    strict: bool = False
    skip_bad_lines: bool = False
    workers: int | None = None  # processes for large inputs; None: one per CPU, 1: no worker processes
    # the dataset the results came from, for the coverage and a malformed line's task; None: each model's
    # run record's data root
    data: Path | None = None
    # (k, episode id) → the query clip, for lines without ``audio_paths`` (``query_clips_of`` a dataset)
    query_clips: Mapping[tuple[int, str], str] | None = None


def query_clips_of(root: Path) -> dict[tuple[int, str], str]:
    """(k, episode id) → the audio path of the query clip, from a dataset's meta files."""
    return {
        (k, ep.id): ep.query.target.audio_path
        for k, path in find_meta_files(root).items()
        for ep in read_meta(path)
    }


def _query_clip(record: dict, shots: int, episode: object, options: ScoreOptions) -> str | None:
    """The clip the line answered: the last of its ``audio_paths`` (ours), else the dataset's."""
    paths = record.get("audio_paths")
    if type(paths) is list and paths and type(paths[-1]) is str:
        return paths[-1]
    if options.query_clips is not None and isinstance(episode, str):
        return options.query_clips.get((shots, episode))
    return None


def _line_problem(text: str) -> str:
    """What is wrong with a result line that is not one JSON object."""
    try:
        record, end = _DECODER.raw_decode(text)
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg}: column {exc.colno})"
    except RecursionError:
        return "JSON nested too deeply"
    except ValueError as exc:  # a number past Python's 4,300-digit limit
        return f"unreadable JSON ({json_limit_problem(exc)})"
    if end != len(text):
        return f"not one JSON value: extra data at column {end + 1}"
    return f"not a JSON object but {type(record).__name__}"


def _replicate(record: dict, path: Path, number: int, episode: object) -> tuple[int, int, int]:
    """A line's (draw, order, variant): non-negative integers, 0 where absent."""
    values = []
    for key in REPLICATE_KEYS:
        value = record.get(key, 0)
        if type(value) is not int or value < 0:
            raise AudioICLError(
                f"bad result line: {key} must be a non-negative integer, got {value!r}",
                file=str(path),
                line=number,
                id=episode if isinstance(episode, str) else None,
            )
        values.append(value)
    return values[0], values[1], values[2]


def _judged_lines(result: ResultFile, options: ScoreOptions) -> Iterator[tuple]:
    """``iter_scored_lines`` as plain tuples ``(line, id, task, response, gt, verdict, malformed, error,
    query_clip, task_hint, replicate)``: the aggregation's hot loop, which needs no record per line."""
    keys = options.keys
    response_key, gt_key, task_key, id_key = keys.response, keys.gt, keys.task, keys.id
    rules, fallback = rule_table(strict=options.strict)
    # json.loads minus its whitespace handling and wrapper (lines are stripped): about twice as fast.
    # scan_once is what JSONDecoder.raw_decode calls; it raises StopIteration where nothing parses.
    scan = _DECODER.scan_once
    path = result.path
    verdicts: dict[tuple, Verdict] = {}
    for number, raw in enumerate(iter_result_lines_or_none(path), 1):
        if raw is None:  # not UTF-8 text: one malformed line, in its place
            if not options.skip_bad_lines:
                raise AudioICLError("malformed result line: not UTF-8 text", file=str(path), line=number)
            yield number, None, "", None, None, UNPARSED, True, False, None, None, None
            continue
        text = raw.strip()
        if not text:
            continue
        try:
            record, end = scan(text, 0)
        except (ValueError, StopIteration, RecursionError):  # ValueError: also a 4,300-digit number
            record = end = None
        if end != len(text) or type(record) is not dict:
            episode = id_in_broken_line(text, id_key)
            if not options.skip_bad_lines:
                raise AudioICLError(
                    f"malformed result line: {_line_problem(text)}",
                    file=str(path),
                    line=number,
                    id=episode,
                )
            hint = id_in_broken_line(text, task_key)
            yield number, episode, "", None, None, UNPARSED, True, False, None, hint, None
            continue
        task = record.get(task_key, "")
        if type(task) is not str:
            task = str(task)  # as the original: a null task is the task "None"
        response = record.get(response_key)  # missing: wrong, and in n (SPEC §5 rule 1)
        gt = record.get(gt_key)
        episode = record.get(id_key)
        replicate = (
            _replicate(record, path, number, episode)
            if "draw" in record or "order" in record or "variant" in record
            else None
        )
        # a file's answers repeat ("3", "The answer is 3."): each distinct (task, response, gt) judged once
        key = (task, response, gt, type(gt)) if type(response) is str and type(gt) in (str, int) else None
        verdict = verdicts.get(key) if key is not None else None
        if verdict is None:
            verdict = rules.get(task, fallback).judge(response, gt)
            if key is not None:
                if len(verdicts) >= VERDICT_MEMO:
                    verdicts.clear()
                verdicts[key] = verdict
        yield (
            number,
            episode,
            task,
            response,
            gt,
            verdict,
            False,
            record.get("status") == "error",
            _query_clip(record, result.shots, episode, options),
            None,
            replicate,
        )


def iter_scored_lines(result: ResultFile, options: ScoreOptions = ScoreOptions()) -> Iterator[ScoredLine]:
    """Score every non-blank line of one result file, in order.

    A line without a response key is a null response: wrong, unparsed, in n (the original's rule). A
    malformed line (not JSON, not one object; a half-written last line is one too) raises
    ``AudioICLError`` naming file, line and id, unless ``options.skip_bad_lines``: then it is yielded as a
    wrong, unparsed ``ScoredLine`` with ``malformed=True`` and the empty task (``score_files`` then counts it
    in the task its id or text tells, or as an unreadable line).
    """
    model, shots, path = result.model, result.shots, result.path
    for judged in _judged_lines(result, options):
        yield ScoredLine(model, shots, path, *judged)


# --- aggregation ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SummaryRow:
    """Accuracy of one model at one k on one task. ``correct``, ``unparsed`` and ``errors`` (error lines: episodes
    the run could not ask) are None when unknown (a summary CSV read back holds only accuracy and n).
    ``query_clips``: distinct query clips among the n lines (None: some line's clip is unknown);
    ``cluster_interval``: the 95% cluster-bootstrap interval over them; ``correct_parsed``: the correct lines
    among those the task's rule could parse (format compliance, ``parsed_share`` and ``accuracy_parsed``)."""

    model: str
    shots: int
    task: str
    accuracy: float
    n: int
    correct: int | None = None
    unparsed: int | None = None
    errors: int | None = None
    query_clips: int | None = None
    cluster_interval: tuple[float, float] | None = None
    correct_parsed: int | None = None

    @property
    def parsed_share(self) -> float | None:
        """The share of the n answers the task's rule could read (None: unknown)."""
        return None if self.unparsed is None else (self.n - self.unparsed) / self.n

    @property
    def accuracy_parsed(self) -> float | None:
        """Accuracy among the parsed answers: what the model knows when it answers in form (None: unknown,
        or nothing parsed). ``accuracy`` (unparsed counted wrong) is the protocol's number."""
        if self.unparsed is None or self.correct_parsed is None or self.unparsed == self.n:
            return None
        return self.correct_parsed / (self.n - self.unparsed)

    @property
    def recurring(self) -> bool:
        """Some query clip serves more than one of the n lines (so they are not independent)."""
        return self.query_clips is not None and self.query_clips < self.n

    def interval(self, z: float = 1.96) -> tuple[float, float]:
        """Wilson interval; from a read-back summary the count is ``round(accuracy * n)``, exact while
        n < 1,000,000 (accuracy has six decimals)."""
        correct = self.correct if self.correct is not None else round(self.accuracy * self.n)
        return wilson_interval(correct, self.n, z)


@dataclass
class Scoring:
    """What ``score_files`` found: summary rows in output order, malformed lines skipped (counted as wrong in
    their task, or ``unreadable``: in no row), (when asked) every scored line grouped by (model, shots) for
    the per-example files, and the coverage of each (model, shots)."""

    rows: list[SummaryRow]
    malformed: int = 0
    examples: dict[tuple[str, int], list[ScoredLine]] = field(default_factory=dict)
    files: tuple[ResultFile, ...] = ()
    coverage: list[CoverageRow] = field(default_factory=list)
    unreadable: int = 0
    draws: list[DrawRow] = field(default_factory=list)  # only when some line holds draw/order/variant
    notes: list[str] = field(default_factory=list)  # names whose runs were scored apart (``identity_notes``)


@dataclass
class _FileCounts:
    """One file's tallies: task → [correct, n, unparsed, errors, correct but unparsed], task → query clip →
    [correct, n] (a None clip: lines whose clip is unknown), task → the (string) ids of its lines, the
    malformed lines as (line, id, task hint), not yet in any task, its lines when kept, and task → the
    identities (id, draw, order, variant) of its lines that hold those fields."""

    per_task: dict[str, list[int]]
    per_clip: dict[str, dict[str | None, list[int]]]
    ids: dict[str, set[str]]
    bad: list[tuple[int, object, str | None]]
    lines: list[ScoredLine] | None
    replicates: dict[str, set[tuple[str, int, int, int]]] = field(default_factory=dict)


def _count_file(result: ResultFile, options: ScoreOptions, keep_examples: bool) -> _FileCounts:
    per_task: dict[str, list[int]] = {}
    per_clip: dict[str, dict[str | None, list[int]]] = {}
    ids: dict[str, set[str]] = {}
    bad: list[tuple[int, object, str | None]] = []
    lines: list[ScoredLine] | None = [] if keep_examples else None
    replicates: dict[str, set[tuple[str, int, int, int]]] = {}
    for judged in _judged_lines(result, options):
        if lines is not None:
            lines.append(ScoredLine(result.model, result.shots, result.path, *judged))
        if judged[6]:
            bad.append((judged[0], judged[1], judged[9]))
            continue
        task, verdict = judged[2], judged[5]
        count = per_task.get(task)
        if count is None:
            count = per_task[task] = [0, 0, 0, 0, 0]
            per_clip[task] = {}
            ids[task] = set()
        count[0] += verdict.correct
        count[1] += 1
        count[2] += not verdict.parsed
        count[3] += judged[7]
        count[4] += verdict.correct and not verdict.parsed
        query_clip = judged[8]
        clip = per_clip[task].get(query_clip)
        if clip is None:  # a clip's and an id's text held once however many files and cells name it
            clip = per_clip[task][query_clip if query_clip is None else sys.intern(query_clip)] = [0, 0]
        clip[0] += verdict.correct
        clip[1] += 1
        if type(judged[1]) is str:
            ids[task].add(sys.intern(judged[1]))
        if judged[10] is not None:
            replicates.setdefault(task, set()).add((str(judged[1]), *judged[10]))
    return _FileCounts(per_task, per_clip, ids, bad, lines, replicates)


def _place_broken_lines(
    result: ResultFile, tally: _FileCounts, options: ScoreOptions, expectations: Expectations
) -> int:
    """Count each malformed line of a file as a wrong, unparsed line of the task its id or text tells
    (``coverage.task_of_broken_line``); the number of those whose task cannot be told (unreadable)."""
    expected = expectations.get(result.model, result.shots)
    good = {task: set(task_ids) for task, task_ids in tally.ids.items()}  # the well-formed lines' ids
    kept = {line.line: line for line in tally.lines or () if line.malformed}
    unreadable = 0
    for number, episode, hint in tally.bad:
        task = task_of_broken_line(episode, hint, expected, good)
        if task is None:
            unreadable += 1
            continue
        if number in kept:
            kept[number].task = task
        count = tally.per_task.setdefault(task, [0, 0, 0, 0, 0])
        count[1] += 1
        count[2] += 1
        known = options.query_clips is not None and isinstance(episode, str)
        clip = options.query_clips.get((result.shots, episode)) if known else None
        tally.per_clip.setdefault(task, {}).setdefault(clip, [0, 0])[1] += 1
        if isinstance(episode, str):
            tally.ids.setdefault(task, set()).add(episode)
    return unreadable


PARALLEL_MIN_BYTES = 8_000_000  # below this, starting worker processes costs more than it saves


def _count_files(
    files: list[ResultFile], options: ScoreOptions, keep_examples: bool
) -> Iterator[_FileCounts]:
    """Each file's tally in file order, in worker processes when there are several large files and no lines
    to keep; one at a time, so that each is added up and let go before the next (memory by cells, not
    files)."""
    workers = min(len(files), options.workers or os.cpu_count() or 1)
    size = sum(f.path.stat().st_size for f in files if f.path.is_file())
    if keep_examples or workers < 2 or size < PARALLEL_MIN_BYTES:
        yield from (_count_file(f, options, keep_examples) for f in files)
        return
    context = multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else None
    )
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        yield from pool.map(_count_file, files, [options] * len(files), [False] * len(files))


def score_files(
    files: Iterable[ResultFile],
    options: ScoreOptions = ScoreOptions(),
    *,
    keep_examples: bool = False,
    expectations: Expectations | None = None,
) -> Scoring:
    """Score result files and aggregate per (model, shots, task); same model and k in several files add up.
    ``expectations``: what each (model, shots) should hold, for the coverage (default: from
    ``options.data`` or the run records beside the files)."""
    files = list(files)
    if expectations is None:
        expectations = Expectations(files, options.data)
    counts: dict[tuple[str, int, str], list[int]] = {}  # key → [correct, n, unparsed, errors, ...]
    clips: dict[tuple[str, int, str], dict[str | None, list[int]]] = {}  # key → clip → [correct, n]
    ids: dict[tuple[str, int], dict[str, set[str]]] = {}  # (model, shots) → task → ids
    unreadable: dict[tuple[str, int], int] = {}
    examples: dict[tuple[str, int], list[ScoredLine]] = {}
    replicates: dict[tuple[str, int], dict[str, set[tuple[str, int, int, int]]]] = {}
    malformed = 0
    kept_lines: list[list[ScoredLine] | None] = []  # each file's lines, when asked to keep them
    for result, tally in zip(files, _count_files(files, options, keep_examples), strict=True):
        kept_lines.append(tally.lines)
        cell = (result.model, result.shots)
        malformed += len(tally.bad)
        unreadable[cell] = unreadable.get(cell, 0)
        if tally.bad:
            unreadable[cell] += _place_broken_lines(result, tally, options, expectations)
        if tally.lines:
            examples.setdefault(cell, []).extend(tally.lines)
        for task, task_ids in tally.ids.items():
            ids.setdefault(cell, {}).setdefault(task, set()).update(task_ids)
        for task, identities in tally.replicates.items():
            replicates.setdefault(cell, {}).setdefault(task, set()).update(identities)
        for task, tally_counts in tally.per_task.items():
            key = (result.model, result.shots, task)
            total = counts.setdefault(key, [0, 0, 0, 0, 0])
            for i, value in enumerate(tally_counts):
                total[i] += value
            merged = clips.setdefault(key, {})
            for clip, (clip_correct, clip_n) in tally.per_clip[task].items():
                tally_clip = merged.setdefault(clip, [0, 0])
                tally_clip[0] += clip_correct
                tally_clip[1] += clip_n
    rows = []
    for key, (correct, n, unparsed, errors, correct_unparsed) in sorted(counts.items()):
        known = None not in clips[key]
        rows.append(
            SummaryRow(
                *key,
                correct / n,
                n,
                correct,
                unparsed,
                errors,
                len(clips[key]) if known else None,
                cluster_bootstrap(list(clips[key].values()), key) if known else None,
                correct - correct_unparsed,
            )
        )
    cells: dict[tuple[str, int], list[SummaryRow]] = {cell: [] for cell in sorted(unreadable)}
    for row in rows:
        cells[(row.model, row.shots)].append(row)
    coverage = [
        coverage_row(
            *cell,
            cell_rows,
            ids.get(cell, {}),
            unreadable[cell],
            expectations.get(*cell),
            _identities(ids[cell], replicates[cell]) if cell in replicates else None,
        )
        for cell, cell_rows in cells.items()
    ]
    draws = _draw_rows(files, kept_lines, options, rows, set(replicates)) if replicates else []
    return Scoring(
        rows,
        malformed,
        examples,
        tuple(files),
        coverage,
        sum(unreadable.values()),
        draws,
        identity_notes(files) + unknown_task_notes(rows, expectations),
    )


def unknown_task_notes(rows: Iterable[SummaryRow], expectations: Expectations) -> list[str]:
    """One note per task name of the rows that is neither the benchmark's nor its dataset's (a typo, another
    tool's name, a hostile file): scored as a task of its own, so said, with the name it is nearest to."""
    known = set(task_names())
    lines: dict[str, list[SummaryRow]] = {}
    dataset_tasks: dict[tuple[str, int], set[str]] = {}
    for row in rows:
        cell = (row.model, row.shots)
        if cell not in dataset_tasks:
            dataset_tasks[cell] = set(expectations.get(*cell).tasks_of.values())
        if row.task not in known and row.task not in dataset_tasks[cell]:
            lines.setdefault(row.task, []).append(row)
    notes = []
    for task, task_rows in lines.items():
        near = near_name(task, sorted(known))
        cells = ", ".join(f"{row.model} k={row.shots}" for row in task_rows[:3])
        more = f" and {len(task_rows) - 3} more" if len(task_rows) > 3 else ""
        notes.append(
            f"{sum(row.n for row in task_rows)} line(s) of task {task!r} ({cells}{more}), no task of the "
            f"benchmark or its dataset: scored as a task of its own"
            + (f" (did you mean {near}?)" if near is not None else "")
        )
    return notes


def _identities(
    ids: Mapping[str, set[str]], replicates: Mapping[str, set[tuple[str, int, int, int]]]
) -> dict[str, set[tuple[str, int, int, int]]]:
    """Task → the distinct (id, draw, order, variant) of a cell: a line without the fields is (id, 0, 0, 0)."""
    found = {}
    for task, task_ids in ids.items():
        held = replicates.get(task, set())
        with_fields = {identity[0] for identity in held}
        found[task] = held | {(i, *PLAIN) for i in task_ids - with_fields}
    return found


def _lean(line: ScoredLine, shared: dict[object, object]) -> ScoredLine:
    """``line`` without its response and gt texts, its id, query clip and replicate held once for all the
    lines that name them (a sweep's draws repeat each id and clip N times): a few words a line."""
    line.response = line.gt = None
    line.task = shared.setdefault(line.task, line.task)  # type: ignore[assignment]
    line.id = shared.setdefault(line.id, line.id) if isinstance(line.id, str) else line.id
    if line.query_clip is not None:
        line.query_clip = shared.setdefault(line.query_clip, line.query_clip)  # type: ignore[assignment]
    if line.replicate is not None:
        line.replicate = shared.setdefault(line.replicate, line.replicate)  # type: ignore[assignment]
    return line


def _draw_rows(
    files: list[ResultFile],
    kept_lines: list[list[ScoredLine] | None],
    options: ScoreOptions,
    rows: list[SummaryRow],
    cells: set[tuple[str, int]],
) -> list[DrawRow]:
    """The numbers over draws, orders and variants of every task of the cells whose lines hold them, from
    their well-formed lines (read again where not kept, without their response and gt texts: the numbers
    need each line's verdict, identity and query clip alone)."""
    lines: list[ScoredLine] = []
    shared: dict[object, object] = {}
    for result, kept in zip(files, kept_lines, strict=True):
        if (result.model, result.shots) in cells:
            if kept is None:
                kept = (_lean(line, shared) for line in iter_scored_lines(result, options))
            lines.extend(line for line in kept if not line.malformed)
    totals = {(r.model, r.shots, r.task): (r.accuracy, r.n) for r in rows if (r.model, r.shots) in cells}
    return draw_rows(lines, totals)


def detail_path(summary: Path) -> Path:
    """Where the detail CSV goes by default: ``<summary stem>_detail.csv`` next to the summary."""
    return Path(summary).with_name(f"{Path(summary).stem}_detail.csv")


def score_folder(
    root: str | os.PathLike,
    out: str | os.PathLike,
    options: ScoreOptions = ScoreOptions(),
    *,
    detail: Path | None = None,
    models: Iterable[str] | None = None,
    shots: Iterable[int] | None = None,
    keep_examples: bool = False,
    coverage: Path | None = None,
) -> Scoring:
    """Score every result file under ``root``; write the summary CSV to ``out``, the detail CSV and the
    coverage CSV (default: ``<out stem>_detail.csv`` and ``<out stem>_coverage.csv`` beside ``out``) and,
    when some line holds draw/order/variant, the draws CSV ``<out stem>_draws.csv`` (an earlier one beside
    ``out`` is removed when these results hold none: it would describe other results)."""
    root, out = Path(root), Path(out)
    files = find_result_files(root, models=models, shots=shots)
    if not files:
        wanted = " matching the model/shots filters" if models or shots else ""
        raise AudioICLError(
            f"no result files (<model>_results_k<k>.jsonl){wanted} found under this folder", file=str(root)
        )
    scoring = score_files(files, options, keep_examples=keep_examples)
    # the summary last, an earlier one removed first: scoring that fails half-way leaves no summary that looks
    # complete, nor one of other results beside the new companions
    with writing(out):
        Path(out).unlink(missing_ok=True)
    write_detail(detail or detail_path(out), scoring.rows, strict=options.strict)
    write_coverage(coverage or coverage_path(out), scoring.coverage)
    write_provenance(runs_path(out), provenance(files))
    if scoring.draws:
        write_draws(draws_path(out), scoring.draws)
    else:
        with writing(draws_path(out)):
            draws_path(out).unlink(missing_ok=True)
    write_summary(out, scoring.rows)
    return scoring


# --- CSV files and the table ---------------------------------------------------------------------------


def write_summary(path: Path, rows: Iterable[SummaryRow]) -> None:
    """The original's summary CSV: ``model,shots,task,accuracy,n``, csv defaults (CRLF), 6 decimals."""
    path = Path(path)
    with atomic_text(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(SUMMARY_HEADER)
        writer.writerows((r.model, r.shots, r.task, f"{r.accuracy:.6f}", r.n) for r in rows)


def write_detail(path: Path, rows: Iterable[SummaryRow], *, strict: bool = False) -> None:
    """Summary plus correct, unparsed, error lines, 95% Wilson interval (independent episodes), the scoring
    mode (``original``/``strict``), the number of distinct query clips and the 95% cluster-bootstrap interval
    over them (``unknown`` and empty when the lines do not tell their query clips), then format compliance:
    the share of answers the task's rule parsed and the accuracy among them (empty when none parsed)."""
    path = Path(path)
    mode = "strict" if strict else "original"
    with atomic_text(path) as handle:
        writer = csv.writer(handle)
        writer.writerow(DETAIL_HEADER)
        for r in rows:
            low, high = r.interval()
            clusters = (
                ("", "") if r.cluster_interval is None else tuple(f"{v:.6f}" for v in r.cluster_interval)
            )
            compliance = tuple("" if v is None else f"{v:.6f}" for v in (r.parsed_share, r.accuracy_parsed))
            writer.writerow(
                (r.model, r.shots, r.task, f"{r.accuracy:.6f}", r.n, r.correct, r.unparsed, r.errors)
                + (f"{low:.6f}", f"{high:.6f}", mode)
                + (UNKNOWN_CLIPS if r.query_clips is None else r.query_clips, *clusters)
                + compliance
            )


def per_example_path(folder: Path, model: str, shots: int) -> Path:
    return Path(folder) / f"{model}_k{shots}.csv"


def write_per_example(folder: Path, scoring: Scoring, *, keep_text: bool = False) -> list[Path]:
    """One CSV per (model, shots): ``id,task,correct`` (0/1), plus the original's ``gt,pred`` with
    ``keep_text``; rows in file then line order."""
    written = []
    for (model, shots), lines in scoring.examples.items():
        path = per_example_path(folder, model, shots)
        with atomic_text(path) as handle:
            writer = csv.writer(handle)
            writer.writerow(
                ("id", "task", "correct", "gt", "pred") if keep_text else ("id", "task", "correct")
            )
            for s in lines:
                row = [s.id, s.task, int(s.verdict.correct)]
                if keep_text:
                    row += ["" if s.gt is None else s.gt, "" if s.response is None else s.response]
                writer.writerow(row)
        written.append(path)
    return written


def read_summary(path: Path) -> list[SummaryRow]:
    """Rows of a summary CSV (or of a detail CSV, which adds correct, unparsed and, since they were added,
    errors, the query clips, the cluster interval and the accuracy among parsed answers), in file order."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise AudioICLError(f"cannot read summary: {exc.strerror}", file=str(path)) from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(header[:5]) != SUMMARY_HEADER:
            raise AudioICLError(
                f"not a summary CSV: header must start {','.join(SUMMARY_HEADER)}", file=str(path)
            )
        names = (*DETAIL_COUNTS, *DETAIL_CLUSTERS, *DETAIL_COMPLIANCE)
        extra = {name: header.index(name) for name in names if name in header}

        def count(record: list[str], name: str) -> int | None:
            return int(record[extra[name]]) if name in extra else None

        def clips(record: list[str]) -> int | None:
            known = "query_clips" in extra and record[extra["query_clips"]] != UNKNOWN_CLIPS
            return count(record, "query_clips") if known else None

        def cluster(record: list[str]) -> tuple[float, float] | None:
            low, high = (record[extra[name]] if name in extra else "" for name in DETAIL_CLUSTERS[1:])
            return (float(low), float(high)) if low and high else None

        def correct_parsed(record: list[str], n: int, unparsed: int | None) -> int | None:
            """From the accuracy among parsed answers (6 decimals: exact while n < 1,000,000)."""
            if unparsed is None or "accuracy_parsed" not in extra:
                return None
            value = record[extra["accuracy_parsed"]]
            return round(float(value) * (n - unparsed)) if value else 0

        rows = []
        for record in reader:
            if not record:
                continue
            try:
                model, shots, task, accuracy, n = record[:5]
                unparsed = count(record, "unparsed")
                rows.append(
                    SummaryRow(
                        model,
                        int(shots),
                        task,
                        float(accuracy),
                        int(n),
                        count(record, "correct"),
                        unparsed,
                        count(record, "errors"),
                        clips(record),
                        cluster(record),
                        correct_parsed(record, int(n), unparsed),
                    )
                )
            except (ValueError, IndexError):
                raise AudioICLError(
                    f"bad summary row {record!r}", file=str(path), line=reader.line_num
                ) from None
    return rows


def format_table(rows: Iterable[SummaryRow], coverage: Iterable[CoverageRow] | None = None) -> str:
    """A plain-text table: model, k, task, accuracy %, 95% interval, correct/n, unparsed, error lines (the
    episodes of the cell the run could not ask: counted in n, as wrong); with ``coverage``, also (after
    correct/n) the task's episodes present of those selected (``9/10``; blank where the dataset is unknown or
    the task is not in it)."""
    header: tuple[str, ...] = ("model", "k", "task", "acc %", "95% CI", "correct/n", "unparsed", "errors")
    per_task = {(c.model, c.shots): c.per_task for c in coverage or ()}
    if coverage is not None:
        header = (*header[:6], "episodes", *header[6:])
    body = []
    for r in rows:
        low, high = r.interval()
        correct = r.correct if r.correct is not None else round(r.accuracy * r.n)
        body.append(
            (
                r.model,
                str(r.shots),
                r.task or "(no task)",
                f"{100 * r.accuracy:.1f}",
                f"[{100 * low:.1f}, {100 * high:.1f}]",
                f"{correct}/{r.n}",
                "" if r.unparsed is None else str(r.unparsed),
                "" if r.errors is None else str(r.errors),
            )
        )
        if coverage is not None:
            have = per_task.get((r.model, r.shots), {}).get(r.task)
            body[-1] = (*body[-1][:6], "" if have is None else f"{have[0]}/{have[1]}", *body[-1][6:])
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    right = {1, 3, 5, 6, 7, 8}
    lines = [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in (header, *body)
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)
