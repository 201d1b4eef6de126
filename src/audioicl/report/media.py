"""Embedding images and clips in the page as base64 data URIs, with a size budget for the audio."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from ..audio import SAMPLE_RATE, load, pcm16_bytes
from ..errors import AudioICLError
from ..meta import resolve_audio_path


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


def embed_clip(root: Path | None, audio_path: str, budget: AudioBudget) -> EmbeddedClip:
    """Load a clip (mono, 16 kHz), re-encode it as PCM16 WAV and embed it if the budget allows."""
    if root is None:
        return EmbeddedClip(audio_path, problem="data root unknown (pass --data)")
    try:
        wave, rate = load(resolve_audio_path(root, audio_path), SAMPLE_RATE)
    except AudioICLError as exc:
        return EmbeddedClip(audio_path, problem=f"missing audio: {exc.message}")
    wav = pcm16_bytes(wave, rate)
    if not budget.take(len(wav)):
        return EmbeddedClip(
            audio_path, problem=f"not embedded: audio budget of {budget.limit / 1e6:g} MB used up"
        )
    return EmbeddedClip(audio_path, data_uri="data:audio/wav;base64," + base64.b64encode(wav).decode("ascii"))
