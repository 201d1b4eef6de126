"""AudioCount and AudioCountHard: how many times does one percussive sound occur in a 10 s clip."""

from __future__ import annotations

import functools

import numpy as np

from audioicl.audio import SAMPLE_RATE
from audioicl.errors import AudioICLError
from audioicl.synth import dsp
from audioicl.synth.percussion import OneShot

from .base import TaskSpec, integer_labels, register
from .context import (
    BuildOptions,
    GenContext,
    PlannedEpisode,
    PlannedFile,
    TaskGenerator,
    peak_safe,
    single_clip_episode,
)
from .transcripts import events_text

COUNT_LABELS = integer_labels(1, 8)
MAX_COUNT = 8
CANVAS_SECONDS = 10.0
MIN_GAP_SECONDS = 0.05  # between the end of one occurrence and the start of the next
SNR_DB = (10.0, 15.0)
EPISODES_PER_BACKGROUND = 15  # AudioCountHard episodes 0-14 share background 0, 15-29 background 1, ...
BACKGROUND_SECONDS = 20.0  # each clip takes a random 10 s window of its episode's background
SOUND_BANK_OFFSET = 0  # episode i uses one-shot number i (easy and hard alike, as in the original)
REFERENCE_COUNT = (
    4.5  # --count-background sound-level: the SNR refers to the sound placed this often (the mean)
)


def draw_starts(rng: np.random.Generator, sound_samples: int, count: int, length: int) -> np.ndarray:
    """Start samples of ``count`` non-overlapping copies of a sound at uniformly random positions."""
    gap = int(MIN_GAP_SECONDS * SAMPLE_RATE)
    free = length - count * sound_samples - (count - 1) * gap
    if free < 0:
        raise AudioICLError(
            f"a {sound_samples / SAMPLE_RATE:.2f} s sound does not fit {count} times in the canvas"
        )
    return np.sort(rng.integers(0, free + 1, count)) + np.arange(count) * (sound_samples + gap)


def place_non_overlapping(rng: np.random.Generator, sound: np.ndarray, count: int, length: int) -> np.ndarray:
    """``count`` copies of ``sound`` at uniformly random, non-overlapping positions on a silent canvas."""
    starts = draw_starts(rng, len(sound), count, length)
    canvas = np.zeros(length, dtype=np.float32)
    for start in starts:
        canvas[start : start + len(sound)] += sound
    return canvas


@functools.lru_cache(maxsize=2)  # the builder hands a worker whole blocks of episodes sharing a background
def _background(ctx: GenContext, number: int) -> np.ndarray:
    return ctx.sources.backgrounds.render(ctx.rng("backgrounds", number), BACKGROUND_SECONDS)


def _counts(ctx: GenContext, spec: TaskSpec, index: int, rng: np.random.Generator) -> list[int]:
    """The counts of the episode's clips, demos first; with ``--label-prior balanced`` the query's comes from
    the task-wide balanced list and the demos' are drawn around it (distinct from it and each other, or
    independently)."""
    values = np.arange(1, MAX_COUNT + 1)
    distinct = ctx.options.count_labels == "distinct"
    if ctx.options.label_prior == "original":
        if distinct:
            return [int(v) for v in rng.choice(values, ctx.n_clips, replace=False)]
        return [int(v) for v in rng.integers(1, MAX_COUNT + 1, ctx.n_clips)]
    query = int(ctx.balanced(spec.name, "query", values, index))
    if distinct:
        demos = rng.choice(values[values != query], ctx.n_clips - 1, replace=False)
    else:
        demos = rng.integers(1, MAX_COUNT + 1, ctx.n_clips - 1)
    return [*(int(v) for v in demos), query]


def _render_clip(
    ctx: GenContext, spec: TaskSpec, index: int, slot: int, sound: np.ndarray, count: int, background
) -> np.ndarray:
    rng = ctx.rng(spec.name, index, "clip", slot)
    length = int(CANVAS_SECONDS * SAMPLE_RATE)
    canvas = place_non_overlapping(rng, sound, count, length)
    if background is None:
        return canvas
    noise = background()
    start = int(rng.integers(0, len(noise) - length + 1))
    snr = float(rng.uniform(*SNR_DB))
    reference = (
        None  # the original: the SNR refers to the clip's own hits, so the background follows the count
    )
    if ctx.options.count_background == "sound-level":
        reference = dsp.rms(sound) * float(np.sqrt(REFERENCE_COUNT * len(sound) / length))
    return peak_safe(dsp.mix_at_snr(canvas, noise[start : start + length], snr, signal_rms=reference))


def _transcript(ctx: GenContext, spec: TaskSpec, index: int, slot: int, sound: OneShot, count: int) -> str:
    """The onsets ``_render_clip`` draws first from the clip's generator, and whether a background plays."""
    length = int(CANVAS_SECONDS * SAMPLE_RATE)
    starts = draw_starts(ctx.rng(spec.name, index, "clip", slot), len(sound.wave), count, length)
    onsets = [int(start) / SAMPLE_RATE for start in starts]
    return events_text(
        CANVAS_SECONDS, f"the same {sound.family} sound", onsets, spec.name == "AudioCountHard"
    )


