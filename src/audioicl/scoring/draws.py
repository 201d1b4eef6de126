"""Numbers over demo draws, demo orders and prompt variants (``audioicl run --draws/--orders/--prompt-variants``).

Such a run asks every episode several times, and each result line carries its ``draw``, ``order`` and
``variant`` (0 where absent), so one id appears once per (draw, order, variant): its identity. Per (model, k,
task), from the lines:

- ``mean_accuracy``: the mean over draws of the per-draw accuracy (each draw: every line of that draw);
- ``draw_sd``, ``order_sd``, ``variant_sd``: the sample SD (n − 1) of the per-draw, per-order and per-variant
  accuracies (empty with fewer than two): how much the number depends on which demos, which demo order, which
  wording a single run happened to get;
- ``between_query_var``, ``between_draw_var``, ``residual_var``: the two-way random-effects split (one value
  per cell, balanced: ANOVA estimators, negative ones set to 0) of the query × draw correctness matrix (a
  cell: the mean over that query's orders and variants at that draw), over the queries that have every draw;
- ``vote_accuracy``: each query answered by the plurality of its lines' parsed answers (an unparsed answer is
  one more answer, a wrong one); a tie between t answers counts as the share of them that is right (the
  expected score of a uniform tie-break); ``vote_ties``: the queries whose plurality was tied;
- ``cluster_ci_low/high``: the cluster bootstrap (``stats.cluster_bootstrap``) with every line of one query
  clip in one cluster (by episode id when the lines do not name their clips: every draw asks the same query).

A second line of the same identity is a duplicate: the first one counts, the others are counted in
``duplicate_lines`` (and in the coverage's ``extra_lines``), as the plain scoring flags a repeated id.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audioicl.errors import AudioICLError
from audioicl.files import atomic_text

from .lines import ScoredLine
from .stats import cluster_bootstrap

DRAWS_HEADER = (
    "model",
    "shots",
    "task",
    "draws",
    "orders",
    "variants",
    "n_queries",
    "mean_accuracy",
    "draw_sd",
    "between_query_var",
    "between_draw_var",
    "vote_accuracy",
    "variant_sd",
    "cluster_ci_low",
    "cluster_ci_high",
    # beyond the columns every reader needs
    "accuracy",
    "n",
    "order_sd",
    "residual_var",
    "decomposition_queries",
    "vote_ties",
    "duplicate_lines",
    "clustered_by",
)
BY_CLIP, BY_ID = "query_clip", "id"
Cell = tuple[str, int, str]  # (model, shots, task)


@dataclass(frozen=True)
class VarianceSplit:
    """Variance components of a query × draw matrix: between queries, between draws, and the rest
    (query × draw interaction and noise), over ``queries`` queries."""

    between_query: float
    between_draw: float
    residual: float
    queries: int


@dataclass(frozen=True)
class Vote:
    accuracy: float
    ties: int


@dataclass(frozen=True)
class DrawRow:
    """The numbers over draws of one (model, shots, task); None: not defined (a single draw, order or
    variant; fewer than two queries with every draw). ``accuracy`` and ``n``: the summary's, over all lines."""

    model: str
    shots: int
    task: str
    draws: int
    orders: int
    variants: int
    n_queries: int
    mean_accuracy: float
    draw_sd: float | None
    between_query_var: float | None
    between_draw_var: float | None
    vote_accuracy: float
    variant_sd: float | None
    cluster_interval: tuple[float, float]
    accuracy: float
    n: int
    order_sd: float | None
    residual_var: float | None
    decomposition_queries: int
    vote_ties: int
    duplicate_lines: int
    clustered_by: str


# --- the numbers -----------------------------------------------------------------------------------------


def sample_sd(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n − 1); None for fewer than two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def group_accuracy(lines: Iterable[ScoredLine], part: int) -> dict[int, float]:
    """Accuracy per value of one part of the identity (0: draw, 1: order, 2: variant), in value order."""
    tallies: dict[int, list[int]] = {}
    for line in lines:
        tally = tallies.setdefault(line.identity[1 + part], [0, 0])
        tally[0] += line.verdict.correct
        tally[1] += 1
    return {value: right / n for value, (right, n) in sorted(tallies.items())}


