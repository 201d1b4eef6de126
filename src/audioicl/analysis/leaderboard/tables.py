"""The leaderboard's numbers: the ranking (mean accuracy over complete tasks per k and overall, with cluster
intervals, coverage stated), format compliance, and the spread over draws.

The grid every entry is held against is the board's tasks (every task of the datasets the results were run
over) × the k its section has (models, controls and floors each their own). A mean is over the cells that
are complete (``scoring.coverage``: every episode the runs selected has a line) and says how many of the
grid's cells those are and why the others are not; only an entry whose every cell is complete over the
whole dataset is ranked, the others are listed below the ranked ones, unranked, with what they lack.

The interval of a mean is a cluster bootstrap: each task's query clips (episode ids where the lines do not
name their clips) drawn with replacement, the same draw for every k of the task, since a nested episode asks
the same query clip at every k; the tasks are strata, each weighs the same in the mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from audioicl.scoring.coverage import UNCHECKED, CoverageRow, describe_gaps
from audioicl.scoring.draws import group_accuracy, sample_sd, unique_lines
from audioicl.scoring.score import ScoredLine, SummaryRow
from audioicl.scoring.stats import BOOTSTRAP_DRAWS
from audioicl.seeding import rng_for
from audioicl.tasks.chance import order_tasks

from .board import KINDS, Board, Entry

Tallies = Mapping[str, tuple[int, int]]  # cluster (query clip) → (correct, n)


# --------------------------------------------------------------------------- the grid


def board_tasks(board: Board) -> tuple[str, ...]:
    """Every task of the datasets behind the board (for a (model, k) whose dataset is unknown: the tasks it
    has and those of the benchmark it lacks), in benchmark order."""
    names: set[str] = set()
    for cov in board.coverage.values():
        if cov.status == UNCHECKED:
            names.update(r.task for r in board.rows if (r.model, r.shots) == (cov.model, cov.shots))
            names.update(cov.missing_tasks)
        else:
            names.update(cov.per_task)
    return order_tasks(names)


def section_shots(board: Board, entries: Iterable[Entry]) -> tuple[int, ...]:
    """The k any entry of a section has."""
    return tuple(sorted({k for entry in entries for k in board.shots(entry.name)}))


def usable_tasks(board: Board, cov: CoverageRow) -> tuple[str, ...]:
    """The tasks a mean of this (model, k) may average: its complete ones (unchecked coverage: those present)."""
    over = cov.mean_over
    if over is not None:
        return over
    return tuple(r.task for r in board.rows if (r.model, r.shots) == (cov.model, cov.shots))


def clusters(lines: Iterable[ScoredLine], task: str) -> dict[str, tuple[int, int]]:
    """A task's lines tallied per query clip (the episode id where the line does not name its clip)."""
    tally: dict[str, list[int]] = {}
    for scored in lines:
        if scored.task != task:
            continue
        key = scored.query_clip if scored.query_clip is not None else f"episode {scored.id}"
        counts = tally.setdefault(key, [0, 0])
        counts[0] += scored.verdict.correct
        counts[1] += 1
    return {key: (correct, n) for key, (correct, n) in tally.items()}


def mean_interval(
    cells: Mapping[tuple[str, int], Tallies], name: Sequence[object], draws: int = BOOTSTRAP_DRAWS
) -> tuple[float, float] | None:
    """95% percentile interval of the unweighted mean over ``cells`` ((task, k) → clip → (correct, n)) under
    the stratified cluster bootstrap of the module docstring; seeded by ``name``. A draw in which a cell
    gets no line (a clip that is only at other k) is left out."""
    if not cells:
        return None
    rng = rng_for(0, "leaderboard-mean", *name)
    total = np.zeros(draws)
    for task in sorted({task for task, _ in cells}):
        ks = sorted(k for t, k in cells if t == task)
        names = sorted({clip for k in ks for clip in cells[(task, k)]})
        weights = rng.multinomial(len(names), np.full(len(names), 1 / len(names)), size=draws)
        for k in ks:
            tallies = np.array([cells[(task, k)].get(clip, (0, 0)) for clip in names], dtype=float)
            with np.errstate(invalid="ignore", divide="ignore"):
                total += (weights @ tallies[:, 0]) / (weights @ tallies[:, 1])
    means = total / len(cells)
    if np.isnan(means).all():
        return None
    low, high = np.nanquantile(means, [0.025, 0.975])
    return float(low), float(high)


