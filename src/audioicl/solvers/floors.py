"""The floors ``builtin:random`` and ``builtin:majority``: answers that need no listening.

Randomness comes from the seed and the chat's own content, so an episode gets the same answer whatever its
batch, order or shard.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from audioicl.prompts.chat import Chat
from audioicl.seeding import rng_for
from audioicl.tasks import TASKS

from .registry import Solver, chat_key, demo_labels, register_solver


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
