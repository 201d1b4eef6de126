"""The study's conditions: what each one runs (instruction style, control, probe), the model name its results
get, and what it tells (``audioicl study``; ``CONDITIONS`` in this order):

| name | model name | k | what it tells |
|---|---|---|---|
| ``plain`` | ``<m>`` | 0..K | audio ICL; k = 0 is zero-shot (instruction and query) |
| ``general``, ``none`` | ``<m>+style-general`` ... | 0..K | how much the instruction carries |
| ``random-labels`` | ``<m>+random-labels`` | 1..K | whether the demos' labels are used |
| ``no-audio`` | ``<m>+no-audio`` | 1..K | the model's own text-only floor |
| ``noise-query``, ``swapped-query`` | ``<m>+noise-query`` ... | 1..K | whether the query is listened to |
| ``transcript`` | ``<m>+transcript`` | 1..K | text ICL with perfect perception |
| ``probe`` | ``<m>+probe`` | 0 | perception: the perceptual question asked directly |

``FLOOR_SPEC`` is the text-only floor the study runs beside the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from audioicl.backends import ModelSpec
from audioicl.errors import AudioICLError
from audioicl.inference.options import CONDITION_MARK
from audioicl.prompts.controls import CONTROLS
from audioicl.prompts.sets import Style

FLOOR_SPEC = ModelSpec("builtin", "text-only")


@dataclass(frozen=True)
class Condition:
    name: str
    tells: str
    style: Style = "specific"
    control: str | None = None
    probe: bool = False
    zero_shot: bool = False  # also runs k = 0

    def label(self, base: str) -> str:
        """The results' model name, as the runner makes it (``RunOptions.condition``)."""
        parts = [
            base,
            None if self.style == "specific" else f"style-{self.style}",
            self.control or ("probe" if self.probe else None),
        ]
        return CONDITION_MARK.join(part for part in parts if part)


CONDITIONS: tuple[Condition, ...] = (
    Condition("plain", "audio ICL with the task's instruction; k = 0 is zero-shot", zero_shot=True),
    Condition(
        "general", "the one task-agnostic instruction instead of the task's", "general", zero_shot=True
    ),
    Condition("none", "no instruction at all", "none", zero_shot=True),
    *(Condition(name, control.summary, control=name) for name, control in CONTROLS.items()),
    Condition("probe", "perception: the perceptual question asked directly, zero-shot", probe=True),
)
CONDITION_NAMES: tuple[str, ...] = tuple(c.name for c in CONDITIONS)


def condition(name: str) -> Condition:
    for found in CONDITIONS:
        if found.name == name:
            return found
    raise AudioICLError(f"unknown condition {name!r} (known: {', '.join(CONDITION_NAMES)})")
