"""AudioLength (total duration in seconds) and AudioLengthHard (non-silent seconds)."""

from __future__ import annotations

from .base import TaskSpec, integer_labels, register

_INSTRUCTION = (
    "Each audio clip below comes with a label. A hidden rule, the same for every clip in this set, maps "
    "the audio to its label: the label is a whole number that depends on the timing of the clip. Work out "
    "the rule from the labelled examples and apply it to the query clip. Answer with a single integer only."
)

AUDIO_LENGTH = register(TaskSpec("AudioLength", 3, "length", integer_labels(1, 20), "integer", _INSTRUCTION))
AUDIO_LENGTH_HARD = register(
    TaskSpec("AudioLengthHard", 4, "length", integer_labels(0, 20), "integer", _INSTRUCTION)
)
