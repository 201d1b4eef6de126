"""Accuracy-vs-shots figures as PNG bytes: one per task, and an overview grid with the mean over tasks.

Error bars are the grid's interval (Wilson by default); the faint band around a line is the cluster
bootstrap's 95% interval over query clips where the detail CSV holds it (else the same interval as the bars),
and the legend says which. A point the coverage marks (a task cell with episodes missing, a mean over tasks that is not complete) is
drawn hollow, and the panel's title says what hollow means.

Figures are built on ``matplotlib.figure.Figure`` with the Agg canvas, so no pyplot state or display is used;
their texts (task, model and condition names) are drawn as written, never as mathtext (``literal_text``).
"""

from __future__ import annotations

import functools
import io
import math
import textwrap
from collections.abc import Callable
from dataclasses import replace
from typing import ParamSpec, TypeVar

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import PercentFormatter

from audioicl.tasks.chance import Chance, chance_level, mean_chance

from .accuracy import FLOOR_MODEL, AccuracyGrid
from .tables import format_chance

PANEL_COLUMNS = 4
_Args, _Made = ParamSpec("_Args"), TypeVar("_Made")


def literal_text(build: Callable[_Args, _Made]) -> Callable[_Args, _Made]:
    """A figure builder whose texts are drawn as written: a name with ``$`` is neither math nor a parse error
    of matplotlib's mathtext that fails the report (each text keeps the setting it was made under)."""

    @functools.wraps(build)
    def built(*args: _Args.args, **kwargs: _Args.kwargs) -> _Made:
        with matplotlib.rc_context({"text.parse_math": False}):
            return build(*args, **kwargs)

    return built


MEAN_PANEL = "mean over tasks"


def model_colors(models: tuple[str, ...]) -> dict[str, str]:
    """The same colour for a model in every figure."""
    return {model: f"C{i % 10}" for i, model in enumerate(models)}


def dodge(index: int, count: int, step: float = 0.06) -> float:
    """A small x offset per model, so equal accuracies do not hide each other's line and bars."""
    return (index - (count - 1) / 2) * step


FLOOR_STYLE = {"color": "0.2", "linestyle": ":", "marker": "x", "linewidth": 1.5}
FLOOR_LABEL = "text-only floor"


CLUSTER_BAND = "band: 95% cluster bootstrap over query clips"


def _draw_task(ax: Axes, grid: AccuracyGrid, task: str, colors: dict[str, str]) -> None:
    """One line per model with error bars (the grid's interval) and a faint band: the cluster interval where
    every cell of the task has one, else the bars' interval; the floor apart."""
    clustered = grid.clustered(task)
    for index, model in enumerate(grid.lines):
        points = [(k, c) for k in grid.shots if (c := grid.cell(model, k, task)) is not None]
        if not points:
            continue
        xs = [k + dodge(index, len(grid.lines)) for k, _ in points]
        ys = [c.accuracy for _, c in points]
        lows = [c.low for _, c in points]
        highs = [c.high for _, c in points]
        errors = [  # at 0 % or 100 % Wilson's bound can miss the point by a rounding error
            [max(0.0, y - low) for y, low in zip(ys, lows, strict=True)],
            [max(0.0, h - y) for y, h in zip(ys, highs, strict=True)],
        ]
        ax.errorbar(xs, ys, yerr=errors, color=colors[model], marker="o", capsize=3, label=model)
        if clustered:
            lows = [c.cluster[0] for _, c in points if c.cluster is not None]
            highs = [c.cluster[1] for _, c in points if c.cluster is not None]
        ax.fill_between(xs, lows, highs, color=colors[model], alpha=0.12, linewidth=0)
        partial = [(x, y) for x, y, (_, c) in zip(xs, ys, points, strict=True) if c.partial is not None]
        if partial:
            _hollow(ax, partial, colors[model])
    if grid.floor is not None:
        points = [(k, c.accuracy) for k in grid.shots if (c := grid.cell(grid.floor, k, task)) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), **FLOOR_STYLE, label=FLOOR_LABEL)


def _hollow(ax: Axes, points: list[tuple[float, float]], color: str) -> None:
    ax.plot(
        *zip(*points, strict=True),
        linestyle="none",
        marker="o",
        markerfacecolor="white",
        markeredgecolor=color,
        zorder=4,
    )


