"""What a task is: its name, place in the benchmark, label space, answer kind and instruction.

Each task family module (``count.py``, ``length.py`` ...) registers its tasks in ``TASKS`` at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from audioicl.registry import Registry

AnswerKind = Literal["integer", "word", "letters", "label"]


@dataclass(frozen=True)
class LabelSpace:
    """Which label strings a task admits; ``values`` lists them when the set is finite and small."""

    description: str
    values: tuple[str, ...] | None = None
    pattern: str | None = None

    def __contains__(self, label: object) -> bool:
        if not isinstance(label, str):
            return False
        if self.values is not None:
            return label in self.values
        return self.pattern is not None and re.fullmatch(self.pattern, label) is not None


def integer_labels(low: int, high: int) -> LabelSpace:
    return LabelSpace(f"integers {low}..{high}", tuple(str(v) for v in range(low, high + 1)))


def label_set(values: set[int] | set[str], description: str) -> LabelSpace:
    ordered = sorted(values, key=lambda v: (isinstance(v, str), v))
    return LabelSpace(description, tuple(str(v) for v in ordered))


@dataclass(frozen=True)
class TaskSpec:
    name: str
    order: int  # position of the task's id block in the benchmark (SPEC §1)
    family: str
    labels: LabelSpace
    answer: AnswerKind
    instruction: str  # the "specific" instruction style (SPEC §4), our wording
    multi_clip: bool = False
    clip_labels: dict[str, LabelSpace] = field(default_factory=dict)  # per role, for multi-clip tasks
    generator: Any = field(default=None, compare=False, repr=False)  # tasks.context.TaskGenerator (build)


TASKS: Registry[TaskSpec] = Registry("task")

EPISODES_PER_TASK = 300


def register(spec: TaskSpec) -> TaskSpec:
    return TASKS.add(spec.name, spec)


def episode_id(spec: TaskSpec, index: int, episodes_per_task: int = EPISODES_PER_TASK) -> str:
    """``AudioICL00001``-style id of episode ``index`` (0-based) of a task, in the original numbering."""
    return f"AudioICL{spec.order * episodes_per_task + index + 1:05d}"


EPISODE_ID = re.compile(r"AudioICL(\d{5})")


def task_of_episode_id(episode_id: object, episodes_per_task: int = EPISODES_PER_TASK) -> str | None:
    """The task whose id block (SPEC §1: AudioCount 1-300 ... AnomalyDetect 2401-2700) holds ``episode_id``;
    None for an id outside the blocks or not of the form ``AudioICL00001``. Only the released numbering: a
    build of fewer episodes per task numbers its ids in smaller blocks."""
    match = EPISODE_ID.fullmatch(episode_id) if isinstance(episode_id, str) else None
    if match is None or int(match[1]) < 1:
        return None
    order = (int(match[1]) - 1) // episodes_per_task
    return next((name for name, spec in TASKS.items() if spec.order == order), None)
