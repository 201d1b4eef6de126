"""What a task generator gets (build options, sound sources) and what it returns (an episode and its files).

A generator plans one episode from ``rng_for(seed, task, ...)`` keyed by stable names; every file it plans
comes with a ``render`` function that draws from its own named generator too, so any subset of files can be
rendered in any order, by any worker, and give the same bytes (the builder skips files that already exist).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from dataclasses import replace as dataclasses_replace
from typing import Literal

import numpy as np

from audioicl.records import Clip, Demo, Episode, Query
from audioicl.seeding import derive_seed, rng_for
from audioicl.sources.banks import SoundSources
from audioicl.synth.percussion import OneShot

from .base import TaskSpec, episode_id

CountLabels = Literal["distinct", "independent"]
RemapDemos = Literal["own-pair", "same-pair"]
RemapLengths = Literal["equal", "original"]
AnomalyOrder = Literal["shuffled", "original"]
Queries = Literal["distinct", "original"]
LabelPrior = Literal["balanced", "original"]
CountBackground = Literal["sound-level", "original"]
LengthAudio = Literal["clean", "original"]
FileNames = Literal["neutral", "original"]


@dataclass(frozen=True)
class BuildOptions:
    """Every parameter that changes what a build writes (``--workers`` does not). The construction options
    (``CONSTRUCTION``) default to ours; each has the original benchmark's construction as a value."""

    seed: int = 0
    episodes: int = 300
    shots: tuple[int, ...] = (1, 2, 3, 4, 5)
    tasks: tuple[str, ...] = ()
    count_labels: CountLabels = "distinct"
    remap_demos: RemapDemos = "own-pair"
    remap_lengths: RemapLengths = "equal"
    anomaly_order: AnomalyOrder = "shuffled"
    queries: Queries = "distinct"
    label_prior: LabelPrior = "balanced"
    count_background: CountBackground = "sound-level"
    length_audio: LengthAudio = "clean"
    file_names: FileNames = "neutral"
    sources: tuple[tuple[str, str], ...] = ()  # (kind, absolute folder)

    @property
    def max_shots(self) -> int:
        return max(self.shots)

    def to_json(self) -> dict:
        out = asdict(self)
        out["shots"] = list(self.shots)
        out["tasks"] = list(self.tasks)
        out["sources"] = {kind: folder for kind, folder in self.sources}
        return out


@dataclass(frozen=True)
class Choice:
    """One construction option: the ``BuildOptions`` field, its values (the first is the default), the value
    that reproduces the original benchmark, and what each value builds (one sentence, for the card)."""

    field: str
    values: tuple[str, ...]
    original: str
    help: str
    builds: dict[str, str]

    @property
    def flag(self) -> str:
        return "--" + self.field.replace("_", "-")


CONSTRUCTION: tuple[Choice, ...] = (
    Choice(
        "count_labels",
        ("distinct", "independent"),
        "distinct",
        "AudioCount(Hard): counts distinct within an episode (at k = 5 the query is one of 3 unused), or drawn "
        "independently",
        {
            "distinct": "AudioCount(Hard): the counts of an episode's clips are distinct (as the original); at "
            "k = 5 the query is one of the 3 unused counts.",
            "independent": "AudioCount(Hard): counts drawn independently (labels may repeat in an episode).",
        },
    ),
    Choice(
        "remap_demos",
        ("own-pair", "same-pair"),
        "same-pair",
        "AudioRemap: every demo its own A/B pair, or one pair per episode (the query MIX is often a demo's)",
        {
            "own-pair": "AudioRemap: every demo and the query has its own A/B pair and letters; no MIX is shown "
            "twice.",
            "same-pair": "AudioRemap: one A/B pair per episode (original); the query MIX is often a demo's MIX.",
        },
    ),
    Choice(
        "remap_lengths",
        ("equal", "original"),
        "original",
        "AudioRemap: A and B cut to one length and loudness, or the one-shots as they are",
        {
            "equal": "AudioRemap: the A and B of a pair are cut to the same length (fade-out) and the same RMS, "
            "so the MIX's length and level are those of every pattern.",
            "original": "AudioRemap: A and B as the one-shots are; the MIX's length tells how many A's it "
            "holds (a duration-only solver scores 33 %).",
        },
    ),
    Choice(
        "anomaly_order",
        ("shuffled", "original"),
        "original",
        "AnomalyDetect: Normal/Anomalous order drawn per demo, or always Normal first",
        {
            "shuffled": "AnomalyDetect: each demo pair is shown Normal-Anomalous or Anomalous-Normal at random.",
            "original": "AnomalyDetect: every demo pair is shown Normal then Anomalous, so the last label "
            "before the query is always Anomalous.",
        },
    ),
    Choice(
        "queries",
        ("distinct", "original"),
        "original",
        "AudioLength(Hard), MorseCode, AnomalyDetect: each query clip in one episode only, or drawn from "
        "shared pools (queries recur)",
        {
            "distinct": "AudioLength(Hard), MorseCode, AnomalyDetect: no query clip is used by a second episode "
            "of its task, as query or demo (every episode is an independent test).",
            "original": "AudioLength(Hard), MorseCode, AnomalyDetect: queries and demos come from shared pools, "
            "so query clips recur across episodes.",
        },
    ),
    Choice(
        "label_prior",
        ("balanced", "original"),
        "original",
        "query labels balanced over each task's label space, or drawn as the original recipe draws them",
        {
            "balanced": "Query labels are balanced: every label of a task equally often (counts, lengths, "
            "non-silent seconds, remap patterns, Normal/Anomalous, machine types), operator results uniform "
            "over the values the episode's operator can give; AudioLengthHard demos uniform over labels too.",
            "original": "Labels follow the original recipe's draws (e.g. AudioLengthHard label 1 is 12 % of "
            "queries).",
        },
    ),
    Choice(
        "count_background",
        ("sound-level", "original"),
        "original",
        "AudioCountHard: background level set against the sound, or against the clip's hits (louder with "
        "the count)",
        {
            "sound-level": "AudioCountHard: the background's level is set against the episode's sound (10-15 dB "
            "under it placed 4.5 times, the mean count), the same whatever a clip's count.",
            "original": "AudioCountHard: the background is mixed at 10-15 dB SNR against all the hits of the "
            "clip, so it gets louder with the count (about 9 dB from 1 to 8).",
        },
    ),
    Choice(
        "length_audio",
        ("clean", "original"),
        "original",
        "AudioLength(Hard): no full-scale samples and fades at every cut and edge, or the original's "
        "clipping and hard cuts",
        {
            "clean": "AudioLength(Hard): fragments are scaled so that no sample reaches full scale; 5 ms fades "
            "into and out of every silence block and 10 ms fades at the clip's edges.",
            "original": "AudioLength(Hard): fragments at gain 0.8-2.0 clip at full scale; the silence block "
            "cuts the sound with no fade and clips start and end abruptly.",
        },
    ),
    Choice(
        "file_names",
        ("neutral", "original"),
        "original",
        "audio file names with no label in them, or the original's, which hold the labels",
        {
            "neutral": "Audio file names hold no label (opaque tokens in the original folder layout).",
            "original": "Audio file names hold the labels as the original's do (`_5.wav`, `__ans-4__`, "
            "`MIX__BAA__`, `..._anomaly_...`).",
        },
    ),
)


