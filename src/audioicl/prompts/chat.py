"""The typed chat a backend gets: text and audio parts, messages, the items shown and the frame.

A ``Chat`` holds the messages a model sees (text and audio parts) and ``items``, the structured view of the
clips in presentation order with the labels the prompt shows, and its ``frame`` (system prompt, instruction,
layout) so it can be laid out again. An ``AudioPart`` names its clip by a digest of the samples, never by a
path. ``render_text`` is a chat's text view.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

Role = Literal["system", "user", "assistant"]
ItemKind = Literal["bank", "demo", "query"]
Layout = Literal["original", "multiturn", "single-clip", "continuation"]
LAYOUTS: tuple[str, ...] = ("original", "multiturn", "single-clip", "continuation")
CONTINUATION = "continuation"  # the layout with no chat around it, for base models (``prompts.build``)


# --------------------------------------------------------------------------- the typed chat


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True, eq=False)
class AudioPart:
    """Mono float32 samples at ``sr`` and ``digest``, a hash of them that names the clip by content.

    No file name travels with the samples: what reaches a model is the sound, never a path that could
    spell the label (``_5.wav``). Backends key their caches by ``digest``."""

    wave: np.ndarray
    sr: int
    digest: str

    @classmethod
    def of(cls, wave: np.ndarray, sr: int) -> AudioPart:
        wave = np.ascontiguousarray(wave, dtype=np.float32)
        hasher = hashlib.blake2b(int(sr).to_bytes(4, "little"), digest_size=16)
        hasher.update(wave.tobytes())
        return cls(wave=wave, sr=int(sr), digest=hasher.hexdigest())

    @property
    def seconds(self) -> float:
        return len(self.wave) / self.sr


Part = TextPart | AudioPart


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[Part, ...]


@dataclass(frozen=True)
class PromptItem:
    """One clip as presented. ``index``: demo number 1..k (shared by a demo's clips), letter number 1..26
    for the Morse bank, 1 for the query. ``label`` is the label the prompt shows (None on the target).
    ``audio`` is None where a study condition took the clip out: ``transcript`` then holds the text shown
    in its place, if any."""

    kind: ItemKind
    index: int
    role: str | None
    tag: str
    audio: AudioPart | None
    label: str | None
    transcript: str | None = None


@dataclass(frozen=True)
class Frame:
    """What lays items out as messages: the system prompt, the instruction (None: no instruction) and the
    layout."""

    system: str
    instruction: str | None
    layout: Layout = "original"


@dataclass(frozen=True)
class Chat:
    task: str
    messages: tuple[Message, ...]
    items: tuple[PromptItem, ...]
    frame: Frame | None = None  # None: made by hand, cannot be laid out again

    @property
    def continuation(self) -> bool:
        """Laid out for continuation (``--layout continuation``): one text to continue, no roles, no chat
        template."""
        return self.frame is not None and self.frame.layout == CONTINUATION

    def audio_parts(self) -> Iterator[AudioPart]:
        """Audio parts in the order the model hears them."""
        for message in self.messages:
            for part in message.content:
                if isinstance(part, AudioPart):
                    yield part


def message_text(message: Message, placeholder: str = "<audio>") -> str:
    """One message's text with each audio part written as ``placeholder`` (the model's own audio tokens)."""
    return "".join(p.text if isinstance(p, TextPart) else placeholder for p in message.content)


def render_text(chat: Chat, placeholder: str = "<audio>") -> str:
    """The text view of a chat: one ``role: text`` block per message, each audio part as ``placeholder``; a
    continuation layout's text as it is (it has no roles)."""
    if chat.continuation:
        return "".join(message_text(m, placeholder) for m in chat.messages)
    return "\n".join(f"{m.role}: {message_text(m, placeholder)}" for m in chat.messages)
