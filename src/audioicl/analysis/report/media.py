"""Images in the page as base64 data URIs; clips beside it as files, with a size budget for the audio.

Clips are re-encoded to 16 kHz mono 16-bit FLAC (lossless: the samples a model gets, at about half the size of
WAV) and written once per distinct content into ``clips/`` beside the page (``CLIP_FOLDER``), named by their
digest: two players of the same clip (the Morse bank in every MorseCode prompt, a clip that serves several
episodes) share one file. The page itself stays small (the demo's was 30 MB with its clips inline). An example's
clips are placed whole or not at all, so the page never shows an example that cannot be listened to.
"""

from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from audioicl.audio import SAMPLE_RATE, load
from audioicl.dataset.meta import resolve_audio_path
from audioicl.errors import AudioICLError

CLIP_FOLDER = "clips"  # beside the page: its players' files, by content


@dataclass(frozen=True)
class EmbeddedClip:
    """A clip ready for an ``<audio>`` player, or why it is not there (``problem``).

    ``src``: the clip's file, relative to the page (``clips/<digest>.flac``); ``clip_id`` names the page's one
    player that carries it: every player of the same content carries the same id and the same ``src``.
    """

    path: str
    src: str | None = None
    problem: str | None = None
    clip_id: str | None = None


def megabytes(size: float) -> str:
    """A size for people: 2.7 MB, 24 MB, 650 kB."""
    if size < 1e6:
        return f"{size / 1e3:.0f} kB"
    return f"{size / 1e6:.1f} MB" if size < 10e6 else f"{size / 1e6:.0f} MB"


class AudioBudget:
    """Bytes of encoded audio (FLAC files in ``CLIP_FOLDER``) the page may still play; each distinct clip counts once.

    It also holds the page's clips by content, so an example is charged only for clips not yet on the page.
    """

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self._encoded: dict[tuple[Path, str], bytes | str] = {}  # (root, path) → FLAC bytes or a problem
        self._on_page: dict[str, EmbeddedClip] = {}  # sha256 of the FLAC bytes → the page's copy
        # what the page's players read: file name in CLIP_FOLDER → FLAC bytes
        self.files: dict[str, bytes] = {}

    @property
    def clips(self) -> int:
        """Distinct clips placed so far."""
        return len(self._on_page)

    def take(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def encoded(self, root: Path, audio_path: str) -> bytes | str:
        key = (root, audio_path)
        if key not in self._encoded:
            self._encoded[key] = _encode(root, audio_path)
        return self._encoded[key]

    def new_bytes(self, encoded: list[bytes | str]) -> int:
        """What embedding these clips would add to the page: the distinct contents not on it yet."""
        fresh = {_digest(wav): len(wav) for wav in encoded if isinstance(wav, bytes)}
        return sum(size for digest, size in fresh.items() if digest not in self._on_page)

    def place(self, path: str, wav: bytes) -> EmbeddedClip:
        digest = _digest(wav)
        if digest not in self._on_page:
            name = f"{digest[:16]}.flac"
            self.files[name] = wav
            self._on_page[digest] = EmbeddedClip(
                path, src=f"{CLIP_FOLDER}/{name}", clip_id="clip-" + digest[:16]
            )
        shared = self._on_page[digest]
        return EmbeddedClip(path, src=shared.src, clip_id=shared.clip_id)


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _digest(wav: bytes) -> str:
    return hashlib.sha256(wav).hexdigest()


def flac_bytes(wave: np.ndarray, rate: int = SAMPLE_RATE) -> bytes:
    """A mono 16-bit FLAC file in memory. Samples are scaled by 32768 (the inverse of how 16-bit files are
    read), so a clip decoded from a 16-bit file is carried bit-exactly."""
    samples = np.clip(np.rint(np.asarray(wave, dtype=np.float64) * 32768.0), -32768, 32767).astype(np.int16)
    buffer = io.BytesIO()
    sf.write(buffer, samples, rate, format="FLAC", subtype="PCM_16")
    return buffer.getvalue()


def _encode(root: Path, audio_path: str) -> bytes | str:
    """The clip as 16 kHz mono 16-bit FLAC bytes, or why it cannot be had."""
    try:
        wave, rate = load(resolve_audio_path(root, audio_path), SAMPLE_RATE)
    except AudioICLError as exc:
        return f"missing audio: {exc.message}"
    return flac_bytes(wave, rate)


def embed_clips(
    root: Path | None, audio_paths: tuple[str, ...], budget: AudioBudget
) -> tuple[EmbeddedClip, ...] | None:
    """One example's clips, embedded all together, or None when the clips not yet on the page do not fit in
    the budget (the example is then left out: no example is shown half-heard or silent).

    A clip that cannot be read is shown with its problem (the example stays: the problem is worth seeing), and
    so is every clip when ``root`` is unknown. A budget of 0 embeds nothing and leaves every example in, text
    only.
    """
    if root is None:
        return tuple(EmbeddedClip(path, problem="data root unknown (pass --data)") for path in audio_paths)
    if budget.limit <= 0:
        return tuple(
            EmbeddedClip(path, problem="audio left out (--audio-budget-mb 0)") for path in audio_paths
        )
    encoded = [budget.encoded(root, path) for path in audio_paths]
    if not budget.take(budget.new_bytes(encoded)):
        return None
    return tuple(
        EmbeddedClip(path, problem=wav) if isinstance(wav, str) else budget.place(path, wav)
        for path, wav in zip(audio_paths, encoded, strict=True)
    )
