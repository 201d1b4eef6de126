"""The accuracy tables, one per model (rows: tasks, their mean and the episodes covered; columns: k), as markdown
and as HTML: each cell's n and error lines written out, not only on hover, and few enough columns a table to be
read without scrolling sideways (the page's width: 1,400 px, tested in a browser)."""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from audioicl.scoring.coverage import INCOMPLETE, NO_ANSWERS, SUBSET, UNCHECKED, CoverageRow, describe_gaps
from audioicl.scoring.provenance import Provenance
from audioicl.tasks.chance import Chance, chance_level, mean_chance

from .accuracy import AccuracyGrid, Cell, MeanCell

MEAN_ROW = "mean over tasks"
EPISODES_ROW = "episodes"


@dataclass(frozen=True)
class TableCell:
    text: str
    title: str = ""  # what the cell's numbers mean, shown on hover in HTML
    detail: str = ""  # how much lies behind them (n, error lines), shown under the number


@dataclass(frozen=True)
class TableRow:
    label: str
    chance: str
    cells: tuple[TableCell, ...]


@dataclass(frozen=True)
class Table:
    """One model's accuracy: a column per k."""

    model: str
    shots: tuple[int, ...]
    rows: tuple[TableRow, ...]
    floor: bool = False  # the model is the text-only floor
    provenance: Provenance | None = None  # where its numbers come from, when the scores say

    @property
    def title(self) -> str:
        return f"{self.model} (text-only floor)" if self.floor else self.model


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
    detail = f"n {cell.n}"
    if cell.partial is not None:
        have, of = cell.partial
        detail += f", partial: {have} of {of} episodes"
    if cell.errors:
        detail += f", {cell.errors} of them error lines"
        return TableCell(
            text, f"n = {cell.n}, of which {cell.errors} error lines (episodes not asked, wrong)", detail
        )
    return TableCell(text, "", detail)


def format_coverage(row: CoverageRow | None) -> TableCell:
    """The (model, k)'s episodes answered of those expected, and its status."""
    if row is None:
        return TableCell("–", "no coverage CSV beside the scores")
    if row.episodes_present is None or row.episodes_expected is None:
        return TableCell(row.status, row.note or "the dataset is unknown")
    answered = row.episodes_present - (row.errors if row.status != NO_ANSWERS else row.episodes_present)
    errors = f", {row.errors} errors" if row.errors else ""
    return TableCell(
        f"{row.episodes_present}/{row.episodes_expected}",
        "; ".join(describe_gaps(row)),
        f"{row.status}{errors}" if answered >= 0 else row.status,
    )


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


def accuracy_tables(grid: AccuracyGrid, provenance: dict[str, Provenance] | None = None) -> list[Table]:
    """One table per model: its tasks, their mean and its episodes, over the k it has."""
    tables = []
    for model in grid.models:
        shots = tuple(k for k in grid.shots if any(grid.cell(model, k, task) for task in grid.tasks))
        rows = [
            TableRow(
                task or "(no task)",
                format_chance(chance_level(task)),
                tuple(format_cell(grid.cell(model, k, task)) for k in shots),
            )
            for task in grid.tasks
        ]
        rows.append(
            TableRow(
                MEAN_ROW,
                format_chance(mean_chance(grid.tasks)),
                tuple(format_mean(grid.mean(model, k)) for k in shots),
            )
        )
        if grid.coverage:
            rows.append(
                TableRow(
                    EPISODES_ROW, "", tuple(format_coverage(grid.coverage.get((model, k))) for k in shots)
                )
            )
        tables.append(Table(model, shots, tuple(rows), model == grid.floor, (provenance or {}).get(model)))
    return tables


_MARKDOWN_CELL = str.maketrans({"|": "\\|", "&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": " ", "\r": " "})


def markdown_cell(text: str) -> str:
    """Untrusted text (a model's answer, a model name, an id) as one Markdown table cell: its pipes escaped, its
    line breaks spaces, and ``<``, ``>``, ``&`` as entities, so that a renderer that passes raw HTML through
    (Python-Markdown does) shows the text instead of running it."""
    return text.translate(_MARKDOWN_CELL)


def markdown_table(table: Table) -> str:
    """The model's heading, where its numbers come from, and its table."""
    header = ["task", "chance"] + [f"k={k}" for k in table.shots]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    for row in table.rows:
        shown = [f"{cell.text} ({cell.detail})" if cell.detail else cell.text for cell in row.cells]
        lines.append("| " + " | ".join([markdown_cell(row.label), row.chance, *shown]) + " |")
    origin = f"{markdown_cell(table.provenance.describe())}\n\n" if table.provenance else ""
    return f"### {markdown_cell(table.title)}\n\n{origin}" + "\n".join(lines) + "\n"


def html_table(table: Table) -> str:
    """The model's heading, where its numbers come from, and its table: a row per task, the mean, the
    episodes; each cell's n under its number."""
    head = "".join(f"<th>k={k}</th>" for k in table.shots)
    body = []
    for row in table.rows:
        css = {MEAN_ROW: ' class="mean"', EPISODES_ROW: ' class="episodes"'}.get(row.label, "")
        cells = "".join(
            (f'<td title="{escape(cell.title)}">' if cell.title else "<td>")
            + escape(cell.text)
            + (f'<br><span class="n">{escape(cell.detail)}</span>' if cell.detail else "")
            + "</td>"
            for cell in row.cells
        )
        body.append(f"<tr{css}><th>{escape(row.label)}</th><td>{escape(row.chance)}</td>{cells}</tr>")
    origin = f'<p class="meta origin">{escape(table.provenance.describe())}</p>\n' if table.provenance else ""
    return (
        f"<h3>{escape(table.title)}</h3>\n{origin}"
        f'<div class="table-wrap"><table class="accuracy">\n<thead>\n'
        f"<tr><th>task</th><th>chance</th>{head}</tr>\n</thead>\n<tbody>\n"
        + "\n".join(body)
        + "\n</tbody>\n</table></div>\n"
    )


COMPLIANCE_NOTE = (
    "Solid: accuracy over all answers (the protocol's number: an answer the task's rule cannot read is "
    "wrong); dashed: the share of answers the rule could read; dotted: the accuracy among those. A low "
    "parsed share with a high accuracy among the parsed is a format problem, not a knowledge one."
)
