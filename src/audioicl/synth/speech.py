"""Spoken digits and words with espeak-ng (the shared library and data shipped by ``espeakng-loader``).

The library is driven through ctypes in SYNCHRONOUS mode: ``espeak_Synth`` returns after the whole utterance has
been rendered, handing the samples to a callback that collects them. espeak-ng keeps global state, so every call
goes through one process-wide lock, and a forked worker (the builder's multiprocessing pool) initialises its own
copy on first use. Utterances are cached per process because the same digits are spoken thousands of times.

Determinism: out of the box espeak-ng's output depends on what it spoke before (pitch "flutter" and "roughness"
run on counters that are never reset, and breath noise on a random generator). We reseed the generator before
every utterance and speak with voice variants that turn flutter and roughness off: a copy of the package's data
folder (symbolic links, plus patched variant files) in the user's cache folder.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audioicl.audio import SAMPLE_RATE, resample
from audioicl.errors import AudioICLError

from .dsp import fade, trim_silence

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_CHARS_UTF8 = 1
_PARAM_RATE = 1
_PARAM_VOLUME = 2
_PARAM_PITCH = 3
_VOLUME = 70  # percent; below 100 so espeak's automatic gain control (whose state persists) never engages
_STEADY = "flutter 0\nroughness 0\n"
_STEADY_VARIANT = "audioicl-steady"  # used for voices named without a "+variant"
_DATA_LAYOUT_VERSION = "1"
_EE_OK = 0
_FADE_MS = 3.0
_TRIM_THRESHOLD_DB = -40.0

_SYNTH_CALLBACK = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p
)


@dataclass(frozen=True)
class Voice:
    """An espeak-ng voice: ``name`` is a language voice with an optional ``+variant`` (e.g. ``en-gb-x-rp+f2``);
    ``rate`` in words per minute; ``pitch`` 0-100 (espeak's base pitch, 50 is the voice's default)."""

    name: str
    rate: int
    pitch: int


VOICES: tuple[Voice, ...] = (
    Voice("en-us", 165, 50),
    Voice("en-us+f2", 160, 60),
    Voice("en-gb-x-rp+m3", 150, 40),
    Voice("en+f4", 175, 55),
    Voice("en-gb-x-gbclan+m4", 140, 45),
    Voice("en-us-nyc+m7", 185, 35),
    Voice("en-029+f5", 155, 70),
    Voice("en-gb-x-gbcwmd+f3", 170, 50),
)


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "audioicl"


def _steady_data_dir(source: Path) -> Path:
    """A copy of espeak-ng's data folder whose voice variants have flutter and roughness off (built once, shared).

    Everything is a symbolic link into ``source`` except ``voices/!v``, whose variant files are patched copies.
    The folder is built under a temporary name and renamed into place, so concurrent processes never see half of it.
    """
    variants = sorted((source / "voices" / "!v").iterdir())
    key = hashlib.blake2b(digest_size=8)
    key.update(f"{_DATA_LAYOUT_VERSION}\0{source.resolve()}".encode())
    for variant in variants:
        key.update(f"\0{variant.name}:{variant.stat().st_size}".encode())
    target = _cache_root() / f"espeak-ng-data-{key.hexdigest()}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f"{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)  # left over by a crashed process with the same id
    (staging / "voices" / "!v").mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name != "voices":
            (staging / entry.name).symlink_to(entry.resolve())
    for entry in (source / "voices").iterdir():
        if entry.name != "!v":
            (staging / "voices" / entry.name).symlink_to(entry.resolve())
    for variant in variants:
        text = variant.read_bytes().decode("latin-1")
        (staging / "voices" / "!v" / variant.name).write_bytes(f"{text}\n{_STEADY}".encode("latin-1"))
    (staging / "voices" / "!v" / _STEADY_VARIANT).write_text(_STEADY)
    try:
        staging.rename(target)
    except OSError:  # another process finished first
        if not target.is_dir():
            raise
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _variant_name(voice: Voice) -> str:
    return voice.name if "+" in voice.name else f"{voice.name}+{_STEADY_VARIANT}"


class _Engine:
    """The loaded library, initialised once per process (a fork makes the child initialise again)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pid: int | None = None
        self.lib: ctypes.CDLL | None = None
        self.rate = 0
        self._chunks: list[np.ndarray] = []
        self._callback = _SYNTH_CALLBACK(self._collect)

    def _collect(self, wav, numsamples: int, _events) -> int:
        if numsamples > 0 and wav:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(numsamples,)).copy())
        return 0  # 0 = continue synthesis

    def _load(self) -> ctypes.CDLL:
        try:
            import espeakng_loader

            lib = ctypes.CDLL(espeakng_loader.get_library_path())
            data_path = str(_steady_data_dir(Path(espeakng_loader.get_data_path())))
        except (ImportError, OSError, RuntimeError) as exc:
            raise AudioICLError(f"cannot load espeak-ng from the espeakng-loader package: {exc}") from exc
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_SetSynthCallback.argtypes = [_SYNTH_CALLBACK]
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [
            ctypes.c_void_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_ng_SetRandSeed.argtypes = [ctypes.c_long]
        rate = lib.espeak_Initialize(_AUDIO_OUTPUT_SYNCHRONOUS, 0, data_path.encode(), 0)
        if rate <= 0:
            raise AudioICLError(f"espeak-ng failed to initialise with data at {data_path}")
        lib.espeak_SetSynthCallback(self._callback)
        self.rate = rate
        return lib

    def _ready(self) -> ctypes.CDLL:
        if self.lib is None or self.pid != os.getpid():
            self.lib = self._load()
            self.pid = os.getpid()
        return self.lib

    def synthesize(self, text: str, voice: Voice) -> tuple[np.ndarray, int]:
        """``text`` spoken in ``voice`` as float32 at the engine's native rate."""
        with self.lock:
            lib = self._ready()
            if lib.espeak_SetVoiceByName(_variant_name(voice).encode()) != _EE_OK:
                raise AudioICLError(f"espeak-ng has no voice {voice.name!r}")
            lib.espeak_SetParameter(_PARAM_RATE, voice.rate, 0)
            lib.espeak_SetParameter(_PARAM_PITCH, voice.pitch, 0)
            lib.espeak_SetParameter(_PARAM_VOLUME, _VOLUME, 0)
            lib.espeak_ng_SetRandSeed(0)
            data = text.encode() + b"\0"
            self._chunks = []
            status = lib.espeak_Synth(data, len(data), 0, _POS_CHARACTER, 0, _CHARS_UTF8, None, None)
            chunks, self._chunks = self._chunks, []
        if status != _EE_OK:
            raise AudioICLError(
                f"espeak-ng failed to speak {text!r} in voice {voice.name!r} (status {status})"
            )
        pcm = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
        return (pcm.astype(np.float32) / 32768.0), self.rate


_ENGINE = _Engine()


def _reset_lock_in_child() -> None:
    # A lock held by another thread at fork time would stay locked forever in the child.
    _ENGINE.lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_lock_in_child)


def _read_only(wave: np.ndarray) -> np.ndarray:
    wave.setflags(write=False)
    return wave


@functools.lru_cache(maxsize=512)
def speak(text: str, voice: Voice, sr: int = SAMPLE_RATE) -> np.ndarray:
    """``text`` spoken by ``voice`` at ``sr`` (float32 mono, read-only: copy before changing it)."""
    wave, rate = _ENGINE.synthesize(text, voice)
    return _read_only(np.ascontiguousarray(resample(wave, rate, sr), dtype=np.float32))


@functools.lru_cache(maxsize=1024)
def speak_digit(d: int, voice: Voice, sr: int = SAMPLE_RATE) -> np.ndarray:
    """The digit ``d`` (0-9) spoken, trimmed of leading/trailing silence, with 3 ms fades (read-only)."""
    if not 0 <= d <= 9:
        raise AudioICLError(f"speak_digit needs a digit 0-9, got {d}")
    trimmed = trim_silence(speak(str(d), voice, sr), sr, threshold_db=_TRIM_THRESHOLD_DB)
    return _read_only(np.ascontiguousarray(fade(trimmed, sr, _FADE_MS), dtype=np.float32))
