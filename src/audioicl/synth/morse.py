"""Morse keying with ITU timing, and our list of common 5-letter words for the MorseCode task.

Timing (ITU-R M.1677-1): dot 1 unit, dash 3 units, gap inside a letter 1 unit, between letters 3 units,
between words 7 units; one unit is 1.2 / WPM seconds (the PARIS standard), rounded to a whole number of
samples so that every element lasts an exact number of units (at the default 20 WPM and 16 kHz a unit is
960 samples). Each element is a sine burst of ``tone_hz`` whose raised-cosine ramps of ``ramp_ms`` lie
inside the element (no clicks, durations unchanged); the oscillator runs continuously, and gaps are exact
digital zeros. The original benchmark did not document its speed, tone or word list; these are ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from .dsp import raised_cosine

DEFAULT_WPM = 20.0
"""Words per minute: a comfortable speed for trained operators (unit = 60 ms)."""
DEFAULT_TONE_HZ = 600.0
"""Sidetone pitch: the usual 500-800 Hz range of receivers and practice oscillators."""
AMPLITUDE = 0.8

DOT_UNITS, DASH_UNITS = 1, 3
ELEMENT_GAP_UNITS, LETTER_GAP_UNITS, WORD_GAP_UNITS = 1, 3, 7

MORSE_CODE: dict[str, str] = {
    "a": ".-",
    "b": "-...",
    "c": "-.-.",
    "d": "-..",
    "e": ".",
    "f": "..-.",
    "g": "--.",
    "h": "....",
    "i": "..",
    "j": ".---",
    "k": "-.-",
    "l": ".-..",
    "m": "--",
    "n": "-.",
    "o": "---",
    "p": ".--.",
    "q": "--.-",
    "r": ".-.",
    "s": "...",
    "t": "-",
    "u": "..-",
    "v": "...-",
    "w": ".--",
    "x": "-..-",
    "y": "-.--",
    "z": "--..",
    "0": "-----",
    "1": ".----",
    "2": "..---",
    "3": "...--",
    "4": "....-",
    "5": ".....",
    "6": "-....",
    "7": "--...",
    "8": "---..",
    "9": "----.",
}


@dataclass(frozen=True)
class MorseStyle:
    wpm: float = DEFAULT_WPM
    tone_hz: float = DEFAULT_TONE_HZ
    ramp_ms: float = 5.0


def unit_seconds(wpm: float) -> float:
    """Length of one Morse unit (a dot) at ``wpm`` words per minute."""
    if wpm <= 0:
        raise ValueError(f"wpm must be positive, got {wpm}")
    return 1.2 / wpm


def unit_samples(wpm: float, sr: int) -> int:
    """One unit as a whole number of samples (what ``key_text`` uses)."""
    return max(1, int(round(unit_seconds(wpm) * sr)))


def keying_units(text: str) -> list[tuple[bool, int]]:
    """The key-down / key-up schedule of ``text`` as (key down?, length in units), gaps included.

    Letters and digits only, words separated by whitespace; case is ignored.
    """
    words = text.lower().split()
    if not words:
        raise ValueError("nothing to key: the text is empty")
    schedule: list[tuple[bool, int]] = []
    for w, word in enumerate(words):
        if w:
            schedule.append((False, WORD_GAP_UNITS))
        for c, char in enumerate(word):
            if char not in MORSE_CODE:
                raise ValueError(f"no Morse code for {char!r} in {text!r}")
            if c:
                schedule.append((False, LETTER_GAP_UNITS))
            for e, symbol in enumerate(MORSE_CODE[char]):
                if e:
                    schedule.append((False, ELEMENT_GAP_UNITS))
                schedule.append((True, DOT_UNITS if symbol == "." else DASH_UNITS))
    return schedule


def key_text(text: str, style: MorseStyle = MorseStyle(), sr: int = 16000, lead_s: float = 0.1) -> np.ndarray:
    """``text`` keyed in Morse as float32, with ``lead_s`` of silence before and after."""
    unit = unit_samples(style.wpm, sr)
    lead = int(round(lead_s * sr))
    schedule = keying_units(text)
    gate = np.zeros(lead + sum(units for _, units in schedule) * unit + lead)
    ramp = raised_cosine(int(round(style.ramp_ms * sr / 1000.0)), centred=True)
    position = lead
    for key_down, units in schedule:
        length = units * unit
        if key_down:
            gate[position : position + length] = _element_envelope(length, ramp)
        position += length
    tone = np.sin(2.0 * np.pi * style.tone_hz * (np.arange(len(gate)) + 0.5) / sr)
    return (AMPLITUDE * gate * tone).astype(np.float32)


def _element_envelope(length: int, ramp: np.ndarray) -> np.ndarray:
    n = min(len(ramp), length // 2)
    ramp = ramp if n == len(ramp) else raised_cosine(n, centred=True)
    env = np.ones(length)
    env[:n] = ramp
    env[length - n :] = ramp[::-1]
    return env


def _load_words() -> tuple[str, ...]:
    text = resources.files(__package__).joinpath("words5.txt").read_text(encoding="utf-8")
    return tuple(line.strip() for line in text.splitlines() if line.strip())


WORDS_5: tuple[str, ...] = _load_words()
"""Common lowercase 5-letter English words (our own list, sorted, unique; no proper nouns)."""
