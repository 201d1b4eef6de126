"""``audioicl report``: accuracy-vs-shots plots, a markdown table and a self-contained HTML page.

Inputs are the summary CSV that scoring writes (its detail CSV beside it adds error lines, cluster intervals,
drawn as bands, and format compliance; its draws CSV, the spread over demonstration draws, orders and
instruction variants) and, optionally, the results folder (example episodes with their
audio, and the confusion views: answer − truth, label-prior bias against the demos' labels from the dataset's
meta files, Morse letter errors). Outputs in ``out``: ``accuracy_<task>.png`` per task,
``compliance_<task>.png`` per task when the detail CSV holds compliance, ``overview.png``, ``report.md`` and
``report.html`` (plots embedded as data URIs, the example clips as FLAC files in ``clips/`` beside it: the page
stays a few MB however many clips it plays; copy the folder, not the page alone). Each file is written
atomically and ``report.html`` last, after an earlier ``report.html`` and ``report.md`` were removed: a report
that fails half-way (a full disk) leaves no page that looks complete.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

from audioicl.errors import AudioICLError
from audioicl.files import write_atomic, writing
from audioicl.scoring.lines import ScoredLine
from audioicl.scoring.provenance import Provenance, read_provenance, runs_path
from audioicl.scoring.score import detail_path
from audioicl.tasks.chance import chance_level

from .accuracy import FLOOR_MODEL, AccuracyGrid, load_grid
from .confusion import ViewTable, confusions, markdown_view
from .examples import Example, read_scored, select_examples
from .html import ExampleView, Page, TaskSection, render_page
from .media import CLIP_FOLDER, AudioBudget, embed_clips, megabytes
from .spread import spread_views
from .tables import (
    COMPLIANCE_NOTE,
    COVERAGE_NOTE,
    FLOOR_NOTE,
    accuracy_tables,
    coverage_notes,
    describe_chance,
    describe_floor,
    html_table,
    markdown_cell,
    markdown_table,
)

__all__ = [
    "DEFAULT_AUDIO_BUDGET",
    "FLOOR_MODEL",
    "ReportFiles",
    "ReportOptions",
    "write_report",
]

CLUSTER_BAND_LABEL = "95% cluster bootstrap over query clips (detail CSV)"
DEFAULT_AUDIO_BUDGET = 24_000_000  # bytes of 16 kHz 16-bit FLAC the page's clips may take, over all tasks


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
    # refuse ``results`` that are not the lines ``scores`` scored (``check_same_results``; ``audioicl report``)
    same_results: bool = False

    def __post_init__(self) -> None:
        for name in ("scores", "out", "results", "data"):  # str paths from callers of the Python API
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    html: Path
    overview: Path
    plots: dict[str, Path]  # task → PNG
    audio_bytes: int  # encoded (FLAC) bytes of the page's clips, in clips/ beside it
    audio_clips: int = 0  # distinct clips the page plays
    examples_left_out: int = 0  # examples whose audio did not fit in the budget
    compliance: dict[str, Path] = field(default_factory=dict)  # task → PNG, when the scores hold compliance


def plot_name(task: str, kind: str = "accuracy") -> str:
    return f"{kind}_" + (re.sub(r"[^A-Za-z0-9_-]", "_", task) or "unnamed") + ".png"


def markdown_views(
    grid: AccuracyGrid, compliance: dict[str, Path], views: dict[str, tuple[ViewTable, ...]]
) -> str:
    """Per task, the compliance plot and the confusion tables (empty when there are none)."""
    parts = []
    for task in grid.tasks:
        shown = []
        if task in compliance:
            shown.append(
                f"![{task or '(no task)'} compliance]({compliance[task].name})\n\n{COMPLIANCE_NOTE}\n"
            )
        shown.extend(markdown_view(view) for view in views.get(task, ()))
        if shown:
            parts.append(f"### {task or '(no task)'}\n\n" + "\n".join(shown))
    return "## Format compliance, draws and confusions\n\n" + "\n".join(parts) if parts else ""


def markdown_report(
    grid: AccuracyGrid,
    scores: Path,
    plots: dict[str, Path],
    overview: Path,
    views: str = "",
    provenance: dict[str, Provenance] | None = None,
) -> str:
    chance_notes = "\n".join(
        f"- {markdown_cell(task or '(no task)')}: {describe_chance(chance_level(task))}"
        + (f"; text-only floor {floor}" if (floor := describe_floor(grid, task)) else "")
        for task in grid.tasks
    )
    floor_note = f"{FLOOR_NOTE}\n\n" if grid.floor else ""
    plot_links = "\n\n".join(
        f"![{markdown_cell(task or '(no task)')}]({path.name})" for task, path in plots.items()
    )
    notes = coverage_notes(grid)
    coverage = (
        "## Coverage\n\n" + "".join(f"- {markdown_cell(note)}\n" for note in notes) + f"\n{COVERAGE_NOTE}\n\n"
        if notes
        else ""
    )
    return (
        "# AudioICL-Bench report\n\n"
        f"Scores: `{scores}`. Accuracy with its {grid.interval_label} and, in brackets, its n (lines scored, "
        "error lines among them); a table per model, rows are tasks, columns shots (k); then the unweighted mean "
        "of the task accuracies"
        + (
            " (over the complete tasks only, marked when not complete) and the episodes answered of those the "
            "dataset holds"
            if grid.coverage
            else ""
        )
        + ".\n\n## Accuracy\n\n"
        + "\n".join(markdown_table(table) for table in accuracy_tables(grid, provenance))
        + "\n"
        f"{coverage}"
        f"## Chance levels and the text-only floor\n\n{floor_note}{chance_notes}\n\n"
        f"## Plots\n\n![overview]({overview.name})\n\n{plot_links}\n" + (f"\n{views}" if views else "")
    )


def embed_examples(
    examples: dict[str, list[Example]], budget: AudioBudget
) -> tuple[dict[str, tuple[ExampleView, ...]], dict[str, int]]:
    """The examples whose clips all fit in the page's audio budget, and per task how many were left out.

    Tasks take turns (every task's first example, then every task's second, ...), so a small budget still
    shows every task that has examples before any task shows a second; an example that does not fit is left
    out, and a later, smaller one of its task may still fit.
    """
    views: dict[str, list[ExampleView]] = {task: [] for task in examples}
    left_out = dict.fromkeys(examples, 0)
    for index in range(max(map(len, examples.values()), default=0)):
        for task, chosen in examples.items():
            if index >= len(chosen):
                continue
            example = chosen[index]
            if example.audio_paths is None:
                views[task].append(ExampleView(example, None))
                continue
            clips = embed_clips(example.data_root, example.audio_paths, budget)
            if clips is None:
                left_out[task] += 1
            else:
                views[task].append(ExampleView(example, clips))
    return {task: tuple(shown) for task, shown in views.items()}, left_out


def write_clip_files(folder: Path, files: dict[str, bytes]) -> None:
    """The page's clips into ``folder`` (each atomically; one already there with its name has its content,
    which names it), and the clips of an earlier report there that this page does not play removed."""
    if files:
        folder.mkdir(parents=True, exist_ok=True)
    for name, flac in files.items():
        if not (folder / name).is_file():
            write_atomic(folder / name, flac)
    if folder.is_dir():
        for stale in folder.glob("*.flac"):
            if stale.name not in files:
                stale.unlink()


def examples_note(options: ReportOptions, budget: AudioBudget, left_out: dict[str, int]) -> str:
    note = (
        f"Example episodes: up to {options.examples} per task at the highest k in {options.results}, "
        "alternating episodes some model solved and episodes no model solved, in id order. "
        f"Clips are re-encoded to 16 kHz 16-bit FLAC (lossless) and written once each into {CLIP_FOLDER}/ beside "
        "this page, however many examples "
        f"use them: {budget.clips} clips, {megabytes(budget.used)} of audio"
    )
    if budget.limit <= 0:
        return note + " (none: --audio-budget-mb 0)."
    note += f" of the {megabytes(budget.limit)} budget (--audio-budget-mb)."
    if dropped := sum(left_out.values()):
        tasks = ", ".join(f"{task or '(no task)'} {n}" for task, n in left_out.items() if n)
        note += (
            f" {dropped} example{'s' if dropped > 1 else ''} whose audio did not fit "
            f"{'were' if dropped > 1 else 'was'} left out ({tasks}): raise --audio-budget-mb to see them."
        )
    return note


def scored_strictly(scores: Path) -> bool:
    """Whether the detail CSV of these scores (the file itself, or the one beside it) says ``strict``."""
    for path in (scores, detail_path(scores)):
        try:
            with path.open(newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                if "scoring" in (reader.fieldnames or ()):
                    return any(row["scoring"] == "strict" for row in reader)
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
    return False


def check_same_results(grid: AccuracyGrid, lines: list[ScoredLine], scores: Path, results: Path) -> None:
    """Refuse ``--results`` that are not the lines ``--scores`` scored: every scored (model, k, task) must have
    as many lines there (and, unless the scores are strict, as many correct), so that the confusions and the
    examples shown are of the numbers shown (issue 40: the scores of one run beside another's examples)."""
    strict = scored_strictly(scores)  # the lines here are judged by the original rules
    tally: dict[tuple[str, int, str], list[int]] = {}
    for line in lines:
        count = tally.setdefault((line.model, line.shots, line.task), [0, 0])
        count[0] += line.verdict.correct
        count[1] += 1
    for (model, k, task), cell in sorted(grid.cells.items()):
        found = tally.get((model, k, task))
        said = f"{model} k={k} {task}: {100 * cell.accuracy:.1f}% of {cell.n} in {scores}"
        if found is None:
            problem = f"{said}, no line in {results}"
        elif found[1] != cell.n or not strict and round(found[0] / found[1], 6) != cell.accuracy:
            problem = f"{said}, {100 * found[0] / found[1]:.1f}% of {found[1]} in {results}"
        else:
            continue
        raise AudioICLError(
            f"--scores and --results are not the same results ({problem}); pass the folder the scores were "
            "made from, or score it again: audioicl score --in RESULTS --out SUMMARY"
        )


def write_report(options: ReportOptions) -> ReportFiles:
    # matplotlib costs ~0.5 s of import: only a run that writes a report pays it
    from .plots import compliance_figure, overview_figure, task_figure

    grid = load_grid(options.scores, options.floor, options.interval)
    scored = None if options.results is None else read_scored(options.results)
    if scored is not None and options.same_results:  # before anything is written
        check_same_results(grid, scored, options.scores, options.results)
    with writing(options.out):
        options.out.mkdir(parents=True, exist_ok=True)
        # report.html (written last) marks a whole report: an earlier one goes first (see the docstring)
        for done in ("report.html", "report.md"):
            (options.out / done).unlink(missing_ok=True)

    plots: dict[str, Path] = {}
    pngs: dict[str, bytes] = {}
    for task in grid.tasks:
        pngs[task] = task_figure(grid, task)
        plots[task] = options.out / plot_name(task)
        write_atomic(plots[task], pngs[task])
    compliance_pngs = {task: png for task in grid.tasks if (png := compliance_figure(grid, task)) is not None}
    compliance = {task: options.out / plot_name(task, "compliance") for task in compliance_pngs}
    for task, png in compliance_pngs.items():
        write_atomic(compliance[task], png)
    overview_png = overview_figure(grid)
    overview = options.out / "overview.png"
    write_atomic(overview, overview_png)

    examples: dict[str, list[Example]] = {}
    confusion_views: dict[str, tuple[ViewTable, ...]] = {}
    with_examples = options.results is not None and options.examples > 0
    if scored is not None and options.results is not None:
        lines = [line for line in scored if line.model in grid.models]  # the folder may hold more models
        confusion_views = confusions(lines, options.results, options.data)
        if with_examples:
            examples = select_examples(lines, options.examples, options.results, options.data)
    for task, view in spread_views(options.scores).items():  # the draws CSV beside the summary, if any
        confusion_views[task] = (view, *confusion_views.get(task, ()))
    origins = read_provenance(runs_path(options.scores))  # beside the summary, where score wrote it
    markdown = options.out / "report.md"
    write_atomic(
        markdown,
        markdown_report(
            grid, options.scores, plots, overview, markdown_views(grid, compliance, confusion_views), origins
        ),
    )
    budget = AudioBudget(options.audio_budget)
    views, left_out = embed_examples({task: examples.get(task, []) for task in grid.tasks}, budget)
    sections = tuple(
        TaskSection(
            task,
            pngs[task],
            chance_level(task),
            views[task],
            describe_floor(grid, task),
            left_out[task],
            compliance_pngs.get(task),
            confusion_views.get(task, ()),
        )
        for task in grid.tasks
    )
    if not with_examples:
        note = "No example episodes: pass --results DIR (and --examples N > 0) to show some."
    else:
        note = examples_note(options, budget, left_out)
    page = Page(
        str(options.scores),
        grid.models,
        overview_png,
        "".join(html_table(table) for table in accuracy_tables(grid, origins)),
        sections,
        note,
        FLOOR_NOTE if grid.floor else "",
        grid.interval_label,
        coverage_notes=tuple(coverage_notes(grid)),
        band_label=CLUSTER_BAND_LABEL if grid.clustered() else "",
    )
    write_clip_files(options.out / CLIP_FOLDER, budget.files)
    html_path = options.out / "report.html"
    write_atomic(html_path, render_page(page, with_examples))
    return ReportFiles(
        markdown,
        html_path,
        overview,
        plots,
        budget.used,
        budget.clips,
        sum(left_out.values()),
        compliance,
    )
