"""What a task generator gets (build options, sound sources) and what it returns (an episode and its files).

A generator plans one episode from ``rng_for(seed, task, ...)`` keyed by stable names; every file it plans
comes with a ``render`` function that draws from its own named generator too, so any subset of files can be
rendered in any order, by any worker, and give the same bytes (the builder skips files that already exist).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

import numpy as np

from ..records import Clip, Demo, Episode, Query
from ..seeding import rng_for
from ..sources import SoundSources
from .base import TaskSpec, episode_id

CountLabels = Literal["distinct", "independent"]
RemapDemos = Literal["own-pair", "same-pair"]


@dataclass(frozen=True)
class BuildOptions:
    """Every parameter that changes what a build writes (``--workers`` does not)."""

    seed: int = 0
    episodes: int = 300
    shots: tuple[int, ...] = (1, 2, 3, 4, 5)
    tasks: tuple[str, ...] = ()
    count_labels: CountLabels = "distinct"
    remap_demos: RemapDemos = "own-pair"
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
class PlannedFile:
    """A file of the dataset: its path relative to the root and how to make its audio (called only when
    the file does not exist yet)."""

    path: str
    render: Callable[[], np.ndarray] = field(compare=False)


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

    @property
    def n_clips(self) -> int:
        """Clips in the fixed list of one single-clip episode: max(k) demos and the query."""
        return self.options.max_shots + 1


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
