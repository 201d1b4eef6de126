"""AudioCount and AudioCountHard: how many times does one percussive sound occur in a 10 s clip."""

from __future__ import annotations

from .base import TaskSpec, integer_labels, register

COUNT_LABELS = integer_labels(1, 8)

_INSTRUCTION = (
    "Each audio clip below comes with a label. A hidden rule, the same for every clip in this set, maps "
    "the audio to its label: the label is a number determined by what you hear in the clip. Work out the "
    "rule from the labelled examples and apply it to the query clip. Answer with a single integer only."
)

AUDIO_COUNT = register(TaskSpec("AudioCount", 0, "count", COUNT_LABELS, "integer", _INSTRUCTION))
AUDIO_COUNT_HARD = register(TaskSpec("AudioCountHard", 1, "count", COUNT_LABELS, "integer", _INSTRUCTION))
