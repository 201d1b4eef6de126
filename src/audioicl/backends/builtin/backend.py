"""The ``builtin`` backend: one of the built-in solvers (``audioicl.solvers.SOLVERS``) answering each chat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audioicl.solvers import SOLVERS, Solver

from ..base import Backend, GenerationConfig, Request, Response, Workload
from ..kinds import Settings


@dataclass
class BuiltinBackend:
    name: str
    solver: Solver
    max_clip_seconds: float | None = None
    family: str = "default"
    info: Mapping[str, Any] = field(default_factory=dict)

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]:
        return [Response(self.solver(request.chat)) for request in requests]

    def close(self) -> None:
        pass


def make_builtin(name: str, settings: Settings, workload: Workload | None = None) -> Backend:
    solver = SOLVERS.get(name)(settings.seed)
    return BuiltinBackend(f"builtin:{name}", solver, settings.max_clip_seconds)
