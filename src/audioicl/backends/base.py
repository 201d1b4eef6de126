"""The backend protocol, the registry of backend kinds, and model specs ``backend:name``.

A backend turns chats into raw response texts; it never sees a query label or a score. A backend kind
(``builtin``, ``hf``, ``vllm``, ``openai`` ...) registers a factory ``factory(name: str, **options) ->
Backend`` in ``BACKENDS`` from its module ``audioicl.backends.<kind>``; ``load_backend`` imports that module
on first use, so heavy dependencies load only for the backend asked for. Factories receive the run's
``seed`` (an int) and the user's ``--backend-option KEY=VALUE`` pairs (strings) as keyword options.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..errors import AudioICLError
from ..prompts import Chat
from ..registry import Registry


class Backend(Protocol):
    """``name``: what it is (``builtin:random``); ``max_clip_seconds``: the longest clip it accepts (None:
    any; the runner turns longer clips into error results); ``family``: the system-prompt family
    (``prompts.FAMILIES``; optional, the runner falls back to ``prompts.system_family(model name)``).
    ``generate`` returns one stripped-or-raw response text per chat, in order."""

    name: str
    max_clip_seconds: float | None

    def generate(self, chats: list[Chat], max_new_tokens: int) -> list[str]: ...


BackendFactory = Callable[..., Backend]

BACKENDS: Registry[BackendFactory] = Registry("backend")


def register_backend(kind: str) -> Callable[[BackendFactory], BackendFactory]:
    def decorate(factory: BackendFactory) -> BackendFactory:
        return BACKENDS.add(kind, factory)

    return decorate


@dataclass(frozen=True)
class ModelSpec:
    """``hf:Qwen/Qwen2-Audio-7B-Instruct`` → backend ``hf``, name ``Qwen/Qwen2-Audio-7B-Instruct``."""

    backend: str
    name: str

    @property
    def file_name(self) -> str:
        """The ``<model>`` of ``<model>_results_k<k>.jsonl``: the name's last path component (SPEC §3)."""
        return self.name.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return f"{self.backend}:{self.name}"


def parse_model_spec(spec: str) -> ModelSpec:
    backend, sep, name = spec.partition(":")
    if not sep or not backend or not name.strip("/\\"):
        raise AudioICLError(f"model spec must be BACKEND:NAME (e.g. builtin:random), got {spec!r}")
    return ModelSpec(backend, name)


def _available_kinds() -> list[str]:
    modules = {m.name for m in pkgutil.iter_modules(_package_path())}
    return sorted((modules - {"base", "__init__"}) | set(BACKENDS.names()))


def _package_path() -> list[str]:
    package = importlib.import_module(__package__)
    return list(package.__path__)


def _import_kind(kind: str) -> None:
    if kind in BACKENDS:
        return
    if kind == "base" or not kind.isidentifier():
        return
    try:
        importlib.import_module(f"{__package__}.{kind}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.{kind}":
            raise AudioICLError(
                f"backend {kind!r} needs a package that is not installed: {exc.name}"
            ) from exc


def load_backend(spec: str, **options: object) -> Backend:
    """The backend for a model spec ``backend:name``, built with ``options``."""
    model = parse_model_spec(spec)
    _import_kind(model.backend)
    if model.backend not in BACKENDS:
        raise AudioICLError(f"unknown backend {model.backend!r} (known: {', '.join(_available_kinds())})")
    return BACKENDS.get(model.backend)(model.name, **options)
