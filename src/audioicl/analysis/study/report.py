"""The study report: what did the model learn from the shots? (``audioicl study``)

From one results folder holding a model's conditions (``study.conditions.CONDITIONS``) and its summary CSV:

1. claims the numbers support, each decided by paired tests (``analysis.compare``) with the Holm correction over
   every test of the report, or marked as not tested when its conditions were not run;
2. per task, side by side at the largest k: perception (probe), text ICL (transcript), audio ICL, zero-shot,
   the in-context gain, the model's own text-only floor (no-audio), the other controls and instruction
   styles, and chance;
3. accuracy against k of every condition (figure and table);
4. every paired comparison: k vs k − 1 and k vs 0 of the plain run, each control and style against the
   plain run at the largest k, and the probe against audio ICL at the largest k.

Written as ``study.md`` and a self-contained ``study.html``; ``comparisons.csv`` holds every comparison.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from audioicl import __version__
from audioicl.analysis.compare import (
    COMPARISON_HEADER,
    MEAN_TASK,
    SIGNIFICANCE_NOTE,
    Comparison,
    Outcomes,
    adjust,
    compare,
    comparison_cells,
    folder_outcomes,
    format_p,
    markdown_comparisons,
    newcombe_unpaired,
    percent,
)
from audioicl.analysis.report.accuracy import FLOOR_MODEL, AccuracyGrid, load_grid
from audioicl.analysis.report.html import CSS
from audioicl.analysis.report.media import png_data_uri
from audioicl.analysis.report.tables import accuracy_tables, html_table
from audioicl.files import write_atomic
from audioicl.tasks.chance import chance_level

from .conditions import Condition

TIMING_TASKS = ("AudioCount", "AudioCountHard", "AudioLength", "AudioLengthHard")


@dataclass(frozen=True)
class StudyReportOptions:
    results: Path
    summary: Path
    out: Path
    model: str  # the plain run's model name
    conditions: tuple[Condition, ...]


@dataclass(frozen=True)
class StudyReportFiles:
    markdown: Path
    html: Path
    comparisons: Path


@dataclass(frozen=True)
class Claim:
    title: str
    verdict: str  # supported, not supported, mixed, not tested
    evidence: str


class _Study:
    """The outcomes of each condition by k, and the comparisons made of them."""

    def __init__(self, options: StudyReportOptions, outcomes: dict[tuple[str, int], Outcomes]):
        self.options = options
        self.outcomes = outcomes
        self.labels = {c.name: c.label(options.model) for c in options.conditions}
        plain = self.labels.setdefault("plain", options.model)  # the folder may hold it from an earlier run
        self.plain_ks = sorted(k for model, k in outcomes if model == plain)
        if any(model == FLOOR_MODEL for model, _ in outcomes) and plain != FLOOR_MODEL:
            self.labels["text-only"] = FLOOR_MODEL
        self.top = max((k for k in self.plain_ks if k > 0), default=None)

    def cell(self, name: str, k: int) -> Outcomes | None:
        """The outcomes of a condition (or ``text-only``, the floor) at k."""
        label = self.labels.get(name)
        return None if label is None else self.outcomes.get((label, k))

    def top_of(self, name: str) -> int | None:
        """The largest k the condition has that the plain run has too."""
        label = self.labels.get(name)
        ks = [k for model, k in self.outcomes if model == label and k in self.plain_ks]
        return max(ks) if ks else None

    def comparisons(self) -> list[Comparison]:
        rows: list[Comparison] = []

        def plain(k: int) -> Outcomes | None:
            return self.cell("plain", k)

        for k in self.plain_ks:
            if k > 0 and (a := plain(k - 1)) and (b := plain(k)):
                rows += compare(a, b, f"plain k={k} vs k={k - 1}")
        for k in self.plain_ks:
            if k > 1 and (a := plain(0)) and (b := plain(k)):
                rows += compare(a, b, f"plain k={k} vs k=0")
        floor_k = self.top_of("text-only")
        if floor_k is not None and (floor := self.cell("text-only", floor_k)) and (base := plain(floor_k)):
            rows += compare(floor, base, f"plain vs text-only k={floor_k}")
        for c in self.options.conditions:
            if c.name == "plain":
                continue
            k = self.top_of(c.name) if not c.probe else self.top
            if k is None:
                continue
            other = self.cell(c.name, 0 if c.probe else k)
            if other and (base := plain(k)):
                rows += compare(base, other, f"{c.name} vs plain k={k}")
        return adjust(rows)


def _find(rows: Sequence[Comparison], label: str, task: str = MEAN_TASK) -> Comparison | None:
    return next((r for r in rows if r.label == label and r.task == task), None)


def _delta(row: Comparison) -> str:
    return (
        f"{percent(row.acc_a)} % → {percent(row.acc_b)} % (Δ {100 * row.delta:+.1f} points, 95 % CI "
        f"[{100 * row.low:+.1f}, {100 * row.high:+.1f}], Holm p {format_p(row.p_adjusted)})"
    )


def _tasks_where(rows: Sequence[Comparison], label: str, sign: int) -> list[str]:
    return [
        r.task
        for r in rows
        if r.label == label and r.task != MEAN_TASK and r.significant and r.delta * sign > 0
    ]


def _directional(rows: Sequence[Comparison], label: str | None, title: str, sign: int, meaning: str) -> Claim:
    """A claim that B differs from A in direction ``sign`` (+1: B higher), on the mean over tasks."""
    row = _find(rows, label) if label else None
    if row is None:
        tasks = [r for r in rows if r.label == label]
        if len(tasks) == 1:  # one task only: its own row
            row = tasks[0]
        else:
            return Claim(title, "not tested", "its conditions were not run")
    where = _tasks_where(rows, label, sign)
    other = _tasks_where(rows, label, -sign)
    detail = _delta(row)
    if where:
        detail += f"; significant on {', '.join(where)}"
    if other:
        detail += f"; the other way on {', '.join(other)}"
    if row.significant and row.delta * sign > 0:
        verdict = "supported"
    elif where:
        verdict = "mixed"
    else:
        verdict = "not supported"
    return Claim(title, verdict, f"{meaning}: {detail}")


def _label(study: _Study, name: str) -> str | None:
    k = study.top_of(name) if name != "probe" else study.top
    return f"{name} vs plain k={k}" if k is not None and name in study.labels else None


CONTROL_CLAIMS = (  # condition, claim, sign of Δ (condition − plain) that supports it, what is compared
    ("random-labels", "The model uses the demos' labels", -1, "random labels against the true ones"),
    ("noise-query", "The model listens to the query", -1, "a noise query against the real one"),
    (
        "swapped-query",
        "The answer depends on this query's audio",
        -1,
        "another episode's query against its own",
    ),
    ("no-audio", "The audio helps beyond the model's own text-only floor", -1, "no audio against audio"),
    ("transcript", "Audio ICL is harder than text ICL", +1, "transcripts against audio"),
    ("none", "The instruction is needed", -1, "no instruction against the task's"),
    (
        "probe",
        "The model hears what the rule needs but does not learn the rule",
        +1,
        "the probe against audio ICL",
    ),
)


def claims(study: _Study, rows: Sequence[Comparison]) -> list[Claim]:
    top = study.top
    gain = f"plain k={top} vs k=0" if top is not None and top > 1 else f"plain k={top} vs k={(top or 1) - 1}"
    floor_k = study.top_of("text-only")
    floor = f"plain vs text-only k={floor_k}" if floor_k is not None else None
    found = [
        _directional(
            rows, gain, "The shots teach something (in-context gain)", +1, f"k = {top} against k = 0"
        ),
        _directional(
            rows, floor, "The model beats the text-only floor", +1, "the model against builtin:text-only"
        ),
    ]
    found += [_directional(rows, _label(study, name), *claim) for name, *claim in CONTROL_CLAIMS]
    return [*found, _timing_claim(study)]


def _pooled(outcomes: Outcomes, tasks: Sequence[str]) -> tuple[int, int]:
    values = [v for t in tasks for v in outcomes.get(t, {}).values()]
    return sum(values), len(values)


def _timing_claim(study: _Study) -> Claim:
    """The timing tasks' probe accuracy against the other tasks' (different episodes of different tasks: an
    unpaired interval, outside the Holm family, so descriptive)."""
    title = "Timing (counting, durations) is the perceptual bottleneck"
    probe = study.cell("probe", 0)
    if not probe:
        return Claim(title, "not tested", "the probe was not run")
    (x1, n1), (x2, n2) = (
        _pooled(probe, TIMING_TASKS),
        _pooled(probe, [t for t in probe if t not in TIMING_TASKS]),
    )
    if not n1 or not n2:
        return Claim(title, "not tested", "the probe lacks timing or other tasks")
    low, high = newcombe_unpaired(x1, n1, x2, n2)
    verdict = "supported (descriptive)" if low > 0 else "not supported (descriptive)"
    evidence = (
        f"probe accuracy {percent(x1 / n1)} % on the timing tasks ({', '.join(TIMING_TASKS)}) against "
        f"{percent(x2 / n2)} % on the others (difference 95 % CI [{100 * low:+.1f}, {100 * high:+.1f}] points, "
        "Newcombe, unpaired, not corrected: different tasks)"
    )
    return Claim(title, verdict, evidence)


def limits(rows: Sequence[Comparison], study: _Study, task: str) -> str:
    """What keeps audio ICL down on a task, from the Holm-significant comparisons at the largest k: text
    ICL beating it (hearing), the probe beating it (rule induction)."""
    found = []
    for name, what in (
        ("transcript", "hearing (text ICL does better)"),
        ("probe", "rule induction (hears it when asked)"),
    ):
        label = _label(study, name)
        row = next((r for r in rows if r.label == label and r.task == task), None) if label else None
        if row is not None and row.significant and row.delta > 0:
            found.append(what)
    return "; ".join(found) or "-"


# --------------------------------------------------------------------------- the side-by-side table

SIDE_COLUMNS = (
    ("probe", "perception (probe)"),
    ("transcript", "text ICL (transcript)"),
    ("plain", "audio ICL"),
    ("plain@0", "zero-shot k=0"),
    ("no-audio", "no-audio floor"),
    ("text-only", "text-only floor (builtin)"),
    ("random-labels", "random labels"),
    ("noise-query", "noise query"),
    ("swapped-query", "swapped query"),
    ("general", "general instruction"),
    ("none", "no instruction"),
)


def _accuracy(outcomes: Outcomes | None, task: str) -> str:
    if not outcomes or task not in outcomes:
        return ""
    values = outcomes[task]
    return f"{percent(sum(values.values()) / len(values))} ({len(values)})"


def side_by_side(
    study: _Study, tasks: Sequence[str], rows: Sequence[Comparison]
) -> tuple[list[str], list[list[str]]]:
    header = ["task"]
    getters = []
    for key, title in SIDE_COLUMNS:
        name, _, zero = key.partition("@")
        if name not in study.labels:
            continue
        k = 0 if zero or name == "probe" else study.top_of(name)
        if k is None:
            continue
        header.append(title if zero else f"{title} k={k}")
        getters.append(study.cell(name, k))
    header += ["chance", "what limits audio ICL"]
    table = []
    for task in tasks:
        chance = chance_level(task).value
        cells = [_accuracy(outcomes, task) for outcomes in getters]
        table.append([task, *cells, "" if chance is None else percent(chance), limits(rows, study, task)])
    return header, table


def mean_by_k(grid: AccuracyGrid) -> tuple[list[str], list[list[str]]]:
    """Mean accuracy over tasks (%) of every condition (rows) at every k (columns)."""
    header = ["condition", *(f"k={k}" for k in grid.shots)]
    rows = []
    for model in grid.models:
        cells = [
            (m := grid.mean(model, k)) and f"{percent(m.accuracy)} ({m.tasks}/{m.of})" for k in grid.shots
        ]
        rows.append([model, *(c or "" for c in cells)])
    return header, rows


def _markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _html(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="table-wrap"><table class="study"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


# --------------------------------------------------------------------------- files


def _conditions_text(options: StudyReportOptions) -> str:
    return "; ".join(f"{c.name} ({c.label(options.model)}): {c.tells}" for c in options.conditions)


def _claims_markdown(found: Sequence[Claim]) -> str:
    return "\n".join(f"- **{c.title}**: {c.verdict}. {c.evidence}." for c in found) + "\n"


def _comparisons_csv(rows: Sequence[Comparison]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        (
            "comparison",
            "task",
            "n",
            "acc_a",
            "acc_b",
            "delta",
            "ci_low",
            "ci_high",
            "a_only",
            "b_only",
            "p",
            "p_holm",
            "significant",
        )
    )
    for r in rows:
        writer.writerow(
            (
                r.label,
                r.task,
                r.n,
                f"{r.acc_a:.6f}",
                f"{r.acc_b:.6f}",
                f"{r.delta:.6f}",
                f"{r.low:.6f}",
                f"{r.high:.6f}",
                "" if r.only_a is None else r.only_a,
                "" if r.only_b is None else r.only_b,
                f"{r.p:.6g}",
                f"{r.p_adjusted:.6g}",
                int(r.significant),
            )
        )
    return buffer.getvalue()


def write_study_report(options: StudyReportOptions) -> StudyReportFiles:
    from audioicl.analysis.report.plots import condition_figure  # matplotlib: only when a report is written

    study = _Study(options, folder_outcomes(options.results))
    rows = study.comparisons()
    found = claims(study, rows)
    grid: AccuracyGrid = load_grid(options.summary)
    header, side = side_by_side(study, grid.tasks, rows)
    accuracy = "".join(html_table(table) for table in accuracy_tables(grid))
    by_k = mean_by_k(grid)
    title = f"What did {options.model} learn? AudioICL-Bench study"
    intro = (
        f"Results: `{options.results}`; scores: `{options.summary}`. Conditions: {_conditions_text(options)}. "
        f"The largest k of the plain run: {study.top}."
    )
    intro_html = (
        f"Results: <code>{escape(str(options.results))}</code>; scores: <code>{escape(str(options.summary))}</code>. "
        f"Conditions: {escape(_conditions_text(options))}. The largest k of the plain run: {study.top}."
    )
    markdown = (
        f"# {title}\n\n{intro}\n\n## Claims the numbers support\n\n{_claims_markdown(found)}\n"
        f"{SIGNIFICANCE_NOTE}\n\n## Per task, side by side\n\nAccuracy % (episodes).\n\n{_markdown(header, side)}\n"
        f"## Accuracy against k, every condition\n\nMean accuracy over tasks % (tasks that have the cell). "
        f"Per task: `{options.summary}` and the report folder.\n\n{_markdown(*by_k)}\n"
        f"## Paired comparisons\n\n{SIGNIFICANCE_NOTE}\n\n{markdown_comparisons(rows)}"
    )
    md_path = options.out / "study.md"
    write_atomic(md_path, markdown)
    csv_path = options.out / "comparisons.csv"
    write_atomic(csv_path, _comparisons_csv(rows))
    claim_items = "".join(
        f"<li><b>{escape(c.title)}</b>: <i>{escape(c.verdict)}</i>. {escape(c.evidence)}.</li>" for c in found
    )
    comparisons_html = _html(COMPARISON_HEADER, [comparison_cells(r) for r in rows])
    html = f"""<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="meta">{intro_html} Generated by audioicl {escape(__version__)}.</p>
<h2>Claims the numbers support</h2><ul>{claim_items}</ul>
<p class="note">{escape(SIGNIFICANCE_NOTE)}</p>
<h2>Per task, side by side</h2><p class="note">Accuracy % (episodes).</p>{_html(header, side)}
<h2>Accuracy against k, every condition</h2>
<img class="plot" alt="mean accuracy vs shots, a panel per condition beside the plain run" src="{png_data_uri(condition_figure(grid, study.labels["plain"]))}">
<p class="note">Mean accuracy over tasks % (tasks that have the cell); per task below.</p>{_html(*by_k)}
{accuracy}
<h2>Paired comparisons</h2><p class="note">{escape(SIGNIFICANCE_NOTE)}</p>{comparisons_html}
</body>
</html>
"""
    html_path = options.out / "study.html"
    write_atomic(html_path, html)
    return StudyReportFiles(md_path, html_path, csv_path)