# --------------------------------------------------------------------------- the ranking


@dataclass(frozen=True)
class Mean:
    """The mean accuracy over ``cells`` (task, k) of the ``of`` the grid holds, its 95% interval, and why
    the mean is not over the whole grid (``gaps``, one phrase each; none when it is)."""

    accuracy: float | None
    interval: tuple[float, float] | None
    cells: int
    of: int
    gaps: tuple[str, ...] = ()
    lines: int = 0  # the scored lines of those cells (n)

    @property
    def complete(self) -> bool:
        return self.accuracy is not None and self.cells == self.of and not self.gaps


@dataclass(frozen=True)
class Standing:
    entry: Entry
    rank: int | None  # None: not ranked (its coverage is not the whole grid)
    per_k: Mapping[int, Mean]
    overall: Mean


@dataclass(frozen=True)
class Ranking:
    """One section of the ranking table (``kind``): its k, the tasks, its entries ranked first."""

    kind: str
    shots: tuple[int, ...]
    tasks: tuple[str, ...]
    standings: tuple[Standing, ...]


def _cell_gaps(cov: CoverageRow, tasks: Sequence[str]) -> list[str]:
    """What keeps one (model, k) from the whole grid: its coverage's gaps, and tasks its dataset lacks."""
    gaps = describe_gaps(cov)
    if cov.status != UNCHECKED:
        absent = [task for task in tasks if task not in cov.per_task]
        if absent:
            gaps.append(f"not in its dataset: {', '.join(absent)}")
    return gaps


def _mean(
    board: Board, entry: Entry, shots: Sequence[int], tasks: Sequence[str], name: Sequence[object]
) -> Mean:
    cells: dict[tuple[str, int], Tallies] = {}
    accuracies: list[float] = []
    gaps: list[str] = []
    lines_scored = 0
    for k in shots:
        cov = board.coverage.get((entry.name, k))
        prefix = f"k={k}: " if len(shots) > 1 else ""
        if cov is None:
            gaps.append(f"k={k} absent")
            continue
        gaps += [prefix + gap for gap in _cell_gaps(cov, tasks)]
        lines = board.lines.get((entry.name, k), ())
        for task in usable_tasks(board, cov):
            row = board.row(entry.name, k, task)
            if task in tasks and row is not None:
                accuracies.append(row.accuracy)
                lines_scored += row.n
                cells[(task, k)] = clusters(lines, task)
    accuracy = sum(accuracies) / len(accuracies) if accuracies else None
    return Mean(
        accuracy, mean_interval(cells, name), len(cells), len(tasks) * len(shots), tuple(gaps), lines_scored
    )


def rank_section(board: Board, kind: str, tasks: Sequence[str]) -> Ranking:
    """The entries of ``kind``: the completely covered ones ranked by overall mean (ties by name), then the
    others, unranked, by their mean over what they have."""
    entries = sorted((e for e in board.entries.values() if e.kind == kind), key=lambda e: e.name)
    shots = section_shots(board, entries)
    means = {
        e.name: (
            {k: _mean(board, e, (k,), tasks, (e.name, k)) for k in shots},
            _mean(board, e, shots, tasks, (e.name, "overall")),
        )
        for e in entries
    }

    def order(entry: Entry) -> tuple[bool, float, str]:
        overall = means[entry.name][1]
        value = overall.accuracy if overall.accuracy is not None else -1.0
        return (not overall.complete, -value, entry.name)

    standings = []
    rank = 0
    for entry in sorted(entries, key=order):
        per_k, overall = means[entry.name]
        rank += overall.complete
        standings.append(Standing(entry, rank if overall.complete else None, per_k, overall))
    return Ranking(kind, shots, tuple(tasks), tuple(standings))


def rankings(board: Board) -> list[Ranking]:
    """The sections that have entries, in ``KINDS`` order."""
    tasks = board_tasks(board)
    return [rank_section(board, kind, tasks) for kind in KINDS if board.of_kind(kind)]


# --------------------------------------------------------------------------- format compliance


@dataclass(frozen=True)
class Compliance:
    """Of ``n`` lines, ``parsed`` held an answer the task's rule can read (error lines, never asked, are
    unparsed as in the scorer), ``correct`` of those parsed were right: the summary rows' ``parsed_share`` and
    ``accuracy_parsed`` pooled over the rows (None where the rows do not say)."""

    n: int
    parsed: int | None
    correct: int | None

    @property
    def parsed_share(self) -> float | None:
        return None if self.parsed is None or not self.n else self.parsed / self.n

    @property
    def accuracy_parsed(self) -> float | None:
        return None if self.correct is None or not self.parsed else self.correct / self.parsed


