"""Typed records at the boundaries: clips, demos, queries, episodes, results.

Two shapes of episode exist in the original meta files (SPEC §3):
single-clip (a demo *is* a clip: ``{"audio_path", "label"}``) and multi-clip (a demo holds
``{"clips": [...]}`` with roles; the query's last clip is the one to answer). Both map onto the same
records; ``multi`` remembers which JSON shape a demo or query came from so writing is lossless.
Unknown keys are kept in ``extra`` (in order) and written back after the known ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class Clip:
    audio_path: str
    label: str | None = None
    role: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Demo:
    """One shot: one clip (single-clip tasks) or several clips with roles (multi-clip tasks)."""

    clips: tuple[Clip, ...]
    multi: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str | None:
        """The label the demo teaches: the single clip's, or the last clip's (the MIX / Anomalous one)."""
        return self.clips[-1].label


@dataclass(frozen=True)
class Query:
    """What the model must answer: the last clip's label is ``label``; earlier clips may carry labels."""

    clips: tuple[Clip, ...]
    label: str
    multi: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> Clip:
        return self.clips[-1]


@dataclass(frozen=True)
class Episode:
    id: str
    task: str
    demos: tuple[Demo, ...]
    query: Query
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        return len(self.demos)

    def with_shots(self, k: int) -> Episode:
        """The same episode with its first ``k`` demos (the nested-k construction)."""
        if k > len(self.demos):
            raise ValueError(f"{self.id} has {len(self.demos)} demos, asked for {k}")
        return replace(self, demos=self.demos[:k])

    def clips(self) -> Iterator[Clip]:
        for demo in self.demos:
            yield from demo.clips
        yield from self.query.clips

    @property
    def object(self) -> str | None:
        """AnomalyDetect's machine type (``"fan"``), when the record has one."""
        value = self.extra.get("object")
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Result:
    """One line of a results file (SPEC §3): the four original fields plus our own."""

    id: str
    task: str
    response: str | None
    gt: Any
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "task": self.task, "response": self.response, "gt": self.gt, **self.extra}