def variance_split(matrix: np.ndarray) -> VarianceSplit | None:
    """Two-way random-effects split of a queries × draws matrix (one value per cell): σ²_query =
    (MS_q − MS_e)/draws, σ²_draw = (MS_d − MS_e)/queries, σ²_residual = MS_e, negatives set to 0. None below
    two queries or two draws."""
    queries, draws = matrix.shape
    if queries < 2 or draws < 2:
        return None
    grand = matrix.mean()
    rows, columns = matrix.mean(axis=1), matrix.mean(axis=0)
    ms_query = draws * float(((rows - grand) ** 2).sum()) / (queries - 1)
    ms_draw = queries * float(((columns - grand) ** 2).sum()) / (draws - 1)
    residual = matrix - rows[:, None] - columns[None, :] + grand
    ms_error = float((residual**2).sum()) / ((queries - 1) * (draws - 1))
    return VarianceSplit(
        max(0.0, (ms_query - ms_error) / draws), max(0.0, (ms_draw - ms_error) / queries), ms_error, queries
    )


def draw_matrix(lines: Iterable[ScoredLine]) -> np.ndarray:
    """Queries × draws: the mean correctness of a query's lines at a draw (over its orders and variants),
    for the queries that have every draw the lines hold, in id order."""
    cells: dict[str, dict[int, list[int]]] = {}
    for line in lines:
        tally = cells.setdefault(line.identity[0], {}).setdefault(line.identity[1], [0, 0])
        tally[0] += line.verdict.correct
        tally[1] += 1
    draws = sorted({draw for per_draw in cells.values() for draw in per_draw})
    full = [query for query in sorted(cells) if len(cells[query]) == len(draws)]
    return np.array([[cells[q][d][0] / cells[q][d][1] for d in draws] for q in full], dtype=float).reshape(
        len(full), len(draws)
    )


def vote(lines: Iterable[ScoredLine]) -> Vote:
    """Accuracy of each query's plurality answer over its lines (see the module docstring for ties)."""
    answers: dict[str, dict[tuple[object, bool], int]] = {}
    for line in lines:
        key = (_hashable(line.verdict.prediction), line.verdict.correct)
        per_query = answers.setdefault(line.identity[0], {})
        per_query[key] = per_query.get(key, 0) + 1
    score, ties = 0.0, 0
    for per_query in answers.values():
        top = max(per_query.values())
        winners = [correct for (_, correct), count in per_query.items() if count == top]
        score += sum(winners) / len(winners)
        ties += len(winners) > 1
    return Vote(score / len(answers) if answers else 0.0, ties)


def _hashable(prediction: object) -> object:
    try:
        hash(prediction)
    except TypeError:
        return repr(prediction)
    return prediction


def unique_lines(lines: Sequence[ScoredLine]) -> tuple[list[ScoredLine], int]:
    """The first line of each identity, and how many later lines repeated one."""
    first: dict[tuple[str, int, int, int], ScoredLine] = {}
    for line in lines:
        first.setdefault(line.identity, line)
    return list(first.values()), len(lines) - len(first)


def _clusters(lines: Sequence[ScoredLine]) -> tuple[list[list[int]], str]:
    """[correct, n] per query clip (per episode id when a line's clip is unknown), and which it was."""
    by_clip = all(line.query_clip is not None for line in lines)
    tallies: dict[object, list[int]] = {}
    for line in lines:
        tally = tallies.setdefault(line.query_clip if by_clip else line.identity[0], [0, 0])
        tally[0] += line.verdict.correct
        tally[1] += 1
    return list(tallies.values()), BY_CLIP if by_clip else BY_ID


def draw_row(key: Cell, accuracy: float, n: int, lines: list[ScoredLine]) -> DrawRow:
    """The numbers over draws of one cell (``accuracy`` and ``n``: the summary's), from its well-formed
    lines."""
    kept, duplicates = unique_lines(lines)
    per_draw = group_accuracy(kept, 0)
    per_order = group_accuracy(kept, 1)
    per_variant = group_accuracy(kept, 2)
    split = variance_split(draw_matrix(kept))
    voted = vote(kept)
    clusters, clustered_by = _clusters(kept)
    return DrawRow(
        *key,
        draws=len(per_draw),
        orders=len(per_order),
        variants=len(per_variant),
        n_queries=len({line.identity[0] for line in kept}),
        mean_accuracy=statistics.fmean(per_draw.values()),
        draw_sd=sample_sd(list(per_draw.values())),
        between_query_var=None if split is None else split.between_query,
        between_draw_var=None if split is None else split.between_draw,
        vote_accuracy=voted.accuracy,
        variant_sd=sample_sd(list(per_variant.values())),
        cluster_interval=cluster_bootstrap(clusters, ("draws", *key)),
        accuracy=accuracy,
        n=n,
        order_sd=sample_sd(list(per_order.values())),
        residual_var=None if split is None else split.residual,
        decomposition_queries=0 if split is None else split.queries,
        vote_ties=voted.ties,
        duplicate_lines=duplicates,
        clustered_by=clustered_by,
    )


