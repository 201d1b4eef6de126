"""AudioRemap: spell a sequence of two reference sounds with the letters the references carry."""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass

import numpy as np

from audioicl.audio import SAMPLE_RATE
from audioicl.errors import AudioICLError
from audioicl.records import Clip, Demo, Episode, Query
from audioicl.synth import dsp
from audioicl.synth.percussion import OneShot

from .base import LabelSpace, TaskSpec, episode_id, register
from .context import GenContext, PlannedEpisode, PlannedFile, TaskGenerator
from .transcripts import sounds_text

PATTERNS = ("AAB", "ABA", "BAB", "BAA", "ABB", "BBA")
MIX_GAP_SECONDS = 0.15  # silence between the three sounds of a MIX
SOUND_BANK_OFFSET = 400_000  # A/B sounds are drawn from one-shots 400000..401999
SOUND_BANK_SIZE = 2000
ONE_SHOT_FOLDER = "data/one_shot/one_shot_percussive_sounds"
CUT_FADE_MS = 10.0  # --remap-lengths equal: fade-out where the longer sound of a pair is cut


@dataclass(frozen=True)
class Pair:
    """Two different reference sounds and the letters they carry. With ``equal`` (``--remap-lengths
    equal``) the pair's A and B are cut to one length and set to one RMS, so that a MIX's length and level
    are the same for every pattern; their files are then the pair's own."""

    a: OneShot
    b: OneShot
    letters: tuple[str, str]
    tag: str  # names the files made for this pair
    equal: bool

    def path(self, sound: OneShot) -> str:
        suffix = f"__{self.tag}" if self.equal else ""
        return f"{ONE_SHOT_FOLDER}/{sound.family}/{sound.name}{suffix}.wav"

    def spell(self, pattern: str) -> str:
        return "".join(self.letters[0] if c == "A" else self.letters[1] for c in pattern)

    def waves(self) -> tuple[np.ndarray, np.ndarray]:
        return equalized(self.a.wave, self.b.wave) if self.equal else (self.a.wave, self.b.wave)


