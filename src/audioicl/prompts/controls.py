"""Study conditions as transformations of a prompt, made before it reaches any backend.

Each control takes the prompt ``build_prompt`` made for an episode and returns the prompt of the condition
(the chat laid out again in its own frame, and the audio paths kept in step), so every backend, the
built-in solvers included, gets every condition for free. What a control changes, and what it tells:

- ``random-labels``: every demo label redrawn from the task's label space (uniformly; not shuffled among
  the demos, which would keep AudioCount's elimination shortcut). A model that learns the rule from the
  labels falls towards its floor; one that only uses the format of the labels does not.
- ``no-audio``: every clip removed, tags and labels kept: the model's own text-only floor.
- ``noise-query``: the query clip replaced by ``NOISE_SECONDS`` of white noise (not silence, and not as
  long as the clip: both carry answers in the length tasks). A model that listens to the query falls to
  chance.
- ``swapped-query``: the query clip taken from another episode of the same task, the label unchanged: what
  a model scores from the demos and the prompt alone, with real audio in the query's place.
- ``transcript``: every clip replaced by a text transcript of what it contains (``tasks.transcripts``): the same
  rule learned from text with perfect perception.

Randomness (redrawn labels, noise, the partner episode) comes from the run seed and the episode id, never
from k, so a condition is nested across k like the episodes: demo 2's redrawn label is the same at k = 2
and k = 5.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from audioicl.audio import SAMPLE_RATE
from audioicl.dataset.sidecar import Sidecar
from audioicl.errors import AudioICLError
from audioicl.perception.transcribe import Heard, perceive
from audioicl.records import Episode
from audioicl.registry import Registry
from audioicl.seeding import rng_for
from audioicl.synth import dsp
from audioicl.synth.morse import WORDS_5
from audioicl.tasks import TASKS
from audioicl.tasks.remap import PATTERNS

from .build import Prompt, with_items
from .chat import AudioPart, PromptItem
from .clips import NOISE_PATH, ClipStore

NOISE_SECONDS = 5.0
NOISE_RMS = 0.1
NOISE_FADE_MS = 10.0


@dataclass(frozen=True)
class ControlContext:
    """What a control may use besides the prompt: the run seed, the episode the prompt shows, the dataset's
    clips, the partner episode (``swapped-query``: another episode of the same task in the same k file) and
    the built transcripts (``transcript``: None when the dataset has none, then all are perceived)."""

    seed: int
    episode: Episode
    clips: ClipStore
    partner: Episode | None = None
    sidecar: Sidecar | None = None


Transform = Callable[[Prompt, ControlContext], Prompt]


@dataclass(frozen=True)
class Control:
    name: str
    summary: str  # one line: what it changes
    transform: Transform

    def apply(self, prompt: Prompt, context: ControlContext) -> Prompt:
        return self.transform(prompt, context)


CONTROLS: Registry[Control] = Registry("control")


def register_control(name: str, summary: str) -> Callable[[Transform], Transform]:
    def decorate(transform: Transform) -> Transform:
        CONTROLS.add(name, Control(name, summary, transform))
        return transform

    return decorate


def _relaid(prompt: Prompt, items: Sequence[PromptItem], paths: Sequence[str] | None = None) -> Prompt:
    return Prompt(with_items(prompt.chat, items), tuple(paths) if paths is not None else prompt.audio_paths)


def _target(prompt: Prompt) -> int:
    """Position of the clip the prompt asks about (the query's last clip)."""
    for position in range(len(prompt.chat.items) - 1, -1, -1):
        item = prompt.chat.items[position]
        if item.kind == "query" and item.label is None:
            return position
    raise AudioICLError(f"the {prompt.chat.task} prompt has no query clip to answer")


# --------------------------------------------------------------------------- random labels


def _is_answer(task: str, item: PromptItem, last_of_demo: bool) -> bool:
    """Whether a demo clip's label is an answer (AudioRemap's A/B letters and such are not): in the
    task's label space, or, for a task the toolkit does not know, the demo's last clip."""
    if item.kind != "demo" or item.label is None:
        return False
    if task in TASKS:
        return item.label in TASKS.get(task).labels
    return last_of_demo


def draw_label(task: str, rng: np.random.Generator, demo: Sequence[PromptItem], shown: Sequence[str]) -> str:
    """A label drawn uniformly from the task's label space: its values; for AudioRemap the six patterns
    spelled with this demo's reference letters; for MorseCode the word list; for an unknown task the
    labels the demos show."""
    spec = TASKS.get(task) if task in TASKS else None
    if spec is not None and spec.labels.values:
        return str(rng.choice(spec.labels.values))
    if task == "AudioRemap":
        letters = {item.role: item.label for item in demo if item.role in ("A", "B") and item.label}
        a, b = letters.get("A", "A"), letters.get("B", "B")
        return "".join(a if c == "A" else b for c in PATTERNS[int(rng.integers(len(PATTERNS)))])
    if task == "MorseCode":
        return str(WORDS_5[int(rng.integers(len(WORDS_5)))])
    return str(rng.choice(sorted(set(shown)))) if shown else ""


@register_control("random-labels", "every demo label redrawn from the task's label space")
def random_labels(prompt: Prompt, context: ControlContext) -> Prompt:
    items = list(prompt.chat.items)
    demos: dict[int, list[int]] = defaultdict(list)
    for position, item in enumerate(items):
        if item.kind == "demo":
            demos[item.index].append(position)
    shown = [item.label for item in items if item.kind == "demo" and item.label is not None]
    for index, positions in demos.items():
        demo = [items[p] for p in positions]
        for position in positions:
            item = items[position]
            if _is_answer(prompt.chat.task, item, position == positions[-1]):
                rng = rng_for(context.seed, "random-labels", context.episode.id, index, item.role or "")
                items[position] = replace(item, label=draw_label(prompt.chat.task, rng, demo, shown))
    return _relaid(prompt, items)


# --------------------------------------------------------------------------- no audio


@register_control("no-audio", "every clip removed, tags and labels kept")
def no_audio(prompt: Prompt, context: ControlContext) -> Prompt:
    return _relaid(prompt, [replace(item, audio=None, transcript=None) for item in prompt.chat.items])


# --------------------------------------------------------------------------- the query's audio


def noise_clip(seed: int, episode_id: str) -> AudioPart:
    """``NOISE_SECONDS`` of white noise at RMS ``NOISE_RMS`` with short fades, the same at every k."""
    rng = rng_for(seed, "noise-query", episode_id)
    wave = rng.standard_normal(int(NOISE_SECONDS * SAMPLE_RATE)).astype(np.float32) * np.float32(NOISE_RMS)
    return AudioPart.of(dsp.fade(wave, SAMPLE_RATE, NOISE_FADE_MS), SAMPLE_RATE)


@register_control("noise-query", f"the query clip replaced by {NOISE_SECONDS:g} s of white noise")
def noise_query(prompt: Prompt, context: ControlContext) -> Prompt:
    at = _target(prompt)
    items, paths = list(prompt.chat.items), list(prompt.audio_paths)
    items[at] = replace(items[at], audio=noise_clip(context.seed, context.episode.id))
    paths[at] = (
        f"{NOISE_PATH}/{context.episode.id}"  # its own noise: a clip of its own for the scorer's clusters
    )
    return _relaid(prompt, items, paths)


def swap_partners(episodes: Sequence[Episode], seed: int) -> dict[str, Episode]:
    """Episode id → the episode whose query it hears under ``swapped-query``: per task, the ids in a seeded
    random cycle, each taking the next one's query (never its own; alone in its task, none). The cycle
    depends on the task's ids only, so it is the same in every k file of a nested dataset."""
    by_task: dict[str, dict[str, Episode]] = defaultdict(dict)
    for episode in episodes:
        by_task[episode.task][episode.id] = episode
    partners: dict[str, Episode] = {}
    for task, members in by_task.items():
        ids = sorted(members)
        if len(ids) < 2:
            continue
        cycle = [ids[int(i)] for i in rng_for(seed, "swapped-query", task).permutation(len(ids))]
        for position, episode_id in enumerate(cycle):
            partners[episode_id] = members[cycle[(position + 1) % len(cycle)]]
    return partners


@register_control("swapped-query", "the query clip taken from another episode of the same task")
def swapped_query(prompt: Prompt, context: ControlContext) -> Prompt:
    if context.partner is None:
        raise AudioICLError(
            f"swapped-query: no other episode of {context.episode.task} to take a query from",
            id=context.episode.id,
        )
    at = _target(prompt)
    path = context.partner.query.target.audio_path
    items, paths = list(prompt.chat.items), list(prompt.audio_paths)
    items[at] = replace(items[at], audio=context.clips.load(path))
    paths[at] = path
    return _relaid(prompt, items, paths)


# --------------------------------------------------------------------------- transcripts


def _group(item: PromptItem) -> int:
    return {"bank": -1, "query": 0}.get(item.kind, item.index)


def transcribe(prompt: Prompt, sidecar: Sidecar | None) -> list[str]:
    """Each item's transcript: the builder's (by audio path) where the sidecar has it, else perceived from
    the audio (all of an episode's missing ones together: identities are numbered per episode)."""
    built: Mapping[str, str] = sidecar.transcripts if sidecar is not None else {}
    items = prompt.chat.items
    missing = [p for p, path in enumerate(prompt.audio_paths) if path not in built]
    heard = []
    for position in missing:
        item = items[position]
        if item.audio is None:
            raise AudioICLError(f"transcript: clip {prompt.audio_paths[position]} has no audio to transcribe")
        heard.append(Heard(item.audio.wave, item.audio.sr, item.audio.digest, _group(item), item.role))
    perceived = dict(zip(missing, perceive(prompt.chat.task, heard), strict=True))
    return [perceived[p] if p in perceived else built[path] for p, path in enumerate(prompt.audio_paths)]


@register_control("transcript", "every clip replaced by a text transcript of what it contains")
def transcript(prompt: Prompt, context: ControlContext) -> Prompt:
    texts = transcribe(prompt, context.sidecar)
    pairs = zip(prompt.chat.items, texts, strict=True)
    return _relaid(prompt, [replace(item, audio=None, transcript=text) for item, text in pairs])