def _episode(hard: bool, ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    rng = ctx.rng(spec.name, index, "episode")
    sound = ctx.sources.one_shots.get(SOUND_BANK_OFFSET + index)
    counts = _counts(ctx, spec, index, rng)
    background = None
    if hard:
        background = functools.partial(_background, ctx, index // EPISODES_PER_BACKGROUND)
    folder = "hard" if hard else "easy"
    independent = ctx.options.count_labels == "independent"
    clips, files = [], []
    for slot, count in enumerate(counts):
        if ctx.options.file_names == "neutral":  # clip number in the episode: demos first, the query last
            path = f"data/audiocount/{folder}/{index + 1:05d}_{sound.name}_c{slot:02d}.wav"
        else:
            stem = f"{index + 1:05d}_{sound.name}" + (f"-{slot}" if independent else "")
            path = f"data/audiocount/{folder}/{stem}_{count}.wav"
        clips.append((path, str(count)))
        render = functools.partial(_render_clip, ctx, spec, index, slot, sound.wave, count, background)
        transcript = functools.partial(_transcript, ctx, spec, index, slot, sound, count)
        files.append(PlannedFile(path, render, transcript))
    return PlannedEpisode(single_clip_episode(ctx, spec, index, clips), tuple(files))


def _check(options: BuildOptions) -> None:
    if options.count_labels == "distinct" and options.max_shots + 1 > MAX_COUNT:
        raise AudioICLError(
            f"--count-labels distinct needs k <= {MAX_COUNT - 1} (there are only {MAX_COUNT} counts); "
            "use --count-labels independent"
        )


_RECIPE = (
    "One percussive one-shot per episode, placed r times (r = 1..8) at uniformly random, non-overlapping "
    f"positions (at least {MIN_GAP_SECONDS * 1000:.0f} ms apart) on a {CANVAS_SECONDS:.0f} s silent canvas; "
    "the label is r. The episode's clips (demos and query) all use its sound; with `--count-labels distinct` "
    "(default, as the original) their counts are distinct, with `independent` they are drawn independently. "
    "Query counts are balanced over 1..8 (`--label-prior original`: drawn as the original)."
)
_HARD_RECIPE = (
    _RECIPE
    + " An environmental background (procedural ambiences, or ESC-50 classes 0-10: animals, insects, rain) is "
    f"mixed in at a random {SNR_DB[0]:.0f}-{SNR_DB[1]:.0f} dB SNR. By default the SNR refers to the episode's "
    f"sound placed {REFERENCE_COUNT} times (the mean count), so the background's level is the same whatever a "
    "clip's count; the original measured it against the clip's own hits (RMS over the whole clip), which makes "
    "the background about 9 dB louder at 8 hits than at 1 (`--count-background original`). Every "
    f"{EPISODES_PER_BACKGROUND} consecutive episodes share one {BACKGROUND_SECONDS:.0f} s background; each clip "
    "takes its own random 10 s window of it."
)
_DIFFERENCES = (
    "Sounds are synthesized drum/percussion one-shots unless `--source one-shots=DIR` is given. Distinct "
    "counts leak the query label by elimination at k = 5 (it is one of the 3 unused values); "
    "`--count-labels independent` removes that. File names number the episode's clips "
    "(`<episode>_<sound>_c<n>.wav`; `--file-names original`: `..._<count>.wav`, which holds the label)."
)
_HARD_DIFFERENCES = (
    _DIFFERENCES
    + " Backgrounds are procedural ambiences unless `--source backgrounds=DIR` (ESC-50) is given."
)
_INSTRUCTION = (
    "Each audio clip below comes with a label. A hidden rule, the same for every clip in this set, maps "
    "the audio to its label: the label is a number determined by what you hear in the clip. Work out the "
    "rule from the labelled examples and apply it to the query clip. Answer with a single integer only."
)

AUDIO_COUNT = register(
    TaskSpec(
        "AudioCount",
        0,
        "count",
        COUNT_LABELS,
        "integer",
        _INSTRUCTION,
        generator=TaskGenerator(
            functools.partial(_episode, False), _RECIPE, _DIFFERENCES, check=_check, cost_ms=23.0
        ),
    )
)
AUDIO_COUNT_HARD = register(
    TaskSpec(
        "AudioCountHard",
        1,
        "count",
        COUNT_LABELS,
        "integer",
        _INSTRUCTION,
        generator=TaskGenerator(
            functools.partial(_episode, True),
            _HARD_RECIPE,
            _HARD_DIFFERENCES,
            check=_check,
            batch=EPISODES_PER_BACKGROUND,
            cost_ms=23.0,
        ),
    )
)
