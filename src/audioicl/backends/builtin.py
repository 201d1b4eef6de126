"""Built-in solvers that need no model: the floors ``builtin:random`` and ``builtin:majority`` (and, in their
own modules, ``text-only``, ``oracle`` and ``icl``).

They read only what a model could: ``chat.items`` (clips and the labels the prompt shows), never a query
label. A solver is built from the run seed (``SOLVERS``: name → ``factory(seed) -> solver``) and answers
one chat at a time; randomness comes from the seed and the chat's own content, so an episode gets the same
answer whatever its batch, order or shard.

Options (``--backend-option``): ``max_clip_seconds`` (float) makes the backend refuse longer clips, as a
real model's encoder would.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import AudioICLError
from ..prompts import Chat, PromptItem, render_text
from ..registry import Registry
from ..seeding import rng_for
from ..tasks import TASKS
from .base import Backend, register_backend

Solver = Callable[[Chat], str]
SolverFactory = Callable[[int], Solver]

SOLVERS: Registry[SolverFactory] = Registry("built-in solver")

OPTIONS = ("seed", "max_clip_seconds")


def register_solver(name: str) -> Callable[[SolverFactory], SolverFactory]:
    def decorate(factory: SolverFactory) -> SolverFactory:
        return SOLVERS.add(name, factory)

    return decorate


@dataclass
class BuiltinBackend:
    name: str
    solver: Solver
    max_clip_seconds: float | None = None
    family: str = "default"

    def generate(self, chats: list[Chat], max_new_tokens: int) -> list[str]:
        return [self.solver(chat) for chat in chats]


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
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise AudioICLError(
            f"builtin backends take no option {', '.join(unknown)} (known: {', '.join(OPTIONS)})"
        )
    seed = int(options.get("seed", 0))  # type: ignore[call-overload]
    solver = SOLVERS.get(name)(seed)
    return BuiltinBackend(f"builtin:{name}", solver, _float_option(options, "max_clip_seconds"))


# --------------------------------------------------------------------------- helpers on chat items


def demo_labels(chat: Chat) -> list[str]:
    """Each demo's label (its last clip's), in presentation order."""
    last: dict[int, PromptItem] = {}
    for item in chat.items:
        if item.kind == "demo":
            last[item.index] = item
    return [item.label for item in last.values() if item.label is not None]


def chat_key(chat: Chat) -> str:
    """A stable digest of what the chat shows (text and clip paths), naming its episode for seeding."""
    digest = hashlib.sha256(render_text(chat).encode())
    for item in chat.items:
        digest.update(b"\x1f" + item.audio.path.encode())
    return digest.hexdigest()


def _shown_letters(chat: Chat) -> list[str]:
    """Letters a letter/word answer may use: those the query's own clips carry (AudioRemap's references),
    else the Morse bank's, else the demos' labels'; a-z as a last resort."""
    for kinds in (("query",), ("bank",), ("demo",)):
        letters = sorted({ch for item in chat.items if item.kind in kinds for ch in (item.label or "")})
        letters = [ch for ch in letters if ch.isalpha()]
        if letters:
            return letters
    return list("abcdefghijklmnopqrstuvwxyz")


def _random_answer(chat: Chat, rng: np.random.Generator) -> str:
    spec = TASKS.get(chat.task) if chat.task in TASKS else None
    labels = demo_labels(chat)
    if spec is not None and spec.labels.values:
        return str(rng.choice(spec.labels.values))
    if spec is not None and spec.answer in ("letters", "word"):
        length = len(str(rng.choice(labels))) if labels else (3 if spec.answer == "letters" else 5)
        return "".join(rng.choice(_shown_letters(chat), size=length))
    return str(rng.choice(labels)) if labels else ""


# --------------------------------------------------------------------------- the floors


@register_solver("random")
def random_solver(seed: int) -> Solver:
    """Uniform over the task's label values; for open label spaces (MorseCode, AudioRemap) a string of
    the length of a random demo label, of letters the prompt shows."""

    def solve(chat: Chat) -> str:
        return _random_answer(chat, rng_for(seed, "builtin:random", chat_key(chat)))

    return solve


@register_solver("majority")
def majority_solver(seed: int) -> Solver:
    """The most frequent demo label; ties go to the label shown first. No demos: the task's first label."""

    def solve(chat: Chat) -> str:
        labels = demo_labels(chat)
        if not labels:
            spec = TASKS.get(chat.task) if chat.task in TASKS else None
            return spec.labels.values[0] if spec is not None and spec.labels.values else ""
        counts = Counter(labels)
        best = max(counts.values())
        return next(label for label in labels if counts[label] == best)

    return solve


from . import perceiving, textonly  # noqa: E402, F401  (register oracle, icl and text-only; they use this module)