def original_construction(options: BuildOptions) -> BuildOptions:
    """``options`` with every construction option set to the original benchmark's value."""
    return dataclasses_replace(options, **{c.field: c.original for c in CONSTRUCTION})


@dataclass(frozen=True)
class PlannedFile:
    """A file of the dataset: its path relative to the root, how to make its audio (called only when
    the file does not exist yet) and how to write its transcript (``audioicl.tasks.transcripts``: what was placed
    in it, never its label; None: the clip has none, it is measured from the audio when asked for)."""

    path: str
    render: Callable[[], np.ndarray] = field(compare=False)
    transcript: Callable[[], str] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class PlannedEpisode:
    episode: Episode  # with max(k) demos; the k-shot meta files take the first k
    files: tuple[PlannedFile, ...]  # every file the episode's clips point to


@dataclass(frozen=True)
class GenContext:
    options: BuildOptions
    sources: SoundSources

    def rng(self, *names: object) -> np.random.Generator:
        return rng_for(self.options.seed, *names)

    def token(self, *names: object) -> str:
        """An opaque file-name token for the clip named by ``names`` (10 hex digits from the seed): a neutral
        name that says nothing about the clip's label or role."""
        return f"{derive_seed(self.options.seed, 'file-name', *names):016x}"[:10]

    def sound_name(self, sound: OneShot) -> str:
        """How a transcript names a one-shot: its family (what a listener hears) and an opaque token, the
        same in every episode (the bank's own name holds its index, which can tell more than the sound)."""
        return f"{sound.family} #{self.token('sound', sound.name)[:6]}"

    def balanced(self, task: str, what: str, values: Sequence, index: int):
        """The value of episode ``index`` from a task-wide list in which every one of ``values`` occurs
        equally often (counts differ by at most one) in a seeded random order."""
        order = _balanced_order(self.options.seed, task, what, len(values), self.options.episodes)
        return values[order[index]]

    @property
    def n_clips(self) -> int:
        """Clips in the fixed list of one single-clip episode: max(k) demos and the query."""
        return self.options.max_shots + 1


@functools.lru_cache(maxsize=64)
def _balanced_order(seed: int, task: str, what: str, n_values: int, n_episodes: int) -> tuple[int, ...]:
    rng = rng_for(seed, task, "balanced", what)
    rounds = [rng.permutation(n_values) for _ in range(math.ceil(n_episodes / n_values))]
    return tuple(int(v) for v in rng.permutation(np.concatenate(rounds)[:n_episodes]))


@dataclass(frozen=True)
class TaskGenerator:
    """How a task is built: one episode at a time, plus task-wide files (the Morse alphabet bank), and the
    text the dataset card shows (how labels are made, how the build differs from the original)."""

    episode: Callable[[GenContext, TaskSpec, int], PlannedEpisode]
    recipe: str
    differences: str
    shared: Callable[[GenContext], tuple[PlannedFile, ...]] = lambda ctx: ()
    batch: int = 1  # consecutive episodes per work unit: episodes that share a costly source go together
    cost_ms: float = 10.0  # CPU time per episode (measured on the default build): balances the workers
    check: Callable[[BuildOptions], None] = lambda options: None  # raises AudioICLError on impossible options


def single_clip_episode(
    ctx: GenContext, spec: TaskSpec, index: int, clips: Sequence[tuple[str, str]]
) -> Episode:
    """An episode of a single-clip task from its fixed list of (audio_path, label): demos first, query last."""
    demos = tuple(Demo((Clip(path, label),)) for path, label in clips[:-1])
    path, label = clips[-1]
    return Episode(
        episode_id(spec, index, ctx.options.episodes), spec.name, demos, Query((Clip(path, label),), label)
    )


def peak_safe(wave: np.ndarray, peak: float = 0.99) -> np.ndarray:
    """Scale a mix down (never up) so that it does not clip when written as 16-bit PCM."""
    top = float(np.max(np.abs(wave))) if wave.size else 0.0
    return (wave * (peak / top)).astype(np.float32) if top > peak else wave.astype(np.float32, copy=False)
