"""Where the builder's sounds come from: the procedural synthesizers (default) or real corpora on disk.

``--source KIND=DIR`` swaps one kind of sound for a corpus in the original's layout:

- ``one-shots``: a folder tree of WAVs (Freesound one-shot percussive sounds); family = sub-folder.
- ``digits``: FSDD, files ``<digit>_<speaker>_<n>.wav``; a speaker plays the part of a synthetic voice.
- ``backgrounds``: ESC-50, files ``<fold>-<clip>-<take>-<class>.wav``; classes 0-10 (animals, insects, rain).
- ``machines``: DCASE, one folder per machine type holding ``train``/``test`` WAVs named
  ``section_00_..._normal_...`` / ``..._anomaly_...``.

Every bank is a pure function of (seed, index or name): nothing depends on what was drawn before, so the
builder's workers can ask for any sound in any order.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from audioicl.audio import SAMPLE_RATE, load
from audioicl.errors import AudioICLError
from audioicl.seeding import derive_seed, rng_for
from audioicl.synth import dsp, percussion, speech
from audioicl.synth.percussion import OneShot

SOURCE_KINDS = ("one-shots", "digits", "backgrounds", "machines")
MAX_ONE_SHOT_SECONDS = percussion.MAX_SECONDS  # longer corpus files are cut (with a fade) to this
DIGIT_FADE_MS = 3.0
BACKGROUND_CLASSES = range(0, 11)  # ESC-50: 0-9 animals (7 insects), 10 rain
SYNTH_NORMALS_PER_MACHINE = 40
SYNTH_ANOMALIES_PER_MACHINE = 20
_AUDIO_SUFFIXES = {".wav"}


def parse_sources(items: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``["digits=/data/fsdd"]`` → ``(("digits", "/abs/data/fsdd"),)`` sorted by kind; checks kinds and folders."""
    found: dict[str, str] = {}
    for item in items:
        kind, sep, folder = item.partition("=")
        kind = kind.strip()
        if not sep or not folder:
            raise AudioICLError(f"--source wants KIND=DIR, got {item!r}")
        if kind not in SOURCE_KINDS:
            raise AudioICLError(f"unknown source kind {kind!r} (known: {', '.join(SOURCE_KINDS)})")
        if kind in found:
            raise AudioICLError(f"--source {kind} given twice")
        path = Path(folder).expanduser().resolve()
        if not path.is_dir():
            raise AudioICLError(f"--source {kind}: not a folder", file=str(path))
        found[kind] = str(path)
    return tuple(sorted(found.items()))


def safe_name(text: str) -> str:
    """A file-name-safe token: letters, digits, ``-`` and single ``_``."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-_")
    return re.sub(r"_{2,}", "_", cleaned) or "x"


def _audio_files(root: Path, kind: str) -> list[Path]:
    files = sorted(p for p in root.rglob("*") if p.suffix.lower() in _AUDIO_SUFFIXES and p.is_file())
    if not files:
        raise AudioICLError(f"--source {kind}: no .wav files found", file=str(root))
    return files


# --------------------------------------------------------------------------------------------- one-shots


class OneShotBank(Protocol):
    def get(self, index: int) -> OneShot: ...


class SynthOneShots:
    """The procedural percussion bank (``synth.percussion``), cached per process."""

    def __init__(self, seed: int):
        self.seed = derive_seed(seed, "one-shots")

    @functools.lru_cache(maxsize=2048)  # noqa: B019  (one bank per process, lives as long as it)
    def get(self, index: int) -> OneShot:
        return percussion.one_shot(self.seed, index)


class FileOneShots:
    """A folder tree of WAV one-shots; index ``i`` is file ``i mod n`` in sorted path order."""

    def __init__(self, root: Path):
        self.root = root
        self.files = _audio_files(root, "one-shots")

    @functools.lru_cache(maxsize=2048)  # noqa: B019
    def get(self, index: int) -> OneShot:
        path = self.files[index % len(self.files)]
        wave, _ = load(path)
        limit = int(MAX_ONE_SHOT_SECONDS * SAMPLE_RATE)
        if len(wave) > limit:
            wave = wave[:limit].copy()
            ramp = dsp.raised_cosine(int(0.01 * SAMPLE_RATE))[::-1]
            wave[-len(ramp) :] *= ramp
        if not np.any(wave):
            raise AudioICLError("one-shot is silent", file=str(path))
        family = safe_name("_".join(path.parent.relative_to(self.root).parts) or "root")
        return OneShot(name=safe_name(path.stem), family=family, wave=wave)


# --------------------------------------------------------------------------------------------- digits


class DigitBank(Protocol):
    voices: tuple[str, ...]

    def digit(self, voice: str, d: int, rng: np.random.Generator) -> np.ndarray: ...


class SynthDigits:
    """espeak-ng voices (``synth.speech``); the rng is unused: a voice says a digit one way."""

    def __init__(self) -> None:
        self._by_name = {v.name: v for v in speech.VOICES}
        self.voices = tuple(self._by_name)

    def digit(self, voice: str, d: int, rng: np.random.Generator) -> np.ndarray:
        return speech.speak_digit(d, self._by_name[voice])


class FileDigits:
    """FSDD recordings ``<digit>_<speaker>_<n>.wav``: a speaker with all digits 1-9 is a voice; the take is
    drawn with the clip's rng; each take is trimmed of silence and faded like the synthetic digits."""

    def __init__(self, root: Path):
        takes: dict[str, dict[int, list[Path]]] = {}
        for path in _audio_files(root, "digits"):
            match = re.fullmatch(r"(\d)_([A-Za-z0-9-]+)_(\d+)", path.stem)
            if match:
                takes.setdefault(match.group(2), {}).setdefault(int(match.group(1)), []).append(path)
        self._takes = {s: t for s, t in takes.items() if all(d in t for d in range(1, 10))}
        if not self._takes:
            raise AudioICLError(
                "--source digits: no speaker has recordings of every digit 1-9 named <digit>_<speaker>_<n>.wav",
                file=str(root),
            )
        self.voices = tuple(sorted(self._takes))

    def digit(self, voice: str, d: int, rng: np.random.Generator) -> np.ndarray:
        options = self._takes[voice][d]
        return self._trimmed(options[int(rng.integers(len(options)))])

    @functools.lru_cache(maxsize=4096)  # noqa: B019
    def _trimmed(self, path: Path) -> np.ndarray:
        wave = dsp.trim_silence(load(path)[0], SAMPLE_RATE)
        if wave.size == 0:
            raise AudioICLError("spoken digit is silent", file=str(path))
        return dsp.fade(wave, SAMPLE_RATE, DIGIT_FADE_MS)


