"""The HTML page: inline CSS, plots as data URIs, clips as files in ``clips/`` beside it, every text escaped.

Each distinct clip's file is named once, on its first player (``id="clip-…"``); a later player of the same
clip names that player (``data-clip``) and the page's one script gives it the same source. A task's Morse alphabet
bank is shown once, above its examples, and each example's prompt names it in one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape

from audioicl import __version__
from audioicl.prompts.clips import morse_bank_paths
from audioicl.tasks.chance import Chance

from .confusion import ViewTable, html_view
from .examples import Example, ModelAnswer
from .media import EmbeddedClip, png_data_uri
from .tables import COMPLIANCE_NOTE, COVERAGE_NOTE, describe_chance

AUDIO_MARKER = "<audio>"
BANK_PATHS = frozenset(morse_bank_paths())

# every player of a clip after its first takes the first one's source
SHARE_SCRIPT = (
    "<script>for (const a of document.querySelectorAll('audio[data-clip]')) "
    "a.src = document.getElementById(a.dataset.clip).src;</script>"
)

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1280px;
       padding: 1.5rem 2rem 3rem; color: #1d2430; background: #fafbfc; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #d8dee6; padding-bottom: 0.2rem; margin-top: 2.2rem; }
.meta, .note { color: #57606a; font-size: 0.9rem; }
nav { display: flex; flex-wrap: wrap; } nav a { margin-right: 0.8rem; white-space: nowrap; }
img.plot { max-width: 100%; border: 1px solid #d8dee6; background: white; }
table { border-collapse: collapse; font-size: 0.85rem; background: white; }
th, td { border: 1px solid #d8dee6; padding: 0.25rem 0.5rem; }
table.accuracy td { text-align: right; white-space: nowrap; padding: 0.25rem 0.35rem; }
table.accuracy tbody th { text-align: left; }
tr.mean { font-weight: 600; background: #f0f3f6; }
tr.episodes { background: #f6f8fa; }
table.accuracy .n { color: #57606a; font-size: 0.75rem; font-weight: 400; }
p.origin { margin: 0.1rem 0 0.4rem; }
.coverage { border-left: 6px solid #bf8700; background: #fff8c5; padding: 0.2rem 1rem; margin-top: 1rem; }
.table-wrap { overflow-x: auto; }
article.example { border: 1px solid #d8dee6; border-left: 6px solid #999; border-radius: 4px; background: white;
                  padding: 0.6rem 1rem; margin: 1rem 0; }
article.example.solved { border-left-color: #2da44e; } article.example.unsolved { border-left-color: #cf222e; }
article.example h4 { margin: 0.2rem 0 0.5rem; }
.prompt { white-space: pre-wrap; font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 0.8rem;
          background: #f6f8fa; padding: 0.5rem; border-radius: 4px; }
.prompt audio { height: 2rem; vertical-align: middle; width: 260px; }
.bank { display: grid; grid-template-columns: repeat(auto-fill, minmax(330px, 1fr)); gap: 0.1rem 0.8rem;
        font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 0.8rem; background: #f6f8fa;
        padding: 0.5rem; border-radius: 4px; }
.bank span { white-space: nowrap; }
.bank audio { height: 2rem; vertical-align: middle; width: 210px; }
.bank-ref { color: #57606a; font-style: italic; }
.clip-missing { color: #9a6700; background: #fff8c5; padding: 0 0.3rem; border-radius: 3px; }
td.response { font-family: ui-monospace, Menlo, monospace; white-space: pre-wrap; }
table.confusion td { text-align: right; white-space: nowrap; }
.ok { color: #1a7f37; font-weight: 600; } .bad { color: #cf222e; font-weight: 600; }
"""


@dataclass(frozen=True)
class ExampleView:
    example: Example
    clips: tuple[EmbeddedClip, ...] | None  # None when the result lines do not list audio_paths


@dataclass(frozen=True)
class TaskSection:
    task: str
    plot_png: bytes
    chance: Chance
    examples: tuple[ExampleView, ...]
    floor: str | None = None  # the text-only floor per k, as text
    left_out: int = 0  # examples whose audio did not fit in the page's budget
    compliance_png: bytes | None = None  # parsed share and accuracy over k (needs the detail CSV)
    confusions: tuple[ViewTable, ...] = ()  # needs the result lines


@dataclass(frozen=True)
class Page:
    scores_file: str
    models: tuple[str, ...]
    overview_png: bytes
    table_html: str
    sections: tuple[TaskSection, ...]
    examples_note: str
    floor_note: str = ""
    interval_label: str = "95% Wilson interval"
    coverage_notes: tuple[str, ...] = ()  # what keeps a (model, k) from complete, one line each
    band_label: str = ""  # what the plots' bands show when not the bars' interval


