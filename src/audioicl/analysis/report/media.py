"""Embedding images and clips in the page as base64 data URIs, with a size budget for the audio."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from audioicl.audio import SAMPLE_RATE, load, pcm16_bytes
from audioicl.dataset.meta import resolve_audio_path
from audioicl.errors import AudioICLError


@dataclass(frozen=True)
class EmbeddedClip:
    """A clip ready for an ``<audio>`` player (``data_uri``), or why it is not there (``problem``)."""

    path: str
    data_uri: str | None = None
    problem: str | None = None


class AudioBudget:
    """Bytes of WAV (16 kHz PCM16, before base64) the page may still embed."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _encode(root: Path, audio_path: str) -> bytes | str:
    """The clip as 16 kHz mono PCM16 WAV bytes, or why it cannot be had."""
    try:
        wave, rate = load(resolve_audio_path(root, audio_path), SAMPLE_RATE)
    except AudioICLError as exc:
        return f"missing audio: {exc.message}"
    return pcm16_bytes(wave, rate)


def embed_clips(
    root: Path | None, audio_paths: tuple[str, ...], budget: AudioBudget
) -> tuple[EmbeddedClip, ...]:
    """One example's clips, embedded all together or (over budget) not at all, so no example is half-heard."""
    if root is None:
        return tuple(EmbeddedClip(path, problem="data root unknown (pass --data)") for path in audio_paths)
    encoded = [_encode(root, path) for path in audio_paths]
    if not budget.take(sum(len(wav) for wav in encoded if isinstance(wav, bytes))):
        over = f"not embedded: audio budget of {budget.limit / 1e6:g} MB for this task used up"
        return tuple(
            EmbeddedClip(path, problem=wav if isinstance(wav, str) else over)
            for path, wav in zip(audio_paths, encoded, strict=True)
        )
    return tuple(
        EmbeddedClip(path, problem=wav)
        if isinstance(wav, str)
        else EmbeddedClip(path, data_uri="data:audio/wav;base64," + base64.b64encode(wav).decode("ascii"))
        for path, wav in zip(audio_paths, encoded, strict=True)
    )
