"""The nine AudioICL-Bench tasks, registered by name in benchmark order."""

from . import anomaly, count, length, morse, operator, remap  # noqa: F401  (import registers)
from .base import EPISODES_PER_TASK, TASKS, LabelSpace, TaskSpec, episode_id, task_of_episode_id

__all__ = [
    "EPISODES_PER_TASK",
    "TASKS",
    "LabelSpace",
    "TaskSpec",
    "episode_id",
    "task_names",
    "task_of_episode_id",
]


def task_names() -> list[str]:
    """All task names in benchmark order (AudioCount first, AnomalyDetect last)."""
    return sorted(TASKS.names(), key=lambda name: TASKS.get(name).order)
