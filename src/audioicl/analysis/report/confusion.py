"""The report's confusion views per task (``scoring.confusion`` computes them): answer − truth of the count
and length tasks, label-prior bias against the demos' labels, the Morse letter errors. Each view is a small
table (markdown and HTML) with one row per (model, k)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from audioicl.dataset.meta import find_meta_files, read_meta
from audioicl.errors import AudioICLError
from audioicl.scoring.confusion import (
    GAP,
    LabelPrior,
    LetterErrors,
    Offsets,
    label_priors,
    letter_errors,
    offsets,
)
from audioicl.scoring.score import ScoredLine

from .examples import run_data_root
from .tables import markdown_cell

OFFSET_SPAN = 3  # columns −3 … +3; beyond them, ≤ −4 and ≥ +4
TOP_CONFUSIONS = 8


@dataclass(frozen=True)
class ViewTable:
    """One view: its title, what it shows, a header and rows of text cells."""

    title: str
    note: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def demo_labels(
    lines: Sequence[ScoredLine], folder: Path, data: Path | None
) -> dict[tuple[int, str], tuple[str | None, ...]]:
    """(k, episode id) → the demos' labels, from the meta files of the data root (``--data``, else each
    model's run record, as the examples find their clips); a root that cannot be read gives no labels (the
    label-prior view then counts its lines as unknown)."""
    roots = {data} if data is not None else set()
    if data is None:
        roots = {root for line in lines if (root := run_data_root(line.file, folder, line.model)) is not None}
    labels: dict[tuple[int, str], tuple[str | None, ...]] = {}
    wanted = {line.shots for line in lines}
    for root in sorted(roots):
        try:
            metas = find_meta_files(root)
            for k in sorted(wanted & set(metas)):
                for episode in read_meta(metas[k]):
                    labels.setdefault((k, episode.id), tuple(demo.label for demo in episode.demos))
        except AudioICLError:
            continue
    return labels


def _percent(count: int, of: int) -> str:
    return f"{100 * count / of:.1f}%" if of else "–"


def offsets_view(found: Iterable[Offsets]) -> ViewTable | None:
    rows = []
    for o in found:
        below = sum(n for d, n in o.counts.items() if d < -OFFSET_SPAN)
        above = sum(n for d, n in o.counts.items() if d > OFFSET_SPAN)
        middle = [str(o.counts.get(d, 0)) for d in range(-OFFSET_SPAN, OFFSET_SPAN + 1)]
        rows.append((o.model, str(o.shots), str(below), *middle, str(above), str(o.unparsed)))
    if not rows:
        return None
    span = [f"{d:+d}" if d else "0" for d in range(-OFFSET_SPAN, OFFSET_SPAN + 1)]
    return ViewTable(
        "Answer − truth",
        "How far each parsed answer is from the true value (0: right); a peak at ±1 is a near miss, a flat "
        "spread a guess. Unparsed: answers without a number.",
        ("model", "k", f"≤ {-OFFSET_SPAN - 1}", *span, f"≥ +{OFFSET_SPAN + 1}", "unparsed"),
        tuple(rows),
    )


def label_prior_view(found: Iterable[LabelPrior]) -> ViewTable | None:
    rows = [
        (
            p.model,
            str(p.shots),
            str(p.lines),
            _percent(p.answered_majority, p.majority_lines),
            _percent(p.truth_majority, p.majority_lines),
            _percent(p.answered_last, p.lines),
            _percent(p.truth_last, p.lines),
            str(p.other_demos + p.unknown),
        )
        for p in found
        if p.lines or p.other_demos or p.unknown
    ]
    if not rows:
        return None
    return ViewTable(
        "Label-prior bias",
        "How often the answer is the demos' majority label (over the episodes whose demos have one most "
        "common label) and the last demo's label, against how often that label is the truth. Answers well "
        "above the truth rate copy the demos. Not counted: lines asked with other demos than the meta's "
        "(draws, orders) or whose episode the dataset's meta files lack.",
        (
            "model",
            "k",
            "lines",
            "answers = majority",
            "truth = majority",
            "answers = last",
            "truth = last",
            "not counted",
        ),
        tuple(rows),
    )


def _letter(letter: str) -> str:
    return letter if letter != GAP else "∅"


def letters_view(found: Iterable[LetterErrors]) -> ViewTable | None:
    rows = []
    for e in found:
        rates = e.letter_error_rate()
        worst = sorted(rates.items(), key=lambda item: (-item[1], item[0]))[:5]
        rows.append(
            (
                e.model,
                str(e.shots),
                str(e.words),
                str(e.unparsed),
                ", ".join(f"{_letter(t)}→{_letter(a)} {n}" for (t, a), n in e.errors()[:TOP_CONFUSIONS])
                or "–",
                ", ".join(f"{letter} {100 * rate:.0f}%" for letter, rate in worst if rate > 0) or "–",
            )
        )
    if not rows:
        return None
    return ViewTable(
        "Letter errors",
        "Each parsed answer aligned to the true word by edit distance: true letter → answered letter (∅: a "
        "letter dropped, or inserted), the most frequent first; then the letters most often wrong.",
        ("model", "k", "words", "unparsed", "confusions (count)", "letters most often wrong"),
        tuple(rows),
    )


def confusions(
    lines: Sequence[ScoredLine], folder: Path, data: Path | None
) -> dict[str, tuple[ViewTable, ...]]:
    """Task → every view its lines allow."""
    labels = demo_labels(lines, folder, data)
    views: dict[str, list[ViewTable]] = {}
    computed = (
        (offsets_view, offsets(lines)),
        (label_prior_view, label_priors(lines, labels)),
        (letters_view, letter_errors(lines)),
    )
    for make, found in computed:
        by_task: dict[str, list] = {}
        for item in found:
            by_task.setdefault(item.task, []).append(item)
        for task, items in by_task.items():
            view = make(items)
            if view is not None:
                views.setdefault(task, []).append(view)
    return {task: tuple(found) for task, found in views.items()}


def markdown_view(view: ViewTable) -> str:
    lines = [
        f"#### {view.title}\n\n{view.note}\n",
        "| " + " | ".join(map(markdown_cell, view.header)) + " |",
        "|" + "---|" * len(view.header),
    ]
    lines += ["| " + " | ".join(map(markdown_cell, row)) + " |" for row in view.rows]
    return "\n".join(lines) + "\n"


def html_view(view: ViewTable) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in view.header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in view.rows)
    return (
        f'<div class="confusion"><h4>{escape(view.title)}</h4><p class="note">{escape(view.note)}</p>'
        f'<div class="table-wrap"><table class="confusion"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div></div>"
    )
