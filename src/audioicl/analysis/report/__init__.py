"""``audioicl report``: accuracy-vs-shots plots, a markdown table and a self-contained HTML page.

Inputs are the summary CSV that scoring writes and, optionally, the results folder (for example episodes with
their audio). Outputs in ``out``: ``accuracy_<task>.png`` per task, ``overview.png``, ``report.md`` and
``report.html`` (no external resources: plots and clips are embedded as data URIs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from audioicl.files import write_atomic
from audioicl.tasks.chance import chance_level

from .accuracy import FLOOR_MODEL, AccuracyGrid, load_grid
from .examples import Example, read_scored, select_examples
from .html import ExampleView, Page, TaskSection, render_page
from .media import AudioBudget, embed_clips
from .tables import FLOOR_NOTE, accuracy_table, describe_chance, describe_floor, html_table, markdown_table

__all__ = ["DEFAULT_AUDIO_BUDGET", "FLOOR_MODEL", "ReportFiles", "ReportOptions", "write_report"]

DEFAULT_AUDIO_BUDGET = 24_000_000  # bytes of 16 kHz PCM16 WAV embedded in the page, over all tasks


@dataclass(frozen=True)
class ReportOptions:
    scores: Path
    out: Path
    results: Path | None = None
    data: Path | None = None
    examples: int = 3
    audio_budget: int = DEFAULT_AUDIO_BUDGET
    floor: str = FLOOR_MODEL  # the model drawn as the text-only floor
    interval: str = "wilson"  # accuracy.INTERVALS


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    overview: Path
    plots: dict[str, Path]  # task → PNG
    audio_bytes: int  # WAV bytes embedded in the HTML (before base64)


def plot_name(task: str) -> str:
    return "accuracy_" + (re.sub(r"[^A-Za-z0-9_-]", "_", task) or "unnamed") + ".png"


def markdown_report(grid: AccuracyGrid, scores: Path, plots: dict[str, Path], overview: Path) -> str:
    chance_notes = "\n".join(
        f"- {task or '(no task)'}: {describe_chance(chance_level(task))}"
        + (f"; text-only floor {floor}" if (floor := describe_floor(grid, task)) else "")
        for task in grid.tasks
    )
    floor_note = f"{FLOOR_NOTE}\n\n" if grid.floor else ""
    plot_links = "\n\n".join(f"![{task or '(no task)'}]({path.name})" for task, path in plots.items())
    return (
        "# AudioICL-Bench report\n\n"
        f"Scores: `{scores}`. Accuracy with its {grid.interval_label}; rows are tasks, columns model × shots (k); "
        "the last row is the unweighted mean of the task accuracies.\n\n"
        f"{markdown_table(accuracy_table(grid))}\n"
        f"## Chance levels and the text-only floor\n\n{floor_note}{chance_notes}\n\n"
        f"## Plots\n\n![overview]({overview.name})\n\n{plot_links}\n"
    )


def embed_examples(examples: list[Example], budget: AudioBudget) -> tuple[ExampleView, ...]:
    return tuple(
        ExampleView(
            example,
            None
            if example.audio_paths is None
            else embed_clips(example.data_root, example.audio_paths, budget),
        )
        for example in examples
    )


def write_report(options: ReportOptions) -> ReportFiles:
    # matplotlib costs ~0.5 s of import: only a run that writes a report pays it
    from .plots import overview_figure, task_figure

    grid = load_grid(options.scores, options.floor, options.interval)
    options.out.mkdir(parents=True, exist_ok=True)

    plots: dict[str, Path] = {}
    pngs: dict[str, bytes] = {}
    for task in grid.tasks:
        pngs[task] = task_figure(grid, task)
        plots[task] = options.out / plot_name(task)
        write_atomic(plots[task], pngs[task])
    overview_png = overview_figure(grid)
    overview = options.out / "overview.png"
    write_atomic(overview, overview_png)
    markdown = options.out / "report.md"
    write_atomic(markdown, markdown_report(grid, options.scores, plots, overview))

    examples: dict[str, list[Example]] = {}
    with_examples = options.results is not None and options.examples > 0
    if with_examples:
        lines = read_scored(options.results)
        examples = select_examples(lines, options.examples, options.results, options.data)
    share = options.audio_budget // max(1, sum(1 for task in grid.tasks if examples.get(task)))
    budgets = {task: AudioBudget(share) for task in grid.tasks}
    sections = tuple(
        TaskSection(
            task,
            pngs[task],
            chance_level(task),
            embed_examples(examples.get(task, []), budgets[task]),
            describe_floor(grid, task),
        )
        for task in grid.tasks
    )
    if not with_examples:
        note = "No example episodes: pass --results DIR (and --examples N > 0) to show some."
    else:
        note = (
            f"Example episodes: up to {options.examples} per task at the highest k in {options.results}, "
            "alternating episodes some model solved and episodes no model solved, in id order. "
            f"Clips are re-encoded to 16 kHz 16-bit WAV; each task embeds at most {share / 1e6:.1f} MB of audio."
        )
    page = Page(
        str(options.scores),
        grid.models,
        overview_png,
        html_table(accuracy_table(grid)),
        sections,
        note,
        FLOOR_NOTE if grid.floor else "",
        grid.interval_label,
    )
    html_path = options.out / "report.html"
    write_atomic(html_path, render_page(page, with_examples))
    return ReportFiles(markdown, html_path, overview, plots, sum(b.used for b in budgets.values()))
