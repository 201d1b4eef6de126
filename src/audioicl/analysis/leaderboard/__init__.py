"""``audioicl leaderboard``: one static page comparing many models, from results folders alone.

Inputs: results folders (``<model>_results_k<k>.jsonl`` and ``<model>_run.json``), scored here with the
original's rules (``scoring.score``); no model is loaded. Outputs in ``out``: ``scores.csv`` (one row per
scored line, ``tidy.TIDY_COLUMNS``), ``scores.parquet`` where pyarrow is importable, and ``index.html``
(self-contained: plots as PNG data URIs, no script, no network), written last after an earlier one was
removed, so a leaderboard that fails half-way leaves no page that looks complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audioicl.files import write_atomic, writing

from .board import CONTROL, FLOOR, KINDS, MODEL, Board, load_board
from .html import LeaderboardPage, Plot, render_page
from .repro import Reproduction, fingerprints, reproductions
from .tables import board_tasks, compliance_rows, draw_spreads, rankings
from .tidy import has_pyarrow, tidy_rows, write_csv, write_parquet

__all__ = ["LeaderboardFiles", "LeaderboardOptions", "write_leaderboard"]

PAGE, CSV, PARQUET = "index.html", "scores.csv", "scores.parquet"


@dataclass(frozen=True)
class LeaderboardOptions:
    results: tuple[Path, ...]
    out: Path
    data: Path | None = None  # the dataset, where a run record lacks its root or fingerprint
    shots: tuple[int, ...] | None = None  # only these k (None: all)


@dataclass(frozen=True)
class LeaderboardFiles:
    html: Path
    csv: Path
    parquet: Path | None  # None: pyarrow is not importable
    rows: int  # scored lines in the tidy table
    entries: dict[str, int]  # kind → how many
    warnings: tuple[str, ...] = ()  # what the page says at its top, for the terminal too


def _plots(board: Board) -> tuple[Plot, tuple[Plot, ...], str]:
    """The overview and one figure per task (the report's), and the interval they draw: the cluster one
    where every cell knows its query clips, else Wilson's."""
    from audioicl.analysis.report.accuracy import FLOOR_MODEL, grid_from_rows
    from audioicl.analysis.report.plots import overview_figure, task_figure  # matplotlib: only here

    interval = "cluster" if all(r.cluster_interval is not None for r in board.rows) else "wilson"
    source = ", ".join(map(str, board.folders))
    grid = grid_from_rows(list(board.rows), source, FLOOR_MODEL, interval, board.coverage.values())
    tasks = tuple(Plot(task or "(no task)", task_figure(grid, task)) for task in grid.tasks)
    return Plot("all tasks", overview_figure(grid)), tasks, grid.interval_label


def _warnings(board: Board, blocks: Sequence[Reproduction]) -> list[str]:
    warnings = []
    found = fingerprints(blocks)
    if len(found) > 1:
        groups = "; ".join(f"{fp[:12]}…: {', '.join(sorted(set(names)))}" for fp, names in found.items())
        warnings.append(
            f"The entries were run over {len(found)} different datasets (by fingerprint: {groups}): their "
            "numbers are not over the same episodes."
        )
    warnings += [f"{note}." for note in board.notes]
    if not board.of_kind(MODEL):
        warnings.append("No model entry: every results name here is a control or a built-in floor or solver.")
    return warnings


def write_leaderboard(options: LeaderboardOptions) -> LeaderboardFiles:
    board = load_board(options.results, options.data, options.shots)
    out = options.out
    with writing(out):
        out.mkdir(parents=True, exist_ok=True)
        (out / PAGE).unlink(missing_ok=True)  # index.html, written last, marks a whole leaderboard
    rows = tidy_rows(board)
    write_csv(out / CSV, rows)
    parquet: Path | None = out / PARQUET
    if has_pyarrow():
        write_parquet(out / PARQUET, rows)
        parquet_note = f"{PARQUET}: the same {len(rows)} rows as {CSV}, in Parquet."
    else:
        with writing(out / PARQUET):
            (out / PARQUET).unlink(missing_ok=True)  # not left from an earlier run, out of step with the CSV
        parquet, parquet_note = (
            None,
            f"{PARQUET} not written: pyarrow is not importable (the datasets extra).",
        )
    overview, task_plots, interval = _plots(board)
    blocks = [
        block
        for kind in KINDS
        for e in sorted(board.of_kind(kind), key=lambda e: e.name)
        for block in reproductions(e, options.data)
    ]
    tasks = board_tasks(board)
    page = LeaderboardPage(
        folders=tuple(map(str, options.results)),
        rankings=tuple(rankings(board)),
        overview=overview,
        task_plots=task_plots,
        interval_label=interval,
        compliance=tuple(compliance_rows(board, tasks)),
        tasks=tasks,
        spreads=tuple(draw_spreads(board)),
        reproductions=tuple(blocks),
        warnings=tuple(_warnings(board, blocks)),
        footer=(
            f"{CSV}: one row per scored line ({len(rows)} rows), columns in docs/leaderboard.md.",
            parquet_note,
        ),
    )
    html = out / PAGE
    write_atomic(html, render_page(page))
    counts = {kind: len(board.of_kind(kind)) for kind in (MODEL, CONTROL, FLOOR)}
    return LeaderboardFiles(html, out / CSV, parquet, len(rows), counts, page.warnings)
