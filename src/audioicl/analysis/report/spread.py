"""The spread that demonstration draws, demo orders and instruction variants cause (``run --draws/--orders/
--prompt-variants``), one view per task from the draws CSV that ``score`` writes beside the summary.

Each row is one (model, k): the presentations asked, the mean over draws, the standard deviation between
draws, orders and variants, the plurality vote over an episode's presentations (its own number, not the
protocol's), the pooled accuracy with its cluster interval over query clips, and the variance of correctness
split into between-query, between-draw and residual parts.
"""

from __future__ import annotations

from pathlib import Path

from audioicl.scoring.draws import DrawRow, draws_path, read_draws

from .confusion import ViewTable
from .tables import percent

SPREAD_NOTE = (
    "Each episode asked with several demonstration draws (which demos, from its own pool), demo orders and "
    "instruction wordings. mean: the mean over draws; sd: the standard deviation of accuracy between draws, "
    "orders or variants (– where there is one); vote: the plurality answer over an episode's presentations, "
    "scored once per episode (not the protocol's number); pooled: every line, as the summary, with the 95% "
    "cluster bootstrap over query clips; variance: of correctness, between queries / between draws / rest. "
    "A draw spread as large as the gap between two k says the k-curve is within the demos' noise."
)
HEADER = ("model", "k", "asked", "mean", "sd draws", "sd orders", "sd variants", "vote", "pooled", "variance")


def _percent(value: float | None) -> str:
    return "–" if value is None else percent(value)


def _points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} pts"


def _asked(row: DrawRow) -> str:
    counts = ((row.draws, "draw"), (row.orders, "order"), (row.variants, "variant"))
    return " × ".join(f"{count} {name}{'s' if count != 1 else ''}" for count, name in counts)


def _variance(row: DrawRow) -> str:
    parts = (row.between_query_var, row.between_draw_var, row.residual_var)
    if any(part is None for part in parts):
        return "–"
    return " / ".join(f"{part:.3f}" for part in parts) + f" ({row.decomposition_queries} queries)"


def spread_row(row: DrawRow) -> tuple[str, ...]:
    low, high = row.cluster_interval
    return (
        row.model,
        str(row.shots),
        _asked(row),
        _percent(row.mean_accuracy),
        _points(row.draw_sd),
        _points(row.order_sd),
        _points(row.variant_sd),
        _percent(row.vote_accuracy),
        f"{_percent(row.accuracy)} [{_percent(low)}, {_percent(high)}]",
        _variance(row),
    )


def spread_views(summary: Path) -> dict[str, ViewTable]:
    """Task → its spread view, from the draws CSV beside ``summary``; empty when there is none (a run
    without draws, orders or variants)."""
    path = draws_path(summary)
    if not path.is_file():
        return {}
    by_task: dict[str, list[DrawRow]] = {}
    for row in read_draws(path):
        by_task.setdefault(row.task, []).append(row)
    return {
        task: ViewTable(
            "Draws, orders and instruction variants",
            SPREAD_NOTE,
            HEADER,
            tuple(spread_row(row) for row in sorted(rows, key=lambda r: (r.model, r.shots))),
        )
        for task, rows in by_task.items()
    }