def _draw_mean(ax: Axes, grid: AccuracyGrid, colors: dict[str, str]) -> bool:
    """The mean over tasks per model (over complete tasks, with coverage); True if some point is hollow (a
    mean that is not complete)."""
    marked = False
    for index, model in enumerate(grid.lines):
        offset = dodge(index, len(grid.lines))
        means = [(k + offset, m) for k in grid.shots if (m := grid.mean(model, k)) is not None]
        points = [(x, m.accuracy) for x, m in means]
        if points:
            ax.plot(*zip(*points, strict=True), color=colors[model], marker="o", label=model)
        short = [(x, m.accuracy) for x, m in means if not m.complete]
        if short:
            _hollow(ax, short, colors[model])
            marked = True
    if grid.floor is not None:
        points = [(k, m.accuracy) for k in grid.shots if (m := grid.mean(grid.floor, k)) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), **FLOOR_STYLE, label=FLOOR_LABEL)
    return marked


def _draw_chance(ax: Axes, chance: Chance) -> None:
    if chance.value is not None:
        ax.axhline(
            chance.value, color="0.35", linestyle="--", linewidth=1, label=f"chance {format_chance(chance)}"
        )


def _style(ax: Axes, grid: AccuracyGrid, title: str) -> None:
    ax.set_title(title or "(no task)")
    ax.set_xticks(list(grid.shots))
    ax.set_xlim(min(grid.shots) - 0.3, max(grid.shots) + 0.3)
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
    ax.grid(True, alpha=0.3)


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def task_figure(grid: AccuracyGrid, task: str) -> bytes:
    return _png(task_plot(grid, task))