# --------------------------------------------------------------------------------------------- backgrounds


class BackgroundBank(Protocol):
    def render(self, rng: np.random.Generator, seconds: float) -> np.ndarray: ...


class SynthBackgrounds:
    """Procedural ambiences (``synth.ambience``); the family is drawn with the rng."""

    def render(self, rng: np.random.Generator, seconds: float) -> np.ndarray:
        from audioicl.synth import ambience

        family = ambience.FAMILIES[int(rng.integers(len(ambience.FAMILIES)))]
        return ambience.background(family, rng, seconds)


class FileBackgrounds:
    """ESC-50 clips of classes 0-10; a clip shorter than asked is looped."""

    def __init__(self, root: Path):
        self.files = [
            p
            for p in _audio_files(root, "backgrounds")
            if (m := re.fullmatch(r"\d+-\d+-[A-Za-z0-9]+-(\d+)", p.stem))
            and int(m.group(1)) in BACKGROUND_CLASSES
        ]
        if not self.files:
            raise AudioICLError(
                "--source backgrounds: no ESC-50 files <fold>-<clip>-<take>-<class>.wav of classes 0-10",
                file=str(root),
            )

    def render(self, rng: np.random.Generator, seconds: float) -> np.ndarray:
        path = self.files[int(rng.integers(len(self.files)))]
        wave = self._load(path)
        return np.resize(wave, int(round(seconds * SAMPLE_RATE))).astype(np.float32)

    @functools.lru_cache(maxsize=256)  # noqa: B019
    def _load(self, path: Path) -> np.ndarray:
        wave = load(path)[0]
        if not np.any(wave):
            raise AudioICLError("background clip is silent", file=str(path))
        return wave


# --------------------------------------------------------------------------------------------- machines


@dataclass(frozen=True)
class MachineClip:
    """One recording of a machine pool: where it goes in the dataset, and how to get its audio."""

    path: str  # relative to the dataset root: data/anomalous/<type>/<split>/<name>.wav
    anomalous: bool
    index: int  # position in its pool (synthetic clips are rendered from it)
    origin: str | None = None  # the corpus file, for real recordings


@dataclass(frozen=True)
class MachinePool:
    normals: tuple[MachineClip, ...]
    anomalies: tuple[MachineClip, ...]


class MachineBank(Protocol):
    types: tuple[str, ...]

    def pool(self, machine_type: str, size: tuple[int, int] | None = None) -> MachinePool:
        """The type's recordings; ``size`` asks for at least that many (normal, anomalous) ones, which a
        synthetic bank makes and a corpus has or has not."""
        ...

    def render(self, machine_type: str, clip: MachineClip) -> np.ndarray: ...


def _anomalous_path(machine_type: str, split: str, name: str) -> str:
    return f"data/anomalous/{machine_type}/{split}/{name}"


