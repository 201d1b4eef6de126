"""What each task is, for ``audioicl tasks``: its family (the task module), answer kind, label space, what
guessing scores (``chance``), the clips a k-shot prompt holds, and the k the build supports.

The clip counts come from planning one episode of the default build (no audio is rendered); the k range
from the generator's own check and a planned episode at each k tried, for the default build (300
episodes, our construction: ``--count-labels independent`` or ``--queries original`` allow more for
some tasks). ``K_SCAN_LIMIT`` bounds the search: a task that builds at that k is listed as ``k_max`` None
(no limit found).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audioicl.errors import AudioICLError
from audioicl.sources.banks import SoundSources

from . import TASKS, task_names
from .chance import chance_level
from .context import BuildOptions, GenContext

K_SCAN_LIMIT = 64


@dataclass(frozen=True)
class TaskInfo:
    name: str
    family: str
    order: int
    answer: str
    labels: str  # the label space's description
    n_labels: int | None  # None: an open label space
    chance: float | None
    chance_note: str
    clips_per_demo: int
    clips_per_query: int
    shared_clips: int  # clips every prompt shows besides the demos and query (the Morse alphabet bank)
    roles: tuple[str, ...]  # of a multi-clip task's clips
    k_max: (
        int | None
    )  # the largest k a build can make from the built-in sounds; None: none up to K_SCAN_LIMIT

    def clips_at(self, k: int) -> int:
        """Clips in a k-shot prompt (with the shared bank, which ``--morse-bank`` shows by default)."""
        return self.clips_per_demo * k + self.clips_per_query + self.shared_clips

    @property
    def clips_formula(self) -> str:
        """``k+1``, ``3k+3``, ``k+27``: the clips of a k-shot prompt."""
        demo = "k" if self.clips_per_demo == 1 else f"{self.clips_per_demo}k"
        return f"{demo}+{self.clips_per_query + self.shared_clips}"

    @property
    def k_range(self) -> str:
        return f"0-{self.k_max}" if self.k_max is not None else f"0-{K_SCAN_LIMIT}+"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "order": self.order,
            "answer": self.answer,
            "labels": self.labels,
            "n_labels": self.n_labels,
            "chance": self.chance,
            "chance_note": self.chance_note,
            "clips_per_demo": self.clips_per_demo,
            "clips_per_query": self.clips_per_query,
            "shared_clips": self.shared_clips,
            "clips_per_prompt": {str(k): self.clips_at(k) for k in range(0, 6)},
            "roles": list(self.roles),
            "k_min": 0,
            "k_max": self.k_max,
            "k_scan_limit": K_SCAN_LIMIT,
        }


def _builds(name: str, k: int, sources: SoundSources) -> bool:
    """Whether the default build of task ``name`` at ``k`` shots passes its check and plans an episode."""
    options = BuildOptions(shots=(k,), tasks=(name,))
    spec = TASKS.get(name)
    try:
        spec.generator.check(options)
        spec.generator.episode(GenContext(options, sources), spec, 0)
    except AudioICLError:
        return False
    return True


def _k_max(name: str, sources: SoundSources) -> int | None:
    """The largest k that builds (bisection: a task that builds at k builds at every smaller k)."""
    if _builds(name, K_SCAN_LIMIT, sources):
        return None
    low, high = 0, K_SCAN_LIMIT  # builds at low (k = 0: the query alone), not at high
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _builds(name, middle, sources) else (low, middle)
    return low


def describe_tasks(names: list[str] | None = None) -> list[TaskInfo]:
    """Every task (or those of ``names``) in benchmark order."""
    sources = SoundSources.create(0, ())
    infos = []
    for name in names or task_names():
        spec = TASKS.get(name)
        options = BuildOptions(shots=(1,), tasks=(name,))
        ctx = GenContext(options, sources)
        episode = spec.generator.episode(ctx, spec, 0).episode
        chance = chance_level(name)
        roles = tuple(spec.clip_labels) if spec.multi_clip else ()
        infos.append(
            TaskInfo(
                name=name,
                family=spec.family,
                order=spec.order,
                answer=spec.answer,
                labels=spec.labels.description,
                n_labels=len(spec.labels.values) if spec.labels.values else None,
                chance=chance.value,
                chance_note=chance.note,
                clips_per_demo=len(episode.demos[0].clips),
                clips_per_query=len(episode.query.clips),
                shared_clips=len(spec.generator.shared(ctx)),
                roles=roles,
                k_max=_k_max(name, sources),
            )
        )
    return infos
