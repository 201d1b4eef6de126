"""AudioLength (total duration in seconds) and AudioLengthHard (non-silent seconds)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from audioicl.audio import SAMPLE_RATE
from audioicl.synth import dsp

from .base import TaskSpec, integer_labels, register
from .context import GenContext, PlannedEpisode, PlannedFile, TaskGenerator, single_clip_episode
from .transcripts import timeline_text

MAX_SECONDS = 20
CLIPS_PER_LENGTH = 20  # the demo pool: 20 clips per label, drawn from by all episodes (as the original)
NOISE_RMS = 0.02
FRAGMENTS = (2, 10)
MIN_FRAGMENT_SECONDS = 0.03
FRAGMENT_GAIN = (0.8, 2.0)
FRAGMENT_FADE_MS = 3.0
SHORT_SILENCE_SECONDS = (0.2, 1.5)  # AudioLength: one block of 0.2 s .. min(1.5, L/4) s
MAX_HARD_SILENCE = 10  # AudioLengthHard: s whole seconds, 0 .. min(10, L)
FRAGMENT_BANK_OFFSET = 100_000  # fragments come from one-shots 100000..100199
FRAGMENT_BANK_SIZE = 200
# --length-audio clean: the highest sample, and the raised-cosine fades at a silence block and at the edges
PEAK = 0.9
CUT_FADE_MS = 5.0
EDGE_FADE_MS = 10.0


@dataclass(frozen=True)
class LengthClip:
    """One clip of a length task: ``seconds`` long with ``silence`` whole seconds of silence (AudioLengthHard;
    AudioLength's short block is drawn when rendering). ``key`` names its random generator and file."""

    key: tuple
    seconds: int
    silence: int
    label: int


@dataclass(frozen=True)
class _Fragment:
    """One one-shot fragment of a sound bed: bank index, the part of the sound taken, gain and position."""

    sound: int
    offset: int
    length: int
    gain: float
    start: int


@dataclass(frozen=True, eq=False)
class _Layout:
    """Every draw of one length clip, in the generator's order: the unit noise, the fragments, and the
    [start, stop) samples of its block of digital silence."""

    noise: np.ndarray
    fragments: tuple[_Fragment, ...]
    silence: tuple[int, int]


@functools.lru_cache(maxsize=4)  # the builder asks for a new file's audio, then for its transcript
def _layout(ctx: GenContext, task: str, clip: LengthClip) -> _Layout:
    rng = ctx.rng(task, *clip.key)
    n = clip.seconds * SAMPLE_RATE
    noise = rng.standard_normal(n, dtype=np.float32)
    min_len = int(MIN_FRAGMENT_SECONDS * SAMPLE_RATE)
    fragments = []
    for _ in range(int(rng.integers(FRAGMENTS[0], FRAGMENTS[1] + 1))):
        index = FRAGMENT_BANK_OFFSET + int(rng.integers(FRAGMENT_BANK_SIZE))
        sound = ctx.sources.one_shots.get(index).wave
        length = int(rng.integers(min(min_len, len(sound)), min(len(sound), n) + 1))
        offset = int(rng.integers(0, len(sound) - length + 1))
        gain = float(rng.uniform(*FRAGMENT_GAIN))
        fragments.append(_Fragment(index, offset, length, gain, int(rng.integers(0, n - length + 1))))
    if task == "AudioLength":
        low, high = SHORT_SILENCE_SECONDS
        silence = int(rng.uniform(low, min(high, clip.seconds / 4)) * SAMPLE_RATE)
    else:
        silence = clip.silence * SAMPLE_RATE
    start = int(rng.integers(0, n - silence + 1))
    return _Layout(noise, tuple(fragments), (start, start + silence))


def _sound_bed(ctx: GenContext, layout: _Layout) -> np.ndarray:
    """White noise at RMS 0.02 plus 2-10 one-shot fragments (>= 30 ms, gain 0.8-2.0, overlaps allowed).

    ``--length-audio clean`` scales the fragments (never the noise floor) so that no sample passes ``PEAK``;
    the original lets their sum clip at full scale."""
    wave = layout.noise.copy()
    wave *= NOISE_RMS
    clean = ctx.options.length_audio == "clean"
    fragments = np.zeros(len(wave), dtype=np.float32) if clean else wave
    for part in layout.fragments:
        sound = ctx.sources.one_shots.get(part.sound).wave
        fragment = dsp.fade(sound[part.offset : part.offset + part.length], SAMPLE_RATE, FRAGMENT_FADE_MS)
        fragments[part.start : part.start + part.length] += fragment * part.gain
    if not clean:
        return wave
    room = PEAK - float(np.max(np.abs(wave)))
    top = float(np.max(np.abs(fragments)))
    if top > room:
        fragments *= np.float32(room / top)
    return wave + fragments


def _ramp(ms: float) -> np.ndarray:
    """A rising raised-cosine fade sampled at sample centres: no sample of it is zero, so a fade never
    lengthens a block of digital silence."""
    return dsp.raised_cosine(int(round(ms * SAMPLE_RATE / 1000)), centred=True)


def _silence(ctx: GenContext, wave: np.ndarray, start: int, stop: int) -> np.ndarray:
    """Exact digital silence over [start, stop); ``--length-audio clean`` fades the sound out before it and
    in after it, and fades the clip's edges."""
    wave[start:stop] = 0.0
    if ctx.options.length_audio == "clean":
        cut, edge = _ramp(CUT_FADE_MS), _ramp(EDGE_FADE_MS)
        before = wave[max(0, start - len(cut)) : start]
        before *= cut[::-1][len(cut) - len(before) :]
        after = wave[stop : stop + len(cut)]
        after *= cut[: len(after)]
        head = wave[: len(edge)]
        head *= edge[: len(head)]
        tail = wave[max(0, len(wave) - len(edge)) :]
        tail *= edge[::-1][len(edge) - len(tail) :]
    return wave


def _render(ctx: GenContext, spec: TaskSpec, clip: LengthClip) -> np.ndarray:
    layout = _layout(ctx, spec.name, clip)
    wave = _silence(ctx, _sound_bed(ctx, layout), *layout.silence)
    start, stop = layout.silence
    if stop - start == len(wave):  # an all-silent clip (AudioLengthHard's label 0): its own floor
        wave += _silent_floor(ctx.rng(spec.name, *clip.key, "floor"), len(wave))
    return wave


def _silent_floor(rng: np.random.Generator, samples: int) -> np.ndarray:
    """A floor of -1, 0 or +1 least significant bit of 16-bit PCM per sample (about -92 dBFS RMS, far below
    hearing): without it every all-silent clip of a length is the same file of zeros, so a query is
    byte-identical to a demo of its own label and a model that copies scores without listening (issue 53).
    Drawn from a generator of its own (the clip's key and "floor"): every other draw is as it was."""
    return (rng.integers(-1, 2, samples) / 32767.0).astype(np.float32)


def _transcript(ctx: GenContext, spec: TaskSpec, clip: LengthClip) -> str:
    """The clip's duration and its block of digital silence (none when it lasts 0 s)."""
    start, stop = _layout(ctx, spec.name, clip).silence
    if stop - start == clip.seconds * SAMPLE_RATE:
        return timeline_text(clip.seconds, [], silent=True)
    silences = [(start / SAMPLE_RATE, stop / SAMPLE_RATE)] if stop > start else []
    return timeline_text(clip.seconds, silences)


def _silence_for_label(rng: np.random.Generator, label: int) -> int:
    """AudioLengthHard with balanced labels: whole seconds of silence, uniform over what ``label`` allows
    (an all-silent clip, label 0, is 1..10 s long)."""
    if label == 0:
        return int(rng.integers(1, MAX_HARD_SILENCE + 1))
    return int(rng.integers(0, min(MAX_HARD_SILENCE, MAX_SECONDS - label) + 1))


def _labels(hard: bool) -> range:
    return range(0, MAX_SECONDS + 1) if hard else range(1, MAX_SECONDS + 1)


def _pool_clip(ctx: GenContext, spec: TaskSpec, hard: bool, slot: int) -> LengthClip:
    """Demo pool clip ``slot``: ``CLIPS_PER_LENGTH`` per length L (the original), or for AudioLengthHard with
    balanced labels per label (its silence drawn to fit)."""
    group, idx = divmod(slot, CLIPS_PER_LENGTH)
    idx += 1
    if not hard:
        return LengthClip(("pool", group + 1, idx), group + 1, 0, group + 1)
    if ctx.options.label_prior == "balanced":
        label = group
        silence = _silence_for_label(ctx.rng(spec.name, "pool-label", label, idx, "silence"), label)
        return LengthClip(("pool-label", label, idx), label + silence, silence, label)
    seconds = group + 1
    silence = int(
        ctx.rng(spec.name, "pool", seconds, idx, "silence").integers(0, min(MAX_HARD_SILENCE, seconds) + 1)
    )
    return LengthClip(("pool", seconds, idx), seconds, silence, seconds - silence)


def _pool_size(ctx: GenContext, hard: bool) -> int:
    groups = len(_labels(hard)) if hard and ctx.options.label_prior == "balanced" else MAX_SECONDS
    return groups * CLIPS_PER_LENGTH


def _own_query(ctx: GenContext, spec: TaskSpec, hard: bool, index: int, label: int | None) -> LengthClip:
    """A query clip made for episode ``index`` alone; its label is the balanced one, or drawn as the
    original's pool draws it (L uniform, s uniform up to min(10, L))."""
    rng = ctx.rng(spec.name, "query", index, "label")
    if label is None:
        seconds = int(rng.integers(1, MAX_SECONDS + 1))
        silence = int(rng.integers(0, min(MAX_HARD_SILENCE, seconds) + 1)) if hard else 0
        return LengthClip(("query", index), seconds, silence, seconds - silence)
    silence = _silence_for_label(rng, label) if hard else 0
    return LengthClip(("query", index), label + silence, silence, label)


def _episode_clips(hard: bool, ctx: GenContext, spec: TaskSpec, index: int) -> list[LengthClip]:
    """Demos from the shared pool (labels may repeat, clips do not), then the query: from the pool too (the
    original, where queries recur across episodes) or made for this episode (``--queries distinct``)."""
    rng = ctx.rng(spec.name, index, "episode")
    size = _pool_size(ctx, hard)
    label = None
    if ctx.options.label_prior == "balanced":
        label = int(ctx.balanced(spec.name, "query", _labels(hard), index))
    if ctx.options.queries == "distinct":
        slots = rng.choice(size, ctx.n_clips - 1, replace=False)
        query = _own_query(ctx, spec, hard, index, label)
    elif label is None:  # the original
        *slots, last = (int(v) for v in rng.choice(size, ctx.n_clips, replace=False))
        query = _pool_clip(ctx, spec, hard, last)
    else:
        group = label if hard else label - 1
        last = group * CLIPS_PER_LENGTH + int(rng.integers(CLIPS_PER_LENGTH))
        slots = rng.choice(np.delete(np.arange(size), last), ctx.n_clips - 1, replace=False)
        query = _pool_clip(ctx, spec, hard, last)
    return [*(_pool_clip(ctx, spec, hard, int(slot)) for slot in slots), query]


def _path(ctx: GenContext, spec: TaskSpec, hard: bool, clip: LengthClip) -> str:
    folder = "data/audiolength/hard" if hard else "data/audiolength/easy"
    if ctx.options.file_names == "neutral":
        return f"{folder}/{ctx.token(spec.name, *clip.key)}.wav"
    number = clip.key[-1] if clip.key[0] != "query" else f"q{clip.key[1] + 1:04d}"
    if hard:  # the original's <label>_<silence>_<idx>.wav
        return f"{folder}/{clip.label}_{clip.silence}_{number}.wav"
    return f"{folder}/{clip.seconds}_{number}.wav"


def _episode(hard: bool, ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    clips, files = [], []
    for clip in _episode_clips(hard, ctx, spec, index):
        path = _path(ctx, spec, hard, clip)
        clips.append((path, str(clip.label)))
        render, transcript = (functools.partial(f, ctx, spec, clip) for f in (_render, _transcript))
        files.append(PlannedFile(path, render, transcript))
    return PlannedEpisode(single_clip_episode(ctx, spec, index, clips), tuple(files))


_BED = (
    f"white noise at RMS {NOISE_RMS} with {FRAGMENTS[0]}-{FRAGMENTS[1]} random fragments of one-shots "
    f"(>= {MIN_FRAGMENT_SECONDS * 1000:.0f} ms, gain {FRAGMENT_GAIN[0]}-{FRAGMENT_GAIN[1]}, overlaps allowed; "
    f"scaled so that no sample passes {PEAK}, where the original clips at full scale)"
)
_CUTS = (
    f"{CUT_FADE_MS:.0f} ms fades into and out of the silence and {EDGE_FADE_MS:.0f} ms fades at the clip's "
    "edges (`--length-audio original`: hard cuts)"
)
_POOLS = (
    f"Demos come from a shared pool of {CLIPS_PER_LENGTH} clips per label (labels may repeat within an "
    "episode); each query clip is made for its episode alone (`--queries original`: queries come from the "
    "pool too and recur across episodes). Query labels are balanced over the label space "
    "(`--label-prior original`: drawn as the original)."
)
_RECIPE = (
    f"A clip of L whole seconds (L = 1..{MAX_SECONDS}): {_BED}, and one block of exact digital silence of "
    f"{SHORT_SILENCE_SECONDS[0]} s to min({SHORT_SILENCE_SECONDS[1]}, L/4) s at a random offset, with {_CUTS}. "
    f"The label is L. {_POOLS}"
)
_HARD_RECIPE = (
    f"A clip of L whole seconds: {_BED}, with a block of s whole seconds of exact digital silence at a random "
    f"offset and {_CUTS}. The label is L - s, the non-silent seconds (an all-silent clip has label 0). The "
    f"original draws L = 1..{MAX_SECONDS} and s = 0..min({MAX_HARD_SILENCE}, L), which makes small labels "
    f"common (label 1 is 12 % of queries); by default the label is drawn uniformly over 0..{MAX_SECONDS} and s "
    f"uniformly over what it allows (up to {MAX_HARD_SILENCE}, L <= {MAX_SECONDS}), for demos and queries. "
    f"{_POOLS}"
)
_DIFFERENCES = (
    "Silence is exact digital zeros and the noise floor covers only the non-silent part. Fragments come from "
    "the synthesized one-shot bank unless `--source one-shots=DIR` is given. No padding: a clip lasts "
    "exactly its L seconds (AudioLength's label; AudioLengthHard's label is L - s), where the original's "
    "inference padded clips to the longest in the batch. File names are opaque tokens (`--file-names "
    "original`: `<L>_<idx>.wav`, `<L-s>_<s>_<idx>.wav`, which hold the label)."
)

_INSTRUCTION = (
    "Each audio clip below comes with a label. A hidden rule, the same for every clip in this set, maps "
    "the audio to its label: the label is a whole number that depends on the timing of the clip. Work out "
    "the rule from the labelled examples and apply it to the query clip. Answer with a single integer only."
)

AUDIO_LENGTH = register(
    TaskSpec(
        "AudioLength",
        3,
        "length",
        integer_labels(1, 20),
        "integer",
        _INSTRUCTION,
        generator=TaskGenerator(functools.partial(_episode, False), _RECIPE, _DIFFERENCES, cost_ms=11.0),
    )
)
AUDIO_LENGTH_HARD = register(
    TaskSpec(
        "AudioLengthHard",
        4,
        "length",
        integer_labels(0, 20),
        "integer",
        _INSTRUCTION,
        generator=TaskGenerator(functools.partial(_episode, True), _HARD_RECIPE, _DIFFERENCES, cost_ms=11.0),
    )
)