def render_coverage(notes: tuple[str, ...]) -> str:
    """The (model, k) whose numbers are not over the complete dataset, and why; nothing when all are."""
    if not notes:
        return ""
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    return f'<div class="coverage"><h3>Coverage</h3><ul>{items}</ul><p class="note">{escape(COVERAGE_NOTE)}</p></div>\n'


def anchor(task: str) -> str:
    return "task-" + (re.sub(r"[^A-Za-z0-9_-]", "_", task) or "unnamed")


class Players:
    """Renders ``<audio>`` players; a clip's file goes only into the first player of its content."""

    def __init__(self) -> None:
        self.written: set[str] = set()
        self.shared = False  # some player takes its source from another one (the page needs the script)

    def clip(self, clip: EmbeddedClip) -> str:
        if clip.src is None:
            return f'<span class="clip-missing">[{escape(clip.path)}: {escape(clip.problem or "")}]</span>'
        title = escape(clip.path)
        if clip.clip_id is None:
            return f'<audio controls preload="metadata" title="{title}" src="{clip.src}"></audio>'
        if clip.clip_id in self.written:
            self.shared = True
            return f'<audio controls preload="metadata" title="{title}" data-clip="{clip.clip_id}"></audio>'
        self.written.add(clip.clip_id)
        return (
            f'<audio controls preload="metadata" title="{title}" id="{clip.clip_id}" '
            f'src="{clip.src}"></audio>'
        )


def _bank_run(clips: tuple[EmbeddedClip, ...]) -> tuple[int, int] | None:
    """The first and last index of the Morse bank's clips, when they are one run of 2 or more."""
    indices = [i for i, clip in enumerate(clips) if clip.path in BANK_PATHS]
    if len(indices) < 2 or indices != list(range(indices[0], indices[-1] + 1)):
        return None
    return indices[0], indices[-1]


def _marked(view: ExampleView) -> tuple[list[str], tuple[EmbeddedClip, ...]] | None:
    """The prompt split at its audio markers, when there is one marker per clip."""
    prompt, clips = view.example.prompt, view.clips
    if prompt is None or clips is None or prompt.count(AUDIO_MARKER) != len(clips):
        return None
    return prompt.split(AUDIO_MARKER), clips


def render_bank(views: tuple[ExampleView, ...], players: Players) -> str:
    """The Morse bank's letter clips once, as the first example that has them shows them; '' if none does."""
    for view in views:
        marked = _marked(view)
        if marked is None or (run := _bank_run(marked[1])) is None:
            continue
        pieces, clips = marked
        cells = []
        for index in range(run[0], run[1] + 1):
            before, after = pieces[index], pieces[index + 1]
            tag = before[before.rfind("\n") + 1 :]
            label = after.split("\n", 1)[0]
            cells.append(f"<span>{escape(tag)}{players.clip(clips[index])}{escape(label)}</span>")
        count = run[1] - run[0] + 1
        return (
            f'<p class="note">The Morse alphabet bank: the {count} letter clips every prompt below begins with '
            "(shown once here).</p>"
            f'<div class="bank">{"".join(cells)}</div>'
        )
    return ""


def render_prompt(view: ExampleView, players: Players) -> str:
    """The prompt with a player in place of each ``<audio>`` marker (the Morse bank's lines as one line that
    points to the bank above); clips listed apart if they do not match the markers."""
    marked = _marked(view)
    if marked is not None:
        pieces, clips = marked
        run = _bank_run(clips)
        out: list[str] = []
        text, index = pieces[0], 0  # text: what comes before clip ``index``
        while index < len(clips):
            if run is not None and index == run[0]:
                cut = text.rfind("\n") + 1
                last = pieces[run[1]]
                out += [
                    escape(text[:cut]),
                    f'<span class="bank-ref">{escape(text[cut:].strip())} … '
                    f"{escape(last[last.rfind(chr(10)) + 1 :].strip())}: the {run[1] - run[0] + 1} letter "
                    "clips of the Morse bank above</span>",
                ]
                after = pieces[run[1] + 1]
                text = after[after.find("\n") :] if "\n" in after else ""
                index = run[1] + 1
                continue
            out += [escape(text), players.clip(clips[index])]
            text, index = pieces[index + 1], index + 1
        out.append(escape(text))
        return f'<div class="prompt">{"".join(out)}</div>'
    prompt, clips = view.example.prompt, view.clips
    text = escape(prompt) if prompt is not None else "(prompt not recorded in the results)"
    if clips is None:
        clips_html = '<p class="note">(audio paths not recorded in the results)</p>'
    else:
        clips_html = "<ol>" + "".join(f"<li>{players.clip(c)} {escape(c.path)}</li>" for c in clips) + "</ol>"
    return f'<div class="prompt">{text}</div>{clips_html}'


