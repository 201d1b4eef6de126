"""AudioOperator (digit, sound, digit) and AudioOperatorHard (three digits, two sounds)."""

from __future__ import annotations

import itertools

from .base import TaskSpec, label_set, register

DIGITS = range(1, 10)


def binary_values() -> set[int]:
    """Every answer a op b can take: + and ×, and − with a ≥ b."""
    values = set()
    for a, b in itertools.product(DIGITS, repeat=2):
        values |= {a + b, a * b}
        if a >= b:
            values.add(a - b)
    return values


def ternary_values() -> set[int]:
    """Every non-negative answer of three digits with one × and one + or −, × first or second."""
    values = set()
    for a, b, c in itertools.product(DIGITS, repeat=3):
        values |= {a * b + c, a + b * c}
        values |= {v for v in (a * b - c, a - b * c) if v >= 0}
    return values


_INSTRUCTION = (
    "Each audio clip below comes with a label. In every clip a spoken digit, a sound effect and another "
    "spoken digit follow each other (the harder clips have three digits and two sound effects). Each sound "
    "effect stands for an arithmetic operation, the same one throughout this set, and the label is the "
    "result of the spoken expression with the usual precedence. Work out which operation each sound stands "
    "for from the labelled examples and compute the query. Answer with a single integer only."
)

AUDIO_OPERATOR = register(
    TaskSpec(
        "AudioOperator", 2, "operator", label_set(binary_values(), "a op b results"), "integer", _INSTRUCTION
    )
)
AUDIO_OPERATOR_HARD = register(
    TaskSpec(
        "AudioOperatorHard",
        5,
        "operator",
        label_set(ternary_values(), "a op b op c results"),
        "integer",
        _INSTRUCTION,
    )
)
