"""The self-contained HTML page: inline CSS, plots and clips as data URIs, every text escaped."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html import escape

from audioicl import __version__
from audioicl.tasks.chance import Chance

from .examples import Example, ModelAnswer
from .media import EmbeddedClip, png_data_uri
from .tables import describe_chance

AUDIO_MARKER = "<audio>"

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px;
       padding: 1.5rem 2rem 3rem; color: #1d2430; background: #fafbfc; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 2px solid #d8dee6; padding-bottom: 0.2rem; margin-top: 2.2rem; }
.meta, .note { color: #57606a; font-size: 0.9rem; }
nav a { margin-right: 0.8rem; white-space: nowrap; }
img.plot { max-width: 100%; border: 1px solid #d8dee6; background: white; }
table { border-collapse: collapse; font-size: 0.85rem; background: white; }
th, td { border: 1px solid #d8dee6; padding: 0.25rem 0.5rem; }
table.accuracy td { text-align: right; white-space: nowrap; }
table.accuracy tbody th { text-align: left; }
tr.mean { font-weight: 600; background: #f0f3f6; }
.table-wrap { overflow-x: auto; }
article.example { border: 1px solid #d8dee6; border-left: 6px solid #999; border-radius: 4px; background: white;
                  padding: 0.6rem 1rem; margin: 1rem 0; }
article.example.solved { border-left-color: #2da44e; } article.example.unsolved { border-left-color: #cf222e; }
article.example h4 { margin: 0.2rem 0 0.5rem; }
.prompt { white-space: pre-wrap; font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 0.8rem;
          background: #f6f8fa; padding: 0.5rem; border-radius: 4px; }
.prompt audio { height: 2rem; vertical-align: middle; width: 260px; }
.clip-missing { color: #9a6700; background: #fff8c5; padding: 0 0.3rem; border-radius: 3px; }
td.response { font-family: ui-monospace, Menlo, monospace; white-space: pre-wrap; }
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


def anchor(task: str) -> str:
    return "task-" + (re.sub(r"[^A-Za-z0-9_-]", "_", task) or "unnamed")


def render_clip(clip: EmbeddedClip) -> str:
    if clip.data_uri is None:
        return f'<span class="clip-missing">[{escape(clip.path)}: {escape(clip.problem or "")}]</span>'
    return f'<audio controls preload="metadata" title="{escape(clip.path)}" src="{clip.data_uri}"></audio>'


def render_prompt(view: ExampleView) -> str:
    """The prompt with a player in place of each ``<audio>`` marker; clips listed apart if they do not match."""
    prompt, clips = view.example.prompt, view.clips
    if prompt is not None and clips is not None and prompt.count(AUDIO_MARKER) == len(clips):
        pieces = prompt.split(AUDIO_MARKER)
        body = escape(pieces[0]) + "".join(
            render_clip(clip) + escape(piece) for clip, piece in zip(clips, pieces[1:], strict=True)
        )
        return f'<div class="prompt">{body}</div>'
    text = escape(prompt) if prompt is not None else "(prompt not recorded in the results)"
    if clips is None:
        clips_html = '<p class="note">(audio paths not recorded in the results)</p>'
    else:
        clips_html = "<ol>" + "".join(f"<li>{render_clip(c)} {escape(c.path)}</li>" for c in clips) + "</ol>"
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


def render_example(view: ExampleView) -> str:
    example = view.example
    status = "solved" if example.solved else "unsolved"
    rows = "".join(render_answer(a) for a in example.answers)
    return (
        f'<article class="example {status}">'
        f"<h4>{escape(example.id)} · k={example.k} · expected: {escape(str(example.gt))}</h4>"
        f"{render_prompt(view)}"
        '<table class="answers"><thead><tr><th>model</th><th>raw response</th><th>parsed</th>'
        f"<th>verdict</th></tr></thead><tbody>{rows}</tbody></table></article>"
    )


def render_section(section: TaskSection, with_examples: bool) -> str:
    task = section.task or "(no task)"
    parts = [
        f'<section id="{anchor(section.task)}"><h2>{escape(task)}</h2>',
        f'<img class="plot" alt="accuracy vs shots, {escape(task)}" src="{png_data_uri(section.plot_png)}">',
        f'<p class="note">Chance level: {escape(describe_chance(section.chance))}.'
        + (f" Text-only floor: {escape(section.floor)}." if section.floor else "")
        + "</p>",
    ]
    if section.examples:
        parts.append(f"<h3>Example episodes (k={section.examples[0].example.k})</h3>")
        parts.extend(render_example(view) for view in section.examples)
    elif with_examples:
        parts.append('<p class="note">No result lines for this task.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def render_page(page: Page, with_examples: bool) -> str:
    nav = "".join(f'<a href="#{anchor(s.task)}">{escape(s.task or "(no task)")}</a>' for s in page.sections)
    sections = "\n".join(render_section(s, with_examples) for s in page.sections)
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
<nav><a href="#overview">overview</a><a href="#accuracy">table</a>{nav}</nav>
<section id="overview"><h2>Accuracy vs. shots</h2>
<img class="plot" alt="accuracy vs shots, all tasks" src="{png_data_uri(page.overview_png)}">
<p class="note">Bars and bands: {escape(page.interval_label)}. Dashed: chance level (uniform guess). The last panel is the
unweighted mean of the task accuracies a model has at that k.{" Dotted: the text-only floor. " + escape(page.floor_note) if page.floor_note else ""}</p>
</section>
<section id="accuracy"><h2>Accuracy table</h2>
<p class="note">Accuracy with its {escape(page.interval_label)}, per task (rows) and model × shots (columns); hover a cell
for n.</p>
<div class="table-wrap">{page.table_html}</div>
</section>
<p class="note">{escape(page.examples_note)}</p>
{sections}
</body>
</html>
"""