def render_answer(answer: ModelAnswer) -> str:
    verdict = answer.verdict
    mark = '<span class="ok">✓ correct</span>' if verdict.correct else '<span class="bad">✗ wrong</span>'
    parsed = escape(repr(verdict.prediction)) if verdict.parsed else "unparsed"
    response = "null" if answer.response is None else answer.response
    if answer.error:
        response += f"\n(error: {answer.error})"
    return (
        f"<tr><td>{escape(answer.model)}</td><td class='response'>{escape(response)}</td>"
        f"<td>{parsed}</td><td>{mark}</td></tr>"
    )


def render_example(view: ExampleView, players: Players) -> str:
    example = view.example
    status = "solved" if example.solved else "unsolved"
    rows = "".join(render_answer(a) for a in example.answers)
    return (
        f'<article class="example {status}">'
        f"<h4>{escape(example.id)} · k={example.k} · expected: {escape(str(example.gt))}</h4>"
        f"{render_prompt(view, players)}"
        '<table class="answers"><thead><tr><th>model</th><th>raw response</th><th>parsed</th>'
        f"<th>verdict</th></tr></thead><tbody>{rows}</tbody></table></article>"
    )


def render_section(section: TaskSection, with_examples: bool, players: Players) -> str:
    task = section.task or "(no task)"
    parts = [
        f'<section id="{anchor(section.task)}"><h2>{escape(task)}</h2>',
        f'<img class="plot" alt="accuracy vs shots, {escape(task)}" src="{png_data_uri(section.plot_png)}">',
        f'<p class="note">Chance level: {escape(describe_chance(section.chance))}.'
        + (f" Text-only floor: {escape(section.floor)}." if section.floor else "")
        + "</p>",
    ]
    if section.compliance_png is not None:
        parts.append(
            f"<h3>Format compliance</h3>"
            f'<img class="plot" alt="format compliance vs shots, {escape(task)}" '
            f'src="{png_data_uri(section.compliance_png)}">'
            f'<p class="note">{escape(COMPLIANCE_NOTE)}</p>'
        )
    if section.confusions:
        parts.append("<h3>Confusions</h3>")
        parts.extend(html_view(view) for view in section.confusions)
    if section.examples:
        parts.append(f"<h3>Example episodes (k={section.examples[0].example.k})</h3>")
        if section.left_out:
            parts.append(
                f'<p class="note">{section.left_out} more example{"s" if section.left_out > 1 else ""} left out: '
                "their audio did not fit in the page's budget (--audio-budget-mb).</p>"
            )
        parts.append(render_bank(section.examples, players))
        parts.extend(render_example(view, players) for view in section.examples)
    elif section.left_out:
        parts.append(
            '<p class="note">No example shown: the audio of even the first did not fit in the page\'s budget '
            "(--audio-budget-mb).</p>"
        )
    elif with_examples:
        parts.append('<p class="note">No result lines for this task.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def bars_and_bands(page: Page) -> str:
    if not page.band_label:
        return f"Bars and bands: {page.interval_label}."
    return f"Bars: {page.interval_label}; bands: {page.band_label}."


def render_page(page: Page, with_examples: bool) -> str:
    nav = "".join(f'<a href="#{anchor(s.task)}">{escape(s.task or "(no task)")}</a>' for s in page.sections)
    players = Players()
    sections = "\n".join(render_section(s, with_examples, players) for s in page.sections)
    script = SHARE_SCRIPT if players.shared else ""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>AudioICL-Bench report</title>
<style>{CSS}</style>
</head>
<body>
<h1>AudioICL-Bench report</h1>
<p class="meta">Scores: {escape(page.scores_file)} · models: {escape(", ".join(page.models))} ·
generated by audioicl {escape(__version__)}</p>
<nav><a href="#accuracy">accuracy</a><a href="#overview">overview</a>{nav}</nav>
<section id="accuracy"><h2>Accuracy</h2>
<p class="note">A table per model, under where its numbers come from (its run records: the model, the dataset and
its fingerprint, the seed, the audioicl version and commit): accuracy with its {escape(page.interval_label)} per
task (rows) and shots (columns), under it n, the lines scored, and the error lines among them; the mean over tasks;
the episodes answered of those the dataset holds, with the coverage (hover it for what keeps it from complete).</p>
{page.table_html}
{render_coverage(page.coverage_notes)}</section>
<section id="overview"><h2>Accuracy vs. shots</h2>
<img class="plot" alt="accuracy vs shots, all tasks" src="{png_data_uri(page.overview_png)}">
<p class="note">{escape(bars_and_bands(page))} Dashed: chance level (uniform guess). The last panel is the
unweighted mean of the task accuracies a model has at that k (with a coverage CSV beside the scores: over its
complete tasks only, hollow where not complete).{" Dotted: the text-only floor. " + escape(page.floor_note) if page.floor_note else ""}</p>
</section>
<p class="note">{escape(page.examples_note)}</p>
{sections}
{script}
</body>
</html>
"""
