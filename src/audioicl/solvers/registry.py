"""The registry of built-in solvers (``builtin:<name>``) and what they share: reading a chat's items.

A solver is built from the run seed (``SOLVERS``: name → ``factory(seed) -> solver``) and answers one chat
at a time. Solvers read only what a model could: ``chat.items`` (the clips and the labels the prompt shows),
never a query label. Their modules (``floors``, ``textonly``, ``perceiving``) register here; the ``builtin`` backend kind serves them as a
backend.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from audioicl.prompts.chat import Chat, PromptItem, render_text
from audioicl.registry import Registry

Solver = Callable[[Chat], str]
SolverFactory = Callable[[int], Solver]

SOLVERS: Registry[SolverFactory] = Registry("built-in solver")


def register_solver(name: str) -> Callable[[SolverFactory], SolverFactory]:
    def decorate(factory: SolverFactory) -> SolverFactory:
        return SOLVERS.add(name, factory)

    return decorate


# --------------------------------------------------------------------------- helpers on chat items


def demo_labels(chat: Chat) -> list[str]:
    """Each demo's label (its last clip's), in presentation order."""
    last: dict[int, PromptItem] = {}
    for item in chat.items:
        if item.kind == "demo":
            last[item.index] = item
    return [item.label for item in last.values() if item.label is not None]


def chat_key(chat: Chat) -> str:
    """A stable digest of what the chat shows (text and clip contents), naming its episode for seeding."""
    digest = hashlib.sha256(render_text(chat).encode())
    for item in chat.items:
        digest.update(b"\x1f" + (item.audio.digest if item.audio else "").encode())
    return digest.hexdigest()
