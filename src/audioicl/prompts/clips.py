"""The audio a prompt carries: a dataset's clips loaded once (``ClipStore``; ``SilentClips`` reads none), the
Morse alphabet bank shown before MorseCode demos, and trailing zero padding of a chat's clips as the original
did (``pad_chats``).
"""

from __future__ import annotations

import os
import string
from collections.abc import Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from audioicl import audio
from audioicl.dataset.meta import resolve_audio_path
from audioicl.errors import AudioICLError
from audioicl.lru import BoundedLRU

from .chat import AudioPart, Chat, Message

PadMode = Literal["none", "episode", "batch"]
MorseBankMode = Literal["auto", "on", "off"]
PAD_MODES: tuple[str, ...] = ("none", "episode", "batch")
MORSE_BANK_MODES: tuple[str, ...] = ("auto", "on", "off")

NOISE_PATH = "control:noise"  # names a noise clip a study condition put in a clip's place (+ "/<episode id>")
MORSE_TASK = "MorseCode"
MORSE_BANK_DIR = "data/MorseCode/alphabet"
MORSE_LETTERS = string.ascii_uppercase


# --------------------------------------------------------------------------- audio and the Morse bank


def load_clip(root: str | os.PathLike, audio_path: str, sr: int = audio.SAMPLE_RATE) -> AudioPart:
    wave, rate = audio.load(resolve_audio_path(root, audio_path), sr=sr)
    return AudioPart.of(wave, rate)


class ClipStore:
    """Loads a dataset's clips (mono, ``sr``), each read and resampled once while it stays among the most
    recently used ``max_samples`` samples (default 20 minutes of audio at 16 kHz, 77 MB of float32), so a
    run that visits an episode's k files together decodes its clips once."""

    def __init__(
        self, root: str | os.PathLike, sr: int = audio.SAMPLE_RATE, max_samples: int = 20 * 60 * 16_000
    ):
        self.root, self.sr = root, sr
        self._parts: BoundedLRU[str, AudioPart] = BoundedLRU(max_samples, lambda part: len(part.wave))

    @property
    def loads(self) -> int:
        """Files decoded (for tests and progress reports)."""
        return self._parts.misses

    def load(self, audio_path: str) -> AudioPart:
        return self._parts.fetch(audio_path, lambda: load_clip(self.root, audio_path, self.sr))


class SilentClips(ClipStore):
    """A clip store that reads nothing: every clip is empty. Lays out a chat's text and items without the
    audio (the text-only floor in ``audit``, which must work where the audio is missing)."""

    def __init__(self) -> None:
        super().__init__(".")
        self._silence = AudioPart.of(np.zeros(0, dtype=np.float32), self.sr)

    def load(self, audio_path: str) -> AudioPart:
        return self._silence


def morse_bank_paths() -> tuple[str, ...]:
    return tuple(f"{MORSE_BANK_DIR}/{letter}.wav" for letter in MORSE_LETTERS)


def load_morse_bank(root: str | os.PathLike, mode: MorseBankMode) -> tuple[AudioPart, ...]:
    """The 26 letter clips A..Z to show before MorseCode demos: ``off`` never, ``auto`` when the dataset
    has all of them, ``on`` requires them. Empty when not shown."""
    if mode == "off":
        return ()
    paths = morse_bank_paths()
    missing = [p for p in paths if not resolve_audio_path(root, p).is_file()]
    if missing:
        if mode == "on":
            raise AudioICLError(
                f"--morse-bank on, but the dataset lacks {len(missing)} of the 26 letter clips "
                f"(first: {missing[0]})",
                file=str(root),
            )
        return ()
    return tuple(load_clip(root, p) for p in paths)


# --------------------------------------------------------------------------- padding


def _pad_wave(part: AudioPart, samples: int) -> AudioPart:
    if len(part.wave) >= samples:
        return part
    wave = np.concatenate([part.wave, np.zeros(samples - len(part.wave), dtype=part.wave.dtype)])
    return AudioPart.of(wave, part.sr)


def _pad_chat_to(chat: Chat, samples: int) -> Chat:
    padded: dict[int, AudioPart] = {}

    def pad(part: AudioPart) -> AudioPart:
        if id(part) not in padded:
            padded[id(part)] = _pad_wave(part, samples)
        return padded[id(part)]

    messages = tuple(
        Message(m.role, tuple(pad(p) if isinstance(p, AudioPart) else p for p in m.content))
        for m in chat.messages
    )
    items = tuple(replace(item, audio=pad(item.audio)) if item.audio else item for item in chat.items)
    return replace(chat, messages=messages, items=items)


def _longest(chat: Chat) -> int:
    return max((len(p.wave) for p in chat.audio_parts()), default=0)


def pad_chats(chats: Sequence[Chat], mode: PadMode) -> list[Chat]:
    """Trailing zero padding as the original did (SPEC §4): ``episode`` pads every clip of a chat to that
    chat's longest clip, ``batch`` to the longest clip of all ``chats``, ``none`` leaves them alone.
    Pure: returns new chats, the inputs are unchanged."""
    if mode == "none":
        return list(chats)
    if mode == "episode":
        return [_pad_chat_to(chat, _longest(chat)) for chat in chats]
    if mode == "batch":
        samples = max((_longest(chat) for chat in chats), default=0)
        return [_pad_chat_to(chat, samples) for chat in chats]
    raise ValueError(f"unknown pad mode {mode!r}")
