"""Audio I/O: load anything soundfile reads as mono float32 at a target rate; write 16-bit PCM WAV."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from .errors import AudioICLError
from .files import write_atomic

SAMPLE_RATE = 16_000


def to_mono(data: np.ndarray) -> np.ndarray:
    return data.mean(axis=1) if data.ndim == 2 else data


def resample(wave: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target:
        return wave
    return soxr.resample(wave, rate, target, quality="HQ").astype(np.float32, copy=False)


def load(path: str | os.PathLike, sr: int | None = SAMPLE_RATE) -> tuple[np.ndarray, int]:
    """Decode ``path`` to mono float32; resample to ``sr`` unless it is None. Errors name the file."""
    if not os.path.exists(path):  # libsndfile reports a missing file only as "System error"
        raise AudioICLError("audio file not found", file=str(path))
    try:
        data, rate = sf.read(str(path), dtype="float32", always_2d=False)
    except FileNotFoundError as exc:
        raise AudioICLError("audio file not found", file=str(path)) from exc
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        raise AudioICLError(f"cannot decode audio: {exc}", file=str(path)) from exc
    wave = np.ascontiguousarray(to_mono(data), dtype=np.float32)
    if sr is not None:
        wave, rate = resample(wave, rate, sr), sr
    return wave, rate


def pcm16_bytes(wave: np.ndarray, sr: int = SAMPLE_RATE, *, scale: float = 32767.0) -> bytes:
    """A complete mono 16-bit PCM WAV file in memory; samples are clipped to [-1, 1].

    The canonical 44-byte header (as libsndfile writes it) is packed directly and the samples converted in
    place in one float64 copy (np.rint is np.round's half-to-even rounding): the builder writes ~12k files,
    and this is 7x faster than chained temporaries, with the same bytes.

    ``scale``: 32767 is libsndfile's writing convention (the builder's files); 32768 inverts how soundfile
    and librosa read 16-bit samples (``int / 32768``), so a clip decoded from a 16-bit file is sent
    bit-exactly (the ``openai`` backend's encoding).
    """
    wave = np.asarray(wave)
    if wave.ndim != 1:
        raise ValueError(f"pcm16_bytes writes mono audio; got an array of shape {wave.shape}")
    scaled = wave.astype(np.float64)
    np.clip(scaled, -1.0, 1.0, out=scaled)
    scaled *= scale
    np.rint(scaled, out=scaled)
    np.clip(scaled, -32768.0, 32767.0, out=scaled)
    data = scaled.astype("<i2").tobytes()
    fmt = struct.pack("<HHIIHH", 1, 1, sr, sr * 2, 2, 16)  # PCM, mono, rate, byte rate, block align, bits
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + (b"data" + struct.pack("<I", len(data)) + data)
    )


def write_wav(path: str | os.PathLike, wave: np.ndarray, sr: int = SAMPLE_RATE) -> None:
    """Write 16-bit PCM WAV atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pcm16_bytes(wave, sr))
