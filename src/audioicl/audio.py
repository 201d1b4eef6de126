"""Audio I/O: load anything soundfile reads as mono float32 at a target rate; write 16-bit PCM WAV."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from .errors import AudioICLError

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


def info_duration(path: str | os.PathLike) -> float:
    """Duration in seconds from the header, decoding the whole file to catch truncation."""
    wave, rate = load(path, sr=None)
    return len(wave) / rate


def pcm16_bytes(wave: np.ndarray, sr: int = SAMPLE_RATE) -> bytes:
    """A complete 16-bit PCM WAV file in memory; samples are clipped to [-1, 1]."""
    # The canonical 44-byte header, as libsndfile writes it, packed directly (the builder writes ~12k files);
    # np.rint is np.round's half-to-even rounding, several times faster.
    clipped = np.clip(np.asarray(wave, dtype=np.float64), -1.0, 1.0)
    data = np.rint(clipped * 32767.0).astype("<i2").tobytes()
    header = struct.pack(
        "<4sI4s4sIHHIIHH4sI", b"RIFF", 36 + len(data), b"WAVE", b"fmt ", 16, 1, 1, sr, sr * 2, 2, 16, b"data", len(data)
    )
    return header + data


def write_wav(path: str | os.PathLike, wave: np.ndarray, sr: int = SAMPLE_RATE) -> None:
    """Write 16-bit PCM WAV atomically (temporary file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(pcm16_bytes(wave, sr))
    os.replace(tmp, path)