def draw_rows(lines: Iterable[ScoredLine], totals: Mapping[Cell, tuple[float, int]]) -> list[DrawRow]:
    """One row per cell of ``totals`` (cell → the summary's accuracy and n), in its order, from the cells'
    well-formed lines (a cell of only malformed lines has none: it is in the summary alone)."""
    grouped: dict[Cell, list[ScoredLine]] = {}
    for line in lines:
        grouped.setdefault((line.model, line.shots, line.task), []).append(line)
    return [draw_row(key, *total, grouped[key]) for key, total in totals.items() if key in grouped]


# --- the CSV ---------------------------------------------------------------------------------------------


def draws_path(summary: Path) -> Path:
    """Where the draws CSV goes: ``<summary stem>_draws.csv`` next to the summary."""
    return Path(summary).with_name(f"{Path(summary).stem}_draws.csv")


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def write_draws(path: Path, rows: Iterable[DrawRow]) -> None:
    """One row per (model, shots, task), summary order, csv defaults (CRLF), 6 decimals, empty: undefined."""
    with atomic_text(Path(path)) as handle:
        writer = csv.writer(handle)
        writer.writerow(DRAWS_HEADER)
        for r in rows:
            writer.writerow(
                (r.model, r.shots, r.task, r.draws, r.orders, r.variants, r.n_queries)
                + tuple(
                    _number(v)
                    for v in (
                        r.mean_accuracy,
                        r.draw_sd,
                        r.between_query_var,
                        r.between_draw_var,
                        r.vote_accuracy,
                        r.variant_sd,
                        *r.cluster_interval,
                        r.accuracy,
                    )
                )
                + (r.n, _number(r.order_sd), _number(r.residual_var), r.decomposition_queries)
                + (r.vote_ties, r.duplicate_lines, r.clustered_by)
            )


def read_draws(path: Path) -> list[DrawRow]:
    """The rows of a draws CSV (columns found by name); errors name the file and line."""
    path = Path(path)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise AudioICLError(f"cannot read draws CSV: {exc.strerror}", file=str(path)) from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [name for name in DRAWS_HEADER if name not in (reader.fieldnames or ())]
        if missing:
            raise AudioICLError(f"not a draws CSV: no column {', '.join(missing)}", file=str(path), line=1)
        rows = []
        for record in reader:
            try:
                rows.append(_draw_row_from(record))
            except (ValueError, TypeError):
                raise AudioICLError(
                    f"bad draws row {list(record.values())!r}", file=str(path), line=reader.line_num
                ) from None
    return rows


def _draw_row_from(record: Mapping[str, str]) -> DrawRow:
    def optional(name: str) -> float | None:
        return float(record[name]) if record[name] != "" else None

    return DrawRow(
        record["model"],
        int(record["shots"]),
        record["task"],
        draws=int(record["draws"]),
        orders=int(record["orders"]),
        variants=int(record["variants"]),
        n_queries=int(record["n_queries"]),
        mean_accuracy=float(record["mean_accuracy"]),
        draw_sd=optional("draw_sd"),
        between_query_var=optional("between_query_var"),
        between_draw_var=optional("between_draw_var"),
        vote_accuracy=float(record["vote_accuracy"]),
        variant_sd=optional("variant_sd"),
        cluster_interval=(float(record["cluster_ci_low"]), float(record["cluster_ci_high"])),
        accuracy=float(record["accuracy"]),
        n=int(record["n"]),
        order_sd=optional("order_sd"),
        residual_var=optional("residual_var"),
        decomposition_queries=int(record["decomposition_queries"]),
        vote_ties=int(record["vote_ties"]),
        duplicate_lines=int(record["duplicate_lines"]),
        clustered_by=record["clustered_by"],
    )
