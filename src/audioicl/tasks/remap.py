"""AudioRemap: spell a sequence of two reference sounds with the letters the references carry."""

from __future__ import annotations

from .base import LabelSpace, TaskSpec, register

PATTERNS = ("AAB", "ABA", "BAB", "BAA", "ABB", "BBA")

_INSTRUCTION = (
    "Each example below has two reference sounds, A and B, each labelled with a letter, and a mix of three "
    "sounds played one after another, each of them A or B. The label of the mix spells its three sounds in "
    "order with the letters of the references. Learn the rule from the labelled examples and apply it to the "
    "query mix. Answer with exactly three uppercase letters only."
)

AUDIO_REMAP = register(
    TaskSpec(
        "AudioRemap",
        7,
        "remap",
        LabelSpace("three uppercase letters, two distinct", pattern=r"(?=[A-Z]{3}$)(?=.*(.).*(?!\1)[A-Z]).*"),
        "letters",
        _INSTRUCTION,
        multi_clip=True,
        clip_labels={
            "A": LabelSpace("one uppercase letter", pattern=r"[A-Z]"),
            "B": LabelSpace("one uppercase letter", pattern=r"[A-Z]"),
            "MIX": LabelSpace("three uppercase letters", pattern=r"[A-Z]{3}"),
        },
    )
)
