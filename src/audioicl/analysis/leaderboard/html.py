"""The leaderboard page: one self-contained HTML file (the report's CSS inline, plots as PNG data URIs, no
script), every string that comes from a file escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from audioicl import __version__
from audioicl.analysis.report.html import CSS
from audioicl.analysis.report.media import png_data_uri

from .board import CONTROL, FLOOR, MODEL, Entry
from .repro import Reproduction
from .tables import Compliance, ComplianceRow, DrawSpread, Mean, PartSpread, Ranking

KIND_TITLES = {
    MODEL: "Models",
    CONTROL: "Controls (<model>+<condition> runs)",
    FLOOR: "Built-in floors and solvers",
}
EXTRA_CSS = """
table.ranking td, table.compliance td, table.draws td { text-align: right; white-space: nowrap; }
table.ranking td.entry, table.compliance td.entry, table.draws td.entry { text-align: left; }
table.ranking .n { color: #57606a; font-size: 0.75rem; }
table.ranking td.gaps { text-align: left; white-space: normal; font-size: 0.8rem; color: #57606a; max-width: 28rem; }
td.short { background: #fff8c5; }
table.repro th { text-align: left; vertical-align: top; white-space: nowrap; }
table.repro td { font-family: ui-monospace, Menlo, monospace; font-size: 0.8rem; word-break: break-all; }
table.repro td.missing { color: #9a6700; font-family: inherit; }
table.repro pre { margin: 0; white-space: pre-wrap; }
section.repro { border: 1px solid #d8dee6; border-radius: 4px; background: white; padding: 0.4rem 1rem; margin: 1rem 0; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 0.6rem; }
footer { margin-top: 3rem; border-top: 1px solid #d8dee6; padding-top: 0.5rem; color: #57606a; font-size: 0.85rem; }
"""


@dataclass(frozen=True)
class Plot:
    title: str
    png: bytes


@dataclass(frozen=True)
class LeaderboardPage:
    folders: tuple[str, ...]
    rankings: tuple[Ranking, ...]
    overview: Plot
    task_plots: tuple[Plot, ...]
    interval_label: str  # what the task cells' bars are
    compliance: tuple[ComplianceRow, ...]
    tasks: tuple[str, ...]
    spreads: tuple[DrawSpread, ...]
    reproductions: tuple[Reproduction, ...]
    warnings: tuple[str, ...]  # shown above the ranking (datasets that differ, ...)
    footer: tuple[str, ...]  # one note each (the parquet file, ...)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _mean_cell(mean: Mean) -> str:
    """The mean, and under it its interval, its n (lines scored) and the task cells it is over."""
    if mean.accuracy is None:
        shown = "–"
    else:
        interval = (
            f"[{100 * mean.interval[0]:.1f}, {100 * mean.interval[1]:.1f}]<br>"
            if mean.interval is not None
            else ""
        )
        shown = (
            f'{percent(mean.accuracy)}<br><span class="n">{interval}n {mean.lines}, {mean.cells}/{mean.of} cells'
            "</span>"
        )
    if mean.complete:
        return f'<td title="over all {mean.of} task cells">{shown}</td>'
    title = "; ".join(mean.gaps) or f"over {mean.cells} of {mean.of} task cells"
    return f'<td class="short" title="{escape(title)}">{shown}</td>'


def _entry_cell(entry: Entry, anchors: Mapping[str, str]) -> str:
    label = f"{entry.base} + {entry.condition}" if entry.condition else entry.name
    return (
        f'<td class="entry" data-entry="{escape(entry.name)}">'
        f'<a href="#{anchors[entry.name]}">{escape(label)}</a></td>'
    )


def render_ranking(ranking: Ranking, anchors: Mapping[str, str]) -> str:
    head = "".join(f"<th>k={k}</th>" for k in ranking.shots)
    rows = []
    for standing in ranking.standings:
        rank = str(standing.rank) if standing.rank is not None else "–"
        cells = "".join(_mean_cell(standing.per_k[k]) for k in ranking.shots)
        gaps = "; ".join(standing.overall.gaps) if not standing.overall.complete else "complete"
        rows.append(
            f"<tr><td>{rank}</td>{_entry_cell(standing.entry, anchors)}{cells}"
            f'{_mean_cell(standing.overall)}<td class="gaps">{escape(gaps)}</td></tr>'
        )
    return (
        f'<h3>{escape(KIND_TITLES[ranking.kind])}</h3>\n<div class="table-wrap">'
        f'<table class="ranking" data-kind="{ranking.kind}">\n<thead><tr><th>rank</th><th>entry</th>{head}'
        "<th>overall</th><th>coverage</th></tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody></table></div>"
    )


def _compliance_cell(value: Compliance) -> str:
    if value.parsed is None:
        return '<td title="the scores do not say">–</td>'
    return f'<td title="{value.parsed} of {value.n} lines parsed">{percent(value.parsed_share)}</td>'


def render_compliance(rows: Sequence[ComplianceRow], tasks: Sequence[str], anchors: Mapping[str, str]) -> str:
    head = "".join(f"<th>{escape(task or '(no task)')}</th>" for task in tasks)
    body = []
    for row in rows:
        per_task = "".join(_compliance_cell(row.per_task[task]) for task in tasks)
        overall = row.overall
        body.append(
            f"<tr>{_entry_cell(row.entry, anchors)}<td>{overall.n}</td>"
            f"<td>{percent(overall.parsed_share)}</td><td>{percent(overall.accuracy_parsed)}</td>{per_task}</tr>"
        )
    return (
        '<div class="table-wrap"><table class="compliance">\n<thead><tr><th rowspan="2">entry</th>'
        '<th rowspan="2">lines</th><th rowspan="2">parsed_share</th><th rowspan="2">accuracy_parsed</th>'
        f'<th colspan="{len(tasks)}">parsed_share per task</th></tr><tr>{head}</tr></thead>\n<tbody>\n'
        + "\n".join(body)
        + "\n</tbody></table></div>"
    )


def _part(spread: PartSpread) -> str:
    values = list(spread.means.values())
    sd = "" if spread.sd is None else f", sd {100 * spread.sd:.1f} pts"
    return f"{len(values)} {spread.part}s: {percent(min(values))}–{percent(max(values))}{sd}"


def render_spreads(spreads: Sequence[DrawSpread], anchors: Mapping[str, str]) -> str:
    if not spreads:
        return (
            '<p class="note">No entry\'s lines hold several draws, orders or variants: there is no spread to '
            "show.</p>"
        )
    body = []
    for spread in spreads:
        widest = f"{spread.widest[0]} (sd {100 * spread.widest[1]:.1f} pts)" if spread.widest else "–"
        parts = "; ".join(_part(p) for p in spread.parts)
        body.append(
            f"<tr>{_entry_cell(spread.entry, anchors)}<td>{spread.k}</td><td>{spread.tasks}</td>"
            f'<td class="gaps">{escape(parts)}</td><td>{escape(widest)}</td>'
            f"<td>{percent(spread.vote_accuracy)}</td></tr>"
        )
    return (
        '<div class="table-wrap"><table class="draws">\n<thead><tr><th>entry</th><th>k</th><th>tasks</th>'
        "<th>mean over tasks of each draw, order, variant alone: range</th><th>task that moves most over "
        "draws</th><th>plurality vote</th></tr></thead>\n<tbody>\n"
        + "\n".join(body)
        + "\n</tbody></table></div>"
    )


def render_reproduction(block: Reproduction, anchor: str | None) -> str:
    rows = []
    for item in block.items:
        if not item.recorded:
            rows.append(
                f'<tr><th>{escape(item.label)}</th><td class="missing">{escape(item.value)}</td></tr>'
            )
        elif item.label == "commands":
            rows.append(f"<tr><th>{escape(item.label)}</th><td><pre>{escape(item.value)}</pre></td></tr>")
        else:
            rows.append(f"<tr><th>{escape(item.label)}</th><td>{escape(item.value)}</td></tr>")
    where = (
        f"run record {escape(str(block.record))}"
        if block.record is not None
        else "no run record (&lt;model&gt;_run.json) beside its results files"
    )
    ident = f' id="{anchor}"' if anchor else ""
    return (
        f'<section class="repro"{ident} data-entry="{escape(block.entry.name)}"><h3>{escape(block.entry.name)}</h3>'
        f'<p class="note">{where}</p><table class="repro">' + "".join(rows) + "</table></section>"
    )


def anchors_of(blocks: Sequence[Reproduction]) -> dict[str, str]:
    """Entry name → the id of its first reproducibility block (names may hold any character)."""
    anchors: dict[str, str] = {}
    for block in blocks:
        anchors.setdefault(block.entry.name, f"repro-{len(anchors) + 1}")
    return anchors


RANKING_NOTE = (
    "Mean accuracy over tasks (each task weighs the same) per k and over every task × k cell of the section, "
    "with a 95% interval from a cluster bootstrap: each task's query clips drawn with replacement, the same "
    "clips at every k (a nested episode asks one query clip at every k). A mean is over the complete tasks "
    "only; a highlighted cell is over fewer cells than the grid holds (hover for why), and an entry is ranked "
    "only when every cell of its section's grid is complete over its whole dataset. Controls and floors are "
    "listed beside the models, not ranked with them."
)


def render_page(page: LeaderboardPage) -> str:
    anchors = anchors_of(page.reproductions)
    written: set[str] = set()
    blocks = []
    for block in page.reproductions:
        anchor = anchors[block.entry.name] if block.entry.name not in written else None
        written.add(block.entry.name)
        blocks.append(render_reproduction(block, anchor))
    warnings = "".join(f'<div class="coverage"><p>{escape(w)}</p></div>' for w in page.warnings)
    rankings = "\n".join(render_ranking(r, anchors) for r in page.rankings)
    plots = "\n".join(
        f'<img class="plot" alt="accuracy vs shots, {escape(p.title)}" src="{png_data_uri(p.png)}">'
        for p in page.task_plots
    )
    footer = "".join(f"<p>{escape(note)}</p>" for note in page.footer)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AudioICL-Bench leaderboard</title>
<style>{CSS}{EXTRA_CSS}</style>
</head>
<body>
<h1>AudioICL-Bench leaderboard</h1>
<p class="meta">Results: {escape(", ".join(page.folders))} · generated by audioicl {escape(__version__)}</p>
<nav><a href="#ranking">ranking</a><a href="#curves">k-curves</a><a href="#compliance">format compliance</a><a
href="#draws">draw spread</a><a href="#reproducibility">reproducibility</a></nav>
{warnings}
<section id="ranking"><h2>Ranking</h2>
<p class="note">{escape(RANKING_NOTE)}</p>
{rankings}
</section>
<section id="curves"><h2>Accuracy vs. shots</h2>
<p class="note">Every entry per task, with its {escape(page.interval_label)}; dashed: chance level; dotted: the
text-only floor. The last panel of the overview is the mean over the complete tasks (hollow where not complete).</p>
<img class="plot" alt="accuracy vs shots, all tasks" src="{png_data_uri(page.overview.png)}">
<div class="plots">{plots}</div>
</section>
<section id="compliance"><h2>Format compliance</h2>
<p class="note">Over all k of an entry: parsed_share is the share of lines whose response the task's scoring rule
can read (an integer, a label, three letters; error lines, never asked, count as unparsed, as in the scorer);
accuracy_parsed is the accuracy over those lines alone. A low parsed_share means the format, not the rule, was
missed.</p>
{render_compliance(page.compliance, page.tasks, anchors)}
</section>
<section id="draws"><h2>Draw spread</h2>
<p class="note">Where an entry's lines carry several draws (<code>draw</code>, <code>order</code>,
<code>variant</code>; a line without them is draw 0, order 0, variant 0): the mean over its complete tasks of
each draw (order, variant) alone, their range and standard deviation, the task whose accuracy has the largest
standard deviation over draws, and the accuracy of each query's plurality answer over its lines (mean over
tasks). The ranking's numbers pool every line, as the scorer does.</p>
{render_spreads(page.spreads, anchors)}
</section>
<section id="reproducibility"><h2>Reproducibility</h2>
<p class="note">What each entry's run record says made its results; an item it lacks says "not recorded".</p>
{"".join(blocks)}
</section>
<footer>{footer}</footer>
</body>
</html>
"""
