"""The ``builtin`` backend: serves the built-in solvers (``solvers.SOLVERS``) as a backend, no model.

``builtin:random`` and ``builtin:majority`` (``floors``), ``builtin:text-only`` (``textonly``),
``builtin:oracle`` and ``builtin:icl`` (``perceiving``). Options (``--backend-option``): ``max_clip_seconds`` (float) makes the backend refuse
longer clips, as a real model's encoder would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audioicl.errors import AudioICLError

from . import floors, perceiving, textonly  # noqa: F401  (register their solvers)
from .base import Backend, GenerationConfig, Request, Response, refuse_unknown_options, register_backend
from .solvers import SOLVERS, Solver

OPTIONS = ("seed", "max_clip_seconds")


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


def _float_option(options: dict[str, object], key: str) -> float | None:
    value = options.get(key)
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AudioICLError(f"backend option {key} must be a number, got {value!r}") from None
    if number <= 0:
        raise AudioICLError(f"backend option {key} must be positive, got {value!r}")
    return number


@register_backend("builtin")
def make_builtin(name: str, **options: object) -> Backend:
    refuse_unknown_options("builtin backends take", options, OPTIONS)
    seed = int(options.get("seed", 0))  # type: ignore[call-overload]
    solver = SOLVERS.get(name)(seed)
    return BuiltinBackend(f"builtin:{name}", solver, _float_option(options, "max_clip_seconds"))
