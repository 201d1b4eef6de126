"""Text transcripts of clips, for the ``transcript`` condition: the text forms, written and read back.

The condition replaces every clip of a prompt by its transcript, so the same rule is learned from text with
perfect perception (audio ICL against text ICL). A transcript says what is in the clip and never more: the
events placed and when, durations where duration is what is heard, the spoken digits and the sounds between
them by name, the Morse dots and dashes, which sound plays. It never names a label or a rule (no count, no
sum, no decoded word, no "anomalous").

A transcript is either built, from what the builder placed (the tasks write it; sound identities are a
one-shot's family and an opaque token, ``clap #3f9a2c``, the same in every episode; stored in the dataset's
``meta/transcripts.jsonl``, ``audioicl.dataset.sidecar``), or perceived from the audio
(``audioicl.perception.transcribe``). Both use the same forms (each function below writes one, ``read`` reads
any of them back, for the built-in solvers)::

    10.00 s: the same kick sound at 0.52, 2.10, 7.33 s                      events (AudioCount)
    10.00 s: a sound at 0.52, 2.10 s over continuous background noise        events (AudioCountHard)
    12.00 s: noise with short percussive sounds; digital silence 5.20-5.90 s  timeline (AudioLength(Hard))
    spoken "seven", then clap #3f9a2c, then spoken "four"                    spoken (AudioOperator(Hard))
    Morse tone: .--. .-.. .- -. -                                            morse (MorseCode, the bank)
    snare #0e41d7, then kick #a2290c, then snare #0e41d7                     sounds (AudioRemap)
    10.00 s machine sound, measured: spectrum dB ...; ...                    measured (AnomalyDetect)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")

# --------------------------------------------------------------------------- writing


def _seconds(value: float) -> str:
    return f"{value:.2f}"


def events_text(seconds: float, sound: str, onsets: Sequence[float], background: bool = False) -> str:
    """One sound placed at ``onsets`` (seconds) on a canvas of ``seconds``."""
    head = f"{_seconds(seconds)} s: "
    body = f"{sound} at {', '.join(_seconds(t) for t in onsets)} s" if onsets else "no distinct sound"
    return head + body + (" over continuous background noise" if background else "")


def timeline_text(seconds: float, silences: Sequence[tuple[float, float]], silent: bool = False) -> str:
    """A noise bed with percussive fragments (``silent``: none, the clip is all silence) and its blocks of
    exact digital silence as (start, end) seconds."""
    what = "digital silence" if silent else "noise with short percussive sounds"
    if silent:
        return f"{_seconds(seconds)} s: {what} 0.00-{_seconds(seconds)} s"
    blocks = ", ".join(f"{_seconds(a)}-{_seconds(b)} s" for a, b in silences)
    return f"{_seconds(seconds)} s: {what}; " + (f"digital silence {blocks}" if blocks else "no silence")


def spoken_text(parts: Sequence[int | str]) -> str:
    """Spoken digits (ints) and named sounds (strs), in order."""
    return ", then ".join(f'spoken "{DIGIT_WORDS[p]}"' if isinstance(p, int) else p for p in parts)


def morse_text(codes: Sequence[Sequence[str]]) -> str:
    """Dot-dash codes of a keyed tone, grouped by word (letters apart by spaces, words by `` / ``)."""
    return "Morse tone: " + " / ".join(" ".join(word) for word in codes)


def sounds_text(names: Sequence[str]) -> str:
    """Sounds played one after the other."""
    return ", then ".join(names)


def measured_text(seconds: float, groups: Mapping[str, Sequence[float]]) -> str:
    """Named groups of measurements of a machine recording."""
    body = "; ".join(f"{name} {' '.join(f'{v:.2f}' for v in values)}" for name, values in groups.items())
    return f"{_seconds(seconds)} s machine sound, measured: {body}"


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class Reading:
    """What a transcript says, in the terms the built-in solvers measure audio in. ``kind``: events,
    timeline, spoken, morse, sounds or measured."""

    kind: str
    seconds: float | None = None
    onsets: tuple[float, ...] = ()
    silences: tuple[tuple[float, float], ...] = ()
    spoken: tuple[int | str, ...] = ()  # digits and sound names in order
    codes: tuple[tuple[str, ...], ...] = ()  # Morse codes by word
    sounds: tuple[str, ...] = ()
    values: tuple[float, ...] = field(default=())

    @property
    def non_silent(self) -> float:
        return max(0.0, (self.seconds or 0.0) - sum(b - a for a, b in self.silences))


_NUMBER = r"-?\d+(?:\.\d+)?"
_EVENTS_RE = re.compile(rf"^({_NUMBER}) s: (?:.+? at ((?:{_NUMBER}, )*{_NUMBER}) s|no distinct sound)")
_TIMELINE_RE = re.compile(rf"^({_NUMBER}) s: (?:noise with short percussive sounds|digital silence)")
_SPAN_RE = re.compile(rf"({_NUMBER})-({_NUMBER}) s")
_MEASURED_RE = re.compile(rf"^({_NUMBER}) s machine sound, measured: (.*)$")
_SPOKEN_RE = re.compile(r'^spoken "(\w+)"$')
_MORSE_PREFIX = "Morse tone: "


def read(text: str) -> Reading:
    """The reading of any transcript form; ``ValueError`` for text in none of them."""
    if text.startswith(_MORSE_PREFIX):
        words = text[len(_MORSE_PREFIX) :].split(" / ")
        return Reading("morse", codes=tuple(tuple(w.split()) for w in words if w.strip()))
    if match := _MEASURED_RE.match(text):
        values = tuple(float(v) for v in re.findall(_NUMBER, re.sub(r"[A-Za-z]\w*", " ", match[2])))
        return Reading("measured", seconds=float(match[1]), values=values)
    if match := _TIMELINE_RE.match(text):
        spans = tuple((float(a), float(b)) for a, b in _SPAN_RE.findall(text[match.end() :]))
        return Reading("timeline", seconds=float(match[1]), silences=spans)
    if match := _EVENTS_RE.match(text):
        onsets = tuple(float(t) for t in match[2].split(", ")) if match[2] else ()
        return Reading("events", seconds=float(match[1]), onsets=onsets)
    parts = text.split(", then ")
    if any(_SPOKEN_RE.match(p) for p in parts):
        spoken: list[int | str] = []
        for part in parts:
            word = _SPOKEN_RE.match(part)
            if word and word[1] in DIGIT_WORDS:
                spoken.append(DIGIT_WORDS.index(word[1]))
            else:
                spoken.append(part)
        return Reading("spoken", spoken=tuple(spoken))
    if text and all(re.fullmatch(r"[\w #-]+", p) for p in parts):
        return Reading("sounds", sounds=tuple(parts))
    raise ValueError(f"not a transcript: {text[:60]!r}")
