"""What guessing scores per task (a uniform guess over its label space) and the benchmark's task order, for
the report, study and audit tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import TASKS, task_names
from .remap import PATTERNS


@dataclass(frozen=True)
class Chance:
    """Accuracy of a uniform guess; ``value`` is None when the task is unknown. ``note`` says how."""

    value: float | None
    note: str


def order_tasks(names: set[str]) -> tuple[str, ...]:
    """Benchmark order for known tasks, then any others alphabetically."""
    known = [name for name in task_names() if name in names]
    return tuple(known + sorted(names - set(known)))


def chance_level(task: str) -> Chance:
    """What guessing scores, from the task's label space.

    AudioRemap's space is open (any three letters), but its query shows the letters of A and B, so a guess
    needs only pick one of the task's mix patterns. MorseCode's answer is any word: chance is about zero.
    """
    if task not in TASKS:
        return Chance(None, "unknown task: chance not known")
    values = TASKS.get(task).labels.values
    if values:
        return Chance(1 / len(values), f"uniform guess over the {len(values)} labels")
    if task == "AudioRemap":
        return Chance(
            1 / len(PATTERNS),
            f"uniform guess over the {len(PATTERNS)} mix patterns, spelled with the letters the query shows",
        )
    return Chance(0.0, "open vocabulary")


def mean_chance(tasks: tuple[str, ...]) -> Chance:
    values = [chance_level(task).value for task in tasks]
    known = [v for v in values if v is not None]
    if not known:
        return Chance(None, "chance not known")
    return Chance(sum(known) / len(known), f"mean of the {len(known)} tasks' chance levels")
