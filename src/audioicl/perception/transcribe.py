"""Transcripts perceived from the audio, for the clips a dataset's transcript sidecar lacks.

``perceive`` writes a clip's transcript from the audio with ``audioicl.perception.measure``, in the same
forms as the built ones (``audioicl.tasks.transcripts``, which says what a transcript may and may not say),
for every clip the sidecar (``audioicl.dataset.sidecar``) lacks: all of them in the released dataset, which
has none.
Identities are numbered per episode (``sound 1``). Machine recordings are always perceived: what the builder
placed in them is a fault by name, and a listener hears sound, so their transcript is a set of measurements
(``measured: ...``) alike for every clip.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from audioicl.tasks.transcripts import (
    events_text,
    measured_text,
    morse_text,
    sounds_text,
    spoken_text,
    timeline_text,
)

from . import measure as perception
from .memo import Memo

# --------------------------------------------------------------------------- perceived transcripts

MACHINE_TASK = "AnomalyDetect"
SPOKEN_TASKS = {"AudioOperator": 2, "AudioOperatorHard": 3}


@dataclass(frozen=True)
class Heard:
    """A clip to transcribe: its samples and their digest (``prompts.chat.AudioPart``), the group it belongs to
    (a demo's number, 0 for the query, -1 for the Morse bank) and its role in a multi-clip group."""

    wave: np.ndarray
    sr: int
    digest: str
    group: int
    role: str | None = None

    @property
    def seconds(self) -> float:
        return len(self.wave) / self.sr


_MEMO = Memo()  # a clip recurs at every k and in every condition


def _memo(name: str, clip: Heard, measure):
    """``measure(clip)``, once per process for a clip's content and ``name`` while it stays in the memo."""
    return _MEMO.get((name, clip.digest), lambda: measure(clip))


def machine_groups(f: np.ndarray) -> dict[str, list[float]]:
    """``perception.measure.anomaly_features`` (level-free, made for the kinds of machine fault) in named groups:
    the 48-band long-term spectrum averaged to 8 bands, high-band tonality, the mean spectral kurtosis and
    energy spread over their 12 bands, the modulation spectrum of the whole band at 7 rates, each envelope
    band's strongest line, event count and periodicity, kurtosis and crest factor."""
    return {
        "spectrum dB": list(f[:48].reshape(8, 6).mean(axis=1)),
        "tonality": list(f[48:50]),
        "spectral kurtosis": [float(f[50:62].mean())],
        "energy spread": [float(f[62:74].mean())],
        "modulation": list(f[88:95]),
        "modulation lines": list(f[95:98]),
        "events": list(f[98:100]),
        "impulsiveness": list(f[100:104]),
    }


class _Names:
    """Per-episode identities: ``sound 1``, ``sound 2`` ... in order of first appearance; two clips are one
    sound when ``same`` says so."""

    def __init__(self, same) -> None:
        self.same = same
        self.known: list[np.ndarray] = []

    def name(self, wave: np.ndarray) -> str:
        for number, known in enumerate(self.known, start=1):
            if self.same(known, wave):
                return f"sound {number}"
        self.known.append(wave)
        return f"sound {len(self.known)}"


def _identical(a: np.ndarray, b: np.ndarray) -> bool:
    return len(a) == len(b) and bool(np.array_equal(a, b))


def _spoken(task: str, clips: Sequence[Heard]) -> list[str]:
    from audioicl.tasks.operator import (
        GAP_SECONDS,  # the recipe's gap (tasks import this module: no top import)
    )

    n_digits = SPOKEN_TASKS[task]
    names = _Names(lambda a, b: perception.same_sound(a, b, clips[0].sr if clips else 16_000))
    out = []
    for clip in clips:
        cut = _memo(
            f"spoken{n_digits}",
            clip,
            lambda c: perception.spoken_expression(c.wave, c.sr, n_digits, GAP_SECONDS),
        )
        parts: list[int | str] = []
        for position, digit in enumerate(cut.digits):
            parts.append(digit)
            if position < len(cut.fillers):
                s, e = cut.fillers[position]
                parts.append(names.name(clip.wave[s:e]))
        out.append(spoken_text(parts))
    return out


def _matched(refs: dict[str, np.ndarray], clip: Heard) -> str:
    return perception.match_sequence(clip.wave, refs, clip.sr)


def _remap(clips: Sequence[Heard]) -> list[str]:
    """References by identity (a file's exact samples); each MIX as the references of its own group."""
    names = _Names(_identical)
    groups: dict[int, dict[str, Heard]] = {}
    for clip in clips:
        groups.setdefault(clip.group, {})[clip.role or ""] = clip
    out = []
    for clip in clips:
        if clip.role in ("A", "B"):
            out.append(sounds_text([names.name(clip.wave)]))
            continue
        refs = {r: c.wave for r, c in groups[clip.group].items() if r in ("A", "B")}
        if len(refs) < 2:
            out.append(sounds_text(["unknown sound"]))
            continue
        key = "remap:" + ":".join(c.digest for r, c in sorted(groups[clip.group].items()) if r in ("A", "B"))
        pattern = _memo(key, clip, functools.partial(_matched, refs))
        out.append(sounds_text([names.name(refs[c]) for c in pattern]))
    return out


def _alone(task: str, clip: Heard) -> str:
    """Transcripts that need no other clip of the episode."""
    wave, sr = clip.wave, clip.sr
    if task == MACHINE_TASK:
        return measured_text(clip.seconds, machine_groups(perception.anomaly_features(wave, sr)))
    if task == "MorseCode":
        return morse_text(perception.keyed_codes(wave, sr))
    if task in ("AudioLength", "AudioLengthHard"):
        silences = [(s / sr, e / sr) for s, e in perception.digital_silence(wave, sr)]
        silent = len(silences) == 1 and silences[0] == (0.0, clip.seconds)
        return timeline_text(clip.seconds, silences, silent=silent)
    background = task == "AudioCountHard"
    onsets = [t / sr for t in perception.event_onsets(wave, sr, background=background)]
    return events_text(clip.seconds, "a sound", onsets, background=background)


def perceive(task: str, clips: Sequence[Heard]) -> list[str]:
    """Transcripts of an episode's clips (in the order given: bank, demos, query) from their audio.

    Count tasks list the onsets of the one repeated sound (``perception.measure.event_onsets``), length tasks the
    duration and the runs of digital silence, operator tasks the recognised digits and the sounds between
    them numbered per episode, MorseCode the dot-dash codes, AudioRemap each MIX as the references it
    matches, AnomalyDetect the measurements. Tasks the toolkit does not know get the count form."""
    if task in SPOKEN_TASKS:
        return _spoken(task, clips)
    if task == "AudioRemap":
        return _remap(clips)
    return [_memo(task, clip, functools.partial(_alone, task)) for clip in clips]