def pooled(rows: Iterable[SummaryRow]) -> Compliance:
    rows = list(rows)
    n = sum(r.n for r in rows)
    if any(r.unparsed is None for r in rows):
        return Compliance(n, None, None)
    parsed = sum(r.n - (r.unparsed or 0) for r in rows)
    known = all(r.correct_parsed is not None for r in rows)
    return Compliance(n, parsed, sum(r.correct_parsed or 0 for r in rows) if known else None)


@dataclass(frozen=True)
class ComplianceRow:
    entry: Entry
    overall: Compliance
    per_task: Mapping[str, Compliance]


def compliance_rows(board: Board, tasks: Sequence[str]) -> list[ComplianceRow]:
    """Per entry (in ``KINDS`` then name order), over all its k: overall and per task."""
    found = []
    for kind in KINDS:
        for entry in sorted(board.of_kind(kind), key=lambda e: e.name):
            rows = [r for r in board.rows if r.model == entry.name]
            per_task = {task: pooled(r for r in rows if r.task == task) for task in tasks}
            found.append(ComplianceRow(entry, pooled(rows), per_task))
    return found


# --------------------------------------------------------------------------- spread over draws

PARTS = ("draw", "order", "variant")  # the parts of a line's identity, in ``ScoredLine.identity`` order


@dataclass(frozen=True)
class PartSpread:
    """The mean over tasks of each value of one part (draw, order or variant) alone: how much the number
    depends on which demos, which demo order, which wording a single run happened to get."""

    part: str
    means: Mapping[int, float]  # value → mean over the tasks that have it

    @property
    def sd(self) -> float | None:
        return sample_sd(list(self.means.values()))


@dataclass(frozen=True)
class DrawSpread:
    """One (entry, k) whose lines hold several draws, orders or variants: the spread of its mean over tasks
    per part that varies, and the task whose accuracy moves most over draws (largest ``draw_sd``)."""

    entry: Entry
    k: int
    tasks: int  # the tasks the (entry, k) mean averages
    parts: tuple[PartSpread, ...]
    vote_accuracy: float  # the mean over tasks of the plurality answer's accuracy (scoring.draws)
    widest: tuple[str, float] | None  # (task, draw_sd)


def part_spread(lines: Sequence[ScoredLine], tasks: Sequence[str], part: int) -> PartSpread:
    per_task = [group_accuracy([s for s in lines if s.task == task], part) for task in tasks]
    values = sorted({value for accuracies in per_task for value in accuracies})
    means = {
        value: sum(held) / len(held)
        for value in values
        if (held := [accuracies[value] for accuracies in per_task if value in accuracies])
    }
    return PartSpread(PARTS[part], means)


def draw_spread(board: Board, entry: Entry, k: int) -> DrawSpread | None:
    """None when the (entry, k) has no numbers over draws (its lines are all one draw, order and variant)."""
    cov = board.coverage.get((entry.name, k))
    tasks = [t for t in usable_tasks(board, cov) if (entry.name, k, t) in board.draws] if cov else []
    if not tasks:
        return None
    rows = [board.draws[(entry.name, k, task)] for task in tasks]
    lines, _ = unique_lines(board.lines.get((entry.name, k), ()))
    counts = {0: max(r.draws for r in rows), 1: max(r.orders for r in rows), 2: max(r.variants for r in rows)}
    parts = tuple(part_spread(lines, tasks, part) for part, count in counts.items() if count > 1)
    if not parts:
        return None
    spread = [(r.task, r.draw_sd) for r in rows if r.draw_sd is not None]
    widest = max(spread, key=lambda item: (item[1], item[0]), default=None)
    vote = sum(r.vote_accuracy for r in rows) / len(rows)
    return DrawSpread(entry, k, len(tasks), parts, vote, widest)


def draw_spreads(board: Board) -> list[DrawSpread]:
    spreads = []
    for kind in KINDS:
        for entry in sorted(board.of_kind(kind), key=lambda e: e.name):
            spreads += [s for k in board.shots(entry.name) if (s := draw_spread(board, entry, k)) is not None]
    return spreads