def equalized(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` cut to the shorter one's length (the longer fades out where it is cut) and the
    louder scaled down to the quieter one's RMS."""
    n = min(len(a), len(b))
    fade = dsp.raised_cosine(min(int(CUT_FADE_MS * SAMPLE_RATE / 1000), n // 4))[::-1]

    def cut(x: np.ndarray) -> np.ndarray:
        y = np.array(x[:n], dtype=np.float32)
        if len(x) > n and len(fade):
            y[n - len(fade) :] *= fade
        return y

    a, b = cut(a), cut(b)
    level = min(dsp.rms(a), dsp.rms(b))
    return a * np.float32(level / dsp.rms(a)), b * np.float32(level / dsp.rms(b))


def _draw_pair(ctx: GenContext, rng: np.random.Generator, tag: str) -> Pair:
    bank = ctx.sources.one_shots
    first = bank.get(SOUND_BANK_OFFSET + int(rng.integers(SOUND_BANK_SIZE)))
    for _ in range(100):
        second = bank.get(SOUND_BANK_OFFSET + int(rng.integers(SOUND_BANK_SIZE)))
        if (second.family, second.name) != (first.family, first.name):
            break
    else:
        raise AudioICLError("AudioRemap needs at least two different one-shots")
    letters = rng.choice(list(string.ascii_uppercase), 2, replace=False)
    equal = ctx.options.remap_lengths == "equal"
    return Pair(first, second, (str(letters[0]), str(letters[1])), tag, equal)


def _render_mix(pair: Pair, pattern: str) -> np.ndarray:
    gap = np.zeros(int(MIX_GAP_SECONDS * SAMPLE_RATE), dtype=np.float32)
    a, b = pair.waves()
    sounds = [a if c == "A" else b for c in pattern]
    return np.concatenate([sounds[0], gap, sounds[1], gap, sounds[2]]).astype(np.float32)


def _reference(pair: Pair, which: int) -> np.ndarray:
    return np.asarray(pair.waves()[which])


def _mix_path(ctx: GenContext, pair: Pair, pattern: str) -> str:
    if ctx.options.file_names == "neutral":  # a token per (pair, pattern): one file per MIX, as the original
        return f"data/audioremap/MIX__{pair.tag}__{ctx.token('AudioRemap', pair.tag, pattern)}.wav"
    return f"data/audioremap/MIX__{pattern}__{pair.tag}.wav"


def _clips(
    ctx: GenContext, pair: Pair, pattern: str, answer_shown: bool
) -> tuple[tuple[Clip, ...], list[PlannedFile]]:
    mix = _mix_path(ctx, pair, pattern)
    clips = (
        Clip(pair.path(pair.a), pair.letters[0], "A"),
        Clip(pair.path(pair.b), pair.letters[1], "B"),
        Clip(mix, pair.spell(pattern) if answer_shown else None, "MIX"),
    )
    names = {"A": ctx.sound_name(pair.a), "B": ctx.sound_name(pair.b)}  # which sound plays, not its letter

    def transcript(which: str) -> functools.partial[str]:
        return functools.partial(sounds_text, tuple(names[c] for c in which))

    files = [
        PlannedFile(pair.path(pair.a), functools.partial(_reference, pair, 0), transcript("A")),
        PlannedFile(pair.path(pair.b), functools.partial(_reference, pair, 1), transcript("B")),
        PlannedFile(mix, functools.partial(_render_mix, pair, pattern), transcript(pattern)),
    ]
    return clips, files


def _demo_patterns(rng: np.random.Generator, k: int) -> list[str]:
    """Distinct patterns for up to 6 demos (beyond 6, every pattern before any repeats)."""
    order: list[str] = []
    while len(order) < k:
        order += [PATTERNS[int(i)] for i in rng.permutation(len(PATTERNS))]
    return order[:k]


def _episode(ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    rng = ctx.rng(spec.name, index, "episode")
    k = ctx.options.max_shots
    base_tag = f"ab{index + 1:04d}"
    if ctx.options.remap_demos == "same-pair":  # the original: one pair per episode, MIX files shared
        pair = _draw_pair(ctx, ctx.rng(spec.name, index, "pair"), base_tag)
        demo_pairs, query_pair = [pair] * k, pair
    else:  # ours: every demo and the query has its own pair and letters; no MIX file is shown twice
        demo_pairs = [
            _draw_pair(ctx, ctx.rng(spec.name, index, "demo", j), f"{base_tag}d{j + 1}") for j in range(k)
        ]
        query_pair = _draw_pair(ctx, ctx.rng(spec.name, index, "query"), f"{base_tag}q")
    demos, files = [], []
    for pair, pattern in zip(demo_pairs, _demo_patterns(rng, k), strict=True):
        clips, demo_files = _clips(ctx, pair, pattern, answer_shown=True)
        demos.append(Demo(clips, multi=True))
        files += demo_files
    if ctx.options.label_prior == "balanced":
        query_pattern = ctx.balanced(spec.name, "query", PATTERNS, index)
    else:
        query_pattern = PATTERNS[int(rng.integers(len(PATTERNS)))]
    query_clips, query_files = _clips(ctx, query_pair, query_pattern, answer_shown=False)
    files += query_files
    query = Query(query_clips, label=query_pair.spell(query_pattern), multi=True)
    episode = Episode(episode_id(spec, index, ctx.options.episodes), spec.name, tuple(demos), query)
    return PlannedEpisode(episode, tuple(files))


_RECIPE = (
    "Multi-clip: reference clip A and reference clip B (two different one-shots, each labelled with a letter), "
    f"then MIX, the three sounds of a pattern ({', '.join(PATTERNS)}) back to back with "
    f"{MIX_GAP_SECONDS * 1000:.0f} ms gaps. The label spells the pattern with the references' letters (A→P, "
    'B→B makes ABA "PBP"). Demo patterns are distinct; the query\'s pattern is balanced over the six across '
    "episodes (`--label-prior original`: drawn independently) and its MIX carries no label. A and B are cut to "
    f"the shorter one's length ({CUT_FADE_MS:.0f} ms fade-out) and set to the same RMS, so a MIX's length and "
    "level are the same for every pattern (`--remap-lengths original`: the one-shots as they are, where the "
    "MIX's length tells how many A's it holds)."
)
_DIFFERENCES = (
    "Default (`--remap-demos own-pair`): every demo and the query has its own A/B pair and its own letter pair, "
    "so the rule must be applied and no label can be copied. The original used one pair per episode, and its "
    "query MIX file was often one of the demos' MIX files (answer shown: 39-248 of 300 episodes for k = 1..5); "
    "`--remap-demos same-pair` reproduces that construction, leak included. Episodes are nested across k here "
    "(the original drew them afresh per k). MIX files are named by pair and an opaque token "
    "(`--file-names original`: `MIX__<pattern>__<pair>.wav`, the answer's pattern)."
)

_INSTRUCTION = (
    "Each example below has two reference sounds, A and B, each labelled with a letter, and a mix of three "
    "sounds played one after another, each of them A or B. The label of the mix spells its three sounds in "
    "order with the letters of the references. Learn the rule from the labelled examples and apply it to the "
    "query mix. Answer with exactly three uppercase letters only."
)

AUDIO_REMAP = register(
    TaskSpec(
        "AudioRemap",
        7,
        "remap",
        LabelSpace("three uppercase letters, two distinct", pattern=r"(?=[A-Z]{3}$)(?=.*(.).*(?!\1)[A-Z]).*"),
        "letters",
        _INSTRUCTION,
        multi_clip=True,
        clip_labels={
            "A": LabelSpace("one uppercase letter", pattern=r"[A-Z]"),
            "B": LabelSpace("one uppercase letter", pattern=r"[A-Z]"),
            "MIX": LabelSpace("three uppercase letters", pattern=r"[A-Z]{3}"),
        },
        generator=TaskGenerator(_episode, _RECIPE, _DIFFERENCES, cost_ms=24.0),
    )
)