class SynthMachines:
    """One procedural machine unit per type (``synth.machines``) and a fixed pool of normal and anomalous
    10 s recordings of it, named like DCASE's (normals under ``train``, anomalies under ``test``)."""

    def __init__(self, seed: int):
        self.seed = seed

    @property
    def _machines(self):
        from audioicl.synth import machines  # imported on first use: only AnomalyDetect needs it

        return machines

    @property
    def types(self) -> tuple[str, ...]:
        return tuple(self._machines.MACHINE_TYPES)

    def pool(self, machine_type: str, size: tuple[int, int] | None = None) -> MachinePool:
        """``SYNTH_NORMALS_PER_MACHINE`` normal and ``SYNTH_ANOMALIES_PER_MACHINE`` anomalous takes, or more
        when ``size`` asks (clip ``i`` is the same whatever the pool's size)."""
        wanted_normals, wanted_anomalies = size or (0, 0)
        normals = max(wanted_normals, SYNTH_NORMALS_PER_MACHINE)
        anomalies = max(wanted_anomalies, SYNTH_ANOMALIES_PER_MACHINE)

        def clips(split: str, kind: str, count: int, anomalous: bool) -> tuple[MachineClip, ...]:
            return tuple(
                MachineClip(
                    _anomalous_path(
                        machine_type, split, f"section_00_source_{split}_{kind}_{i:04d}_noAttribute.wav"
                    ),
                    anomalous,
                    i,
                )
                for i in range(count)
            )

        return MachinePool(
            clips("train", "normal", normals, False), clips("test", "anomaly", anomalies, True)
        )

    @functools.lru_cache(maxsize=16)  # noqa: B019
    def _unit(self, machine_type: str):
        return self._machines.machine_unit(machine_type, rng_for(self.seed, "machines", machine_type, "unit"))

    def render(self, machine_type: str, clip: MachineClip) -> np.ndarray:
        kind = "anomaly" if clip.anomalous else "normal"
        rng = rng_for(self.seed, "machines", machine_type, kind, clip.index)
        anomaly = None
        if clip.anomalous:
            kinds = self._machines.ANOMALY_KINDS[machine_type]
            anomaly = kinds[int(rng.integers(len(kinds)))]
        return self._machines.machine_clip(self._unit(machine_type), rng, anomaly, seconds=10.0)


class FileMachines:
    """DCASE folders: ``<type>/<train|test>/...normal...wav`` and ``...anomaly...wav``, copied as they are."""

    def __init__(self, root: Path):
        self._pools: dict[str, MachinePool] = {}
        for folder in sorted(p for p in root.iterdir() if p.is_dir()):
            normals, anomalies = [], []
            for path in sorted(folder.glob("*/*")):
                if path.suffix.lower() not in _AUDIO_SUFFIXES or path.parent.name not in ("train", "test"):
                    continue
                target = _anomalous_path(
                    safe_name(folder.name), path.parent.name, safe_name(path.stem) + ".wav"
                )
                if "_anomaly_" in path.name:
                    anomalies.append(MachineClip(target, True, len(anomalies), str(path)))
                elif "_normal_" in path.name:
                    normals.append(MachineClip(target, False, len(normals), str(path)))
            if normals and anomalies:
                self._pools[safe_name(folder.name)] = MachinePool(tuple(normals), tuple(anomalies))
        if not self._pools:
            raise AudioICLError(
                "--source machines: no <type>/{train,test}/ folder with both *_normal_* and *_anomaly_* WAVs",
                file=str(root),
            )
        self.types = tuple(self._pools)

    def pool(self, machine_type: str, size: tuple[int, int] | None = None) -> MachinePool:
        return self._pools[machine_type]

    def render(self, machine_type: str, clip: MachineClip) -> np.ndarray:
        return load(clip.origin)[0]


# --------------------------------------------------------------------------------------------- all of them


@dataclass(frozen=True)
class SoundSources:
    """The four banks a build draws from."""

    one_shots: OneShotBank
    digits: DigitBank
    backgrounds: BackgroundBank
    machines: MachineBank

    @classmethod
    def create(cls, seed: int, sources: tuple[tuple[str, str], ...]) -> SoundSources:
        dirs = {kind: Path(folder) for kind, folder in sources}
        return cls(
            one_shots=FileOneShots(dirs["one-shots"]) if "one-shots" in dirs else SynthOneShots(seed),
            digits=FileDigits(dirs["digits"]) if "digits" in dirs else SynthDigits(),
            backgrounds=FileBackgrounds(dirs["backgrounds"]) if "backgrounds" in dirs else SynthBackgrounds(),
            machines=FileMachines(dirs["machines"]) if "machines" in dirs else SynthMachines(seed),
        )