@literal_text
def task_plot(grid: AccuracyGrid, task: str) -> Figure:
    """One task's accuracy against k (``task_figure`` is its PNG)."""
    chance = chance_level(task)
    fig = Figure(figsize=(6.4, 4.2), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    _draw_task(ax, grid, task, model_colors(grid.models))
    _draw_chance(ax, chance)
    _style(ax, grid, task)
    ax.set_xlabel("shots (k)")
    # wrapped: the cluster interval's label is longer than the axis is high, and would be cut off at both ends
    ax.set_ylabel("\n".join(textwrap.wrap(f"accuracy (bars: {grid.interval_label})", 48)), fontsize="small")
    handles, names = ax.get_legend_handles_labels()
    if grid.clustered(task):
        handles.append(Patch(color="0.5", alpha=0.3, linewidth=0))
        names.append(CLUSTER_BAND)
    ax.legend(handles, names, loc="best", fontsize="small")
    floor = "; dotted: text-only floor (the prompt without its audio)" if grid.floor else ""
    partial = any(c.partial for (_, _, t), c in grid.cells.items() if t == task)
    hollow = "; hollow: episodes missing (partial)" if partial else ""
    fig.supxlabel(f"dashed: chance level ({chance.note}){floor}{hollow}", fontsize="x-small", color="0.35")
    return fig


@literal_text
def overview_figure(grid: AccuracyGrid) -> bytes:
    """All tasks in a grid of panels, the last panel the unweighted mean over tasks; one shared legend."""
    panels = [*grid.tasks, MEAN_PANEL]
    columns = min(PANEL_COLUMNS, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(3.2 * columns, 2.6 * rows + 0.6), dpi=100, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    colors = model_colors(grid.models)
    for ax, panel in zip(axes, panels, strict=False):
        if panel == MEAN_PANEL:
            marked = _draw_mean(ax, grid, colors)
            _draw_chance(ax, mean_chance(grid.tasks))
            _style(ax, grid, f"{panel}\n(hollow: not complete)" if marked else panel)
            continue
        _draw_task(ax, grid, panel, colors)
        _draw_chance(ax, chance_level(panel))
        _style(ax, grid, panel)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    for index, ax in enumerate(axes[: len(panels)]):
        if index + columns >= len(panels):  # nothing below it
            ax.set_xlabel("shots (k)")
    handles = [Line2D([], [], color=colors[model], marker="o") for model in grid.lines]
    names = list(grid.lines)
    if grid.floor is not None:
        handles.append(Line2D([], [], **FLOOR_STYLE))
        names.append(FLOOR_LABEL if grid.floor == FLOOR_MODEL else f"{FLOOR_LABEL} ({grid.floor})")
    fig.legend(
        handles,
        names,
        loc="outside lower center",
        ncols=min(len(handles), 4),
        title=f"models (bars: {grid.interval_label}; "
        + (f"{CLUSTER_BAND}; " if grid.clustered() else "")
        + "dashed: chance level; dotted: text-only floor)",
    )
    return _png(fig)


def condition_figure(grid: AccuracyGrid, reference: str) -> bytes:
    return _png(condition_plot(grid, reference))


@literal_text
def condition_plot(grid: AccuracyGrid, reference: str) -> Figure:
    """Small multiples for a study: a panel per condition (``grid.lines``), each its mean over tasks against
    k beside ``reference`` (the plain run, grey) and the floor, so that no panel draws more than three lines
    however many conditions there are."""
    panels = [reference, *(line for line in grid.lines if line != reference)]
    columns = min(PANEL_COLUMNS, len(panels))
    rows = math.ceil(len(panels) / columns)
    fig = Figure(figsize=(3.2 * columns, 2.4 * rows + 0.5), dpi=100, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False, sharey=True).ravel()
    colors = model_colors(grid.models)
    marked = False
    for ax, panel in zip(axes, panels, strict=False):
        if panel != reference:
            points = [(k, m.accuracy) for k in grid.shots if (m := grid.mean(reference, k)) is not None]
            if points:
                ax.plot(*zip(*points, strict=True), color="0.6", linewidth=1.2, marker=".")
        marked |= _draw_mean(
            ax, replace(grid, models=(panel,) + ((grid.floor,) if grid.floor else ())), colors
        )
        _draw_chance(ax, mean_chance(grid.tasks))
        _style(ax, grid, panel)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    for index, ax in enumerate(axes[: len(panels)]):
        if index + columns >= len(panels):
            ax.set_xlabel("shots (k)")
    handles = [Line2D([], [], color="0.6", marker="."), Line2D([], [], color="0.35", linestyle="--")]
    names = [f"{reference} (the plain run, in every panel)", "chance"]
    if grid.floor is not None:
        handles.append(Line2D([], [], **FLOOR_STYLE))
        names.append(FLOOR_LABEL)
    title = "mean accuracy over tasks per condition" + ("; hollow: not complete" if marked else "")
    fig.legend(handles, names, loc="outside lower center", ncols=len(handles), title=title)
    return fig


@literal_text
def compliance_figure(grid: AccuracyGrid, task: str) -> bytes | None:
    """Format compliance of one task against k: per model the share of answers the task's rule parsed
    (dashed), the accuracy among them (dotted) and the accuracy over all answers (solid, the protocol's);
    None when the scores hold no compliance (a summary without its detail CSV)."""
    colors = model_colors(grid.models)
    fig = Figure(figsize=(6.4, 4.2), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    drawn = False
    for index, model in enumerate(grid.lines):
        points = [
            (k, c) for k in grid.shots if (c := grid.cell(model, k, task)) and c.parsed_share is not None
        ]
        if not points:
            continue
        drawn = True
        xs = [k + dodge(index, len(grid.lines)) for k, _ in points]
        color = colors[model]
        ax.plot(xs, [c.accuracy for _, c in points], color=color, marker="o", label=f"{model}: accuracy")
        ax.plot(xs, [c.parsed_share for _, c in points], color=color, linestyle="--", marker="s")
        parsed = [
            (x, c.accuracy_parsed)
            for x, (_, c) in zip(xs, points, strict=True)
            if c.accuracy_parsed is not None
        ]
        if parsed:
            ax.plot(*zip(*parsed, strict=True), color=color, linestyle=":", marker="^")
    if not drawn:
        return None
    _style(ax, grid, f"{task or '(no task)'}: format compliance")
    ax.set_xlabel("shots (k)")
    ax.set_ylabel("share of answers")
    handles, names = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], color="0.3", linestyle="--", marker="s"),
        Line2D([], [], color="0.3", linestyle=":", marker="^"),
    ]
    names += [COMPLIANCE_PARSED, COMPLIANCE_ACCURACY]
    ax.legend(handles, names, loc="best", fontsize="x-small")
    return _png(fig)


COMPLIANCE_PARSED = "dashed: parsed share (the rule could read the answer)"
COMPLIANCE_ACCURACY = "dotted: accuracy among parsed answers"
