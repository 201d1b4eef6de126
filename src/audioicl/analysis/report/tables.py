"""The accuracy table (rows: tasks and their mean; columns: model × k) as markdown and as HTML."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from audioicl.scoring.coverage import INCOMPLETE, SUBSET, UNCHECKED, describe_gaps
from audioicl.tasks.chance import Chance, chance_level, mean_chance

from .accuracy import AccuracyGrid, Cell, MeanCell

MEAN_ROW = "mean over tasks"


@dataclass(frozen=True)
class TableCell:
    text: str
    title: str = ""  # extra detail (n, error lines), shown on hover in HTML


@dataclass(frozen=True)
class TableRow:
    label: str
    chance: str
    cells: tuple[TableCell, ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[tuple[str, int], ...]  # (model, k)
    rows: tuple[TableRow, ...]
    floor: str | None = None  # the model whose columns are the text-only floor

    def header(self, model: str) -> str:
        return f"{model} (floor)" if model == self.floor else model


def percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def format_chance(chance: Chance) -> str:
    if chance.value is None:
        return "?"
    if chance.value == 0:
        return "≈ 0"
    return percent(chance.value)


def describe_chance(chance: Chance) -> str:
    """``12.5% (uniform guess over the 8 labels)``."""
    return f"{format_chance(chance)} ({chance.note})"


def describe_floor(grid: AccuracyGrid, task: str) -> str | None:
    """``14.3% (k=1), 33.3% (k=5)``: the text-only floor of a task per k, if the summary has it."""
    if grid.floor is None:
        return None
    cells = [(k, c) for k in grid.shots if (c := grid.cell(grid.floor, k, task)) is not None]
    return ", ".join(f"{percent(c.accuracy)} (k={k})" for k, c in cells) or None


FLOOR_NOTE = (
    "The text-only floor is what builtin:text-only scores: it sees everything a model sees except the audio "
    "(task, k, demo labels and their order, the references' letters) and answers with the best rule those "
    "allow (AudioCount: a count no demo has; operators: the operator the demo values point to; otherwise "
    "the label prior the demos show). Accuracy at or below it shows nothing learned from listening."
)


def format_cell(cell: Cell | None) -> TableCell:
    if cell is None:
        return TableCell("–")
    text = f"{percent(cell.accuracy)} [{100 * cell.low:.1f}, {100 * cell.high:.1f}]"
    if cell.partial is not None:
        have, of = cell.partial
        text += f" (partial: {have} of {of} episodes)"
    if cell.errors:
        text += f" ({cell.errors} of {cell.n} errors)"
        return TableCell(
            text, f"n = {cell.n}, of which {cell.errors} error lines (episodes not asked, wrong)"
        )
    return TableCell(text, f"n = {cell.n}")


def format_mean(mean: MeanCell | None) -> TableCell:
    """The mean with its coverage: plain only when complete (or, without a coverage CSV, over every task)."""
    if mean is None:
        return TableCell("–")
    value = percent(mean.accuracy)
    if mean.status == SUBSET:
        over = f"{mean.tasks} of {mean.of} tasks, " if mean.tasks < mean.of else ""
        return TableCell(
            f"{value} ({over}subset)", f"subset: {mean.selection or 'fewer episodes than the dataset'}"
        )
    if mean.status == INCOMPLETE:
        return TableCell(
            f"{value} ({mean.tasks} of {mean.of} tasks: incomplete)",
            "over the complete tasks only: episodes the run selected have no line",
        )
    if mean.status == UNCHECKED:
        return TableCell(f"{value} ({mean.tasks} tasks, coverage unchecked)", "the dataset is unknown")
    if mean.tasks < mean.of:
        return TableCell(f"{value} ({mean.tasks}/{mean.of} tasks)")
    return TableCell(value)


def coverage_notes(grid: AccuracyGrid) -> list[str]:
    """``model k=K: what keeps it from complete`` for every (model, k) of the coverage CSV that is not."""
    return [f"{c.model} k={c.shots}: " + "; ".join(describe_gaps(c)) for c in grid.short()]


COVERAGE_NOTE = (
    "A mean over tasks is over the complete tasks only (every episode the runs selected has a line) and says "
    "so when it is not over every task of the dataset; a subset run (--limit, --shard, --tasks) is not the "
    "benchmark's number."
)


def accuracy_table(grid: AccuracyGrid) -> Table:
    columns = tuple(
        (model, k)
        for model in grid.models
        for k in grid.shots
        if any(grid.cell(model, k, task) for task in grid.tasks)
    )
    rows = [
        TableRow(
            task or "(no task)",
            format_chance(chance_level(task)),
            tuple(format_cell(grid.cell(model, k, task)) for model, k in columns),
        )
        for task in grid.tasks
    ]
    rows.append(
        TableRow(
            MEAN_ROW,
            format_chance(mean_chance(grid.tasks)),
            tuple(format_mean(grid.mean(model, k)) for model, k in columns),
        )
    )
    return Table(columns, tuple(rows), grid.floor)


_MARKDOWN_CELL = str.maketrans({"|": "\\|", "&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " "})


def markdown_cell(text: str) -> str:
    """Untrusted text (a model's answer, a model name, an id) as one Markdown table cell: its pipes escaped, its
    line breaks spaces, and ``<``, ``>``, ``&`` as entities, so that a renderer that passes raw HTML through
    (Python-Markdown does) shows the text instead of running it."""
    return text.translate(_MARKDOWN_CELL)


def markdown_table(table: Table) -> str:
    header = ["task", "chance"] + [
        f"{markdown_cell(table.header(model))} k={k}" for model, k in table.columns
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for row in table.rows:
        cells = [markdown_cell(row.label), row.chance] + [cell.text for cell in row.cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def html_table(table: Table) -> str:
    """Two header rows (model spanning its k columns, then k), one row per task, then the mean row."""
    models: list[tuple[str, int]] = []
    for model, _ in table.columns:
        if models and models[-1][0] == model:
            models[-1] = (model, models[-1][1] + 1)
        else:
            models.append((model, 1))
    head_models = "".join(
        f'<th colspan="{span}">{escape(table.header(model))}</th>' for model, span in models
    )
    head_shots = "".join(f"<th>k={k}</th>" for _, k in table.columns)
    body = []
    for row in table.rows:
        css = ' class="mean"' if row.label == MEAN_ROW else ""
        cells = "".join(
            f'<td title="{escape(cell.title)}">{escape(cell.text)}</td>'
            if cell.title
            else f"<td>{escape(cell.text)}</td>"
            for cell in row.cells
        )
        body.append(f"<tr{css}><th>{escape(row.label)}</th><td>{escape(row.chance)}</td>{cells}</tr>")
    return (
        '<table class="accuracy">\n<thead>\n'
        f'<tr><th rowspan="2">task</th><th rowspan="2">chance</th>{head_models}</tr>\n'
        f"<tr>{head_shots}</tr>\n</thead>\n<tbody>\n" + "\n".join(body) + "\n</tbody>\n</table>\n"
    )


COMPLIANCE_NOTE = (
    "Solid: accuracy over all answers (the protocol's number: an answer the task's rule cannot read is "
    "wrong); dashed: the share of answers the rule could read; dotted: the accuracy among those. A low "
    "parsed share with a high accuracy among the parsed is a format problem, not a knowledge one."
)
