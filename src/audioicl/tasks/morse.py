"""MorseCode: a lowercase English word keyed in Morse code as a tone."""

from __future__ import annotations

from .base import LabelSpace, TaskSpec, register

_INSTRUCTION = (
    "Each audio clip below comes with a label. The clips are tones keyed in a hidden code that spells a "
    "lowercase English word, and the label is that word; the code is the same throughout this set. Learn the "
    "code from the labelled examples (and the letter clips, when given) and decode the query clip. Answer "
    "with the word only, in lowercase."
)

MORSE_CODE = register(
    TaskSpec("MorseCode", 6, "morse", LabelSpace("lowercase words", pattern=r"[a-z]+"), "word", _INSTRUCTION)
)
