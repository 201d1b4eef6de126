"""AudioLength (total duration in seconds) and AudioLengthHard (non-silent seconds)."""

from __future__ import annotations

import functools

import numpy as np

from ..audio import SAMPLE_RATE
from ..synth import dsp
from .base import TaskSpec, integer_labels, register
from .context import GenContext, PlannedEpisode, PlannedFile, TaskGenerator, single_clip_episode

MAX_SECONDS = 20
CLIPS_PER_LENGTH = 20  # the pool: clips <L>_<1..20> for every L, drawn from by all episodes (as the original)
NOISE_RMS = 0.02
FRAGMENTS = (2, 10)
MIN_FRAGMENT_SECONDS = 0.03
FRAGMENT_GAIN = (0.8, 2.0)
FRAGMENT_FADE_MS = 3.0
SHORT_SILENCE_SECONDS = (0.2, 1.5)  # AudioLength: one block of 0.2 s .. min(1.5, L/4) s
MAX_HARD_SILENCE = 10  # AudioLengthHard: s whole seconds, 0 .. min(10, L)
FRAGMENT_BANK_OFFSET = 100_000  # fragments come from one-shots 100000..100199
FRAGMENT_BANK_SIZE = 200


def _sound_bed(ctx: GenContext, rng: np.random.Generator, seconds: int) -> np.ndarray:
    """White noise at RMS 0.02 plus 2-10 one-shot fragments (>= 30 ms, gain 0.8-2.0, overlaps allowed)."""
    n = seconds * SAMPLE_RATE
    wave = rng.standard_normal(n, dtype=np.float32)
    wave *= NOISE_RMS
    min_len = int(MIN_FRAGMENT_SECONDS * SAMPLE_RATE)
    for _ in range(int(rng.integers(FRAGMENTS[0], FRAGMENTS[1] + 1))):
        sound = ctx.sources.one_shots.get(FRAGMENT_BANK_OFFSET + int(rng.integers(FRAGMENT_BANK_SIZE))).wave
        length = int(rng.integers(min(min_len, len(sound)), min(len(sound), n) + 1))
        offset = int(rng.integers(0, len(sound) - length + 1))
        gain = float(rng.uniform(*FRAGMENT_GAIN))
        fragment = dsp.fade(sound[offset : offset + length], SAMPLE_RATE, FRAGMENT_FADE_MS) * gain
        start = int(rng.integers(0, n - length + 1))
        wave[start : start + length] += fragment
    return wave


def _render_easy(ctx: GenContext, spec: TaskSpec, seconds: int, idx: int) -> np.ndarray:
    rng = ctx.rng(spec.name, "pool", seconds, idx)
    wave = _sound_bed(ctx, rng, seconds)
    low, high = SHORT_SILENCE_SECONDS
    silence = int(rng.uniform(low, min(high, seconds / 4)) * SAMPLE_RATE)
    start = int(rng.integers(0, len(wave) - silence + 1))
    wave[start : start + silence] = 0.0
    return wave


def _hard_silence(ctx: GenContext, spec: TaskSpec, seconds: int, idx: int) -> int:
    """Whole seconds of silence in pool clip (seconds, idx): part of its name, so drawn apart from its audio."""
    return int(
        ctx.rng(spec.name, "pool", seconds, idx, "silence").integers(0, min(MAX_HARD_SILENCE, seconds) + 1)
    )


def _render_hard(ctx: GenContext, spec: TaskSpec, seconds: int, idx: int) -> np.ndarray:
    rng = ctx.rng(spec.name, "pool", seconds, idx)
    wave = _sound_bed(ctx, rng, seconds)
    silence = _hard_silence(ctx, spec, seconds, idx) * SAMPLE_RATE
    start = int(rng.integers(0, len(wave) - silence + 1))
    wave[start : start + silence] = 0.0
    return wave


def _episode(hard: bool, ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    """Demos and query drawn independently from the pool (labels may repeat, clips do not)."""
    rng = ctx.rng(spec.name, index, "episode")
    slots = rng.choice(MAX_SECONDS * CLIPS_PER_LENGTH, ctx.n_clips, replace=False)
    clips, files = [], []
    for slot in slots:
        seconds, idx = int(slot) // CLIPS_PER_LENGTH + 1, int(slot) % CLIPS_PER_LENGTH + 1
        if hard:
            silence = _hard_silence(ctx, spec, seconds, idx)
            label = seconds - silence
            path = f"data/audiolength/hard/{label}_{silence}_{idx}.wav"
            render = functools.partial(_render_hard, ctx, spec, seconds, idx)
        else:
            label = seconds
            path = f"data/audiolength/easy/{seconds}_{idx}.wav"
            render = functools.partial(_render_easy, ctx, spec, seconds, idx)
        clips.append((path, str(label)))
        files.append(PlannedFile(path, render))
    return PlannedEpisode(single_clip_episode(ctx, spec, index, clips), tuple(files))


_BED = (
    f"white noise at RMS {NOISE_RMS} with {FRAGMENTS[0]}-{FRAGMENTS[1]} random fragments of one-shots "
    f"(>= {MIN_FRAGMENT_SECONDS * 1000:.0f} ms, gain {FRAGMENT_GAIN[0]}-{FRAGMENT_GAIN[1]}, overlaps allowed; "
    "samples beyond full scale clip)"
)
_RECIPE = (
    f"A clip of L whole seconds (L = 1..{MAX_SECONDS}): {_BED}, and one block of exact digital silence of "
    f"{SHORT_SILENCE_SECONDS[0]} s to min({SHORT_SILENCE_SECONDS[1]}, L/4) s at a random offset. The label is L. "
    f"Clips come from a pool of {CLIPS_PER_LENGTH} per length (`<L>_<idx>.wav`); each episode draws distinct "
    "clips, so labels may repeat."
)
_HARD_RECIPE = (
    f"A clip of L whole seconds (L = 1..{MAX_SECONDS}): {_BED}, with a block of s whole seconds of exact "
    f"digital silence (s = 0..min({MAX_HARD_SILENCE}, L), at a random offset). The label is L - s, the "
    "non-silent seconds (an all-silent clip has label 0). Pool files are `<L-s>_<s>_<idx>.wav`."
)
_DIFFERENCES = (
    "Silence is exact digital zeros and the noise floor covers only the non-silent part. Fragments come from "
    "the synthesized one-shot bank unless `--source one-shots=DIR` is given. No padding: a clip's duration is "
    "exactly its label's (the original's inference padded clips to the longest in the batch)."
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
        generator=TaskGenerator(functools.partial(_episode, False), _RECIPE, _DIFFERENCES, cost_ms=6.6),
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
        generator=TaskGenerator(functools.partial(_episode, True), _HARD_RECIPE, _DIFFERENCES, cost_ms=6.6),
    )
)
