"""What a run is asked to do: ``RunOptions`` (the model, the data, the selection of episodes, the prompt and
decoding settings), its ``Shard`` of the episodes, and the run orders (``RUN_ORDERS``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from audioicl.backends import ModelSpec
from audioicl.backends.base import option_conditions
from audioicl.errors import AudioICLError
from audioicl.prompts.chat import CONTINUATION, Layout
from audioicl.prompts.clips import MorseBankMode, PadMode
from audioicl.prompts.draws import Variations
from audioicl.prompts.sets import Style
from audioicl.seeding import derive_seed

CONDITION_MARK = "+"  # between the model's name and its study condition in results file names
SINGLE_CLIP = "single-clip"  # the condition of --layout single-clip

Report = Callable[[str], None]
RunOrder = Literal["episode", "k"]
RUN_ORDERS: tuple[str, ...] = ("episode", "k")


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based): the episodes whose id hashes to it, the same for every k."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError:
            raise AudioICLError(f"--shard must be I/N (e.g. 1/4), got {text!r}") from None
        if not 1 <= index <= count:
            raise AudioICLError(f"--shard {text}: need 1 <= I <= N")
        return cls(index, count)

    def holds(self, episode_id: str) -> bool:
        return derive_seed(0, "shard", episode_id) % self.count == self.index - 1

    @property
    def folder(self) -> str:
        return f"shard-{self.index}-of-{self.count}"

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class RunOptions:
    """``model``: a ``ModelSpec``; a ``backend:name`` string (for callers of the Python API) is parsed once,
    here, and ``data``, ``out`` and ``prompts`` may be given as strings."""

    data: Path
    model: ModelSpec
    out: Path
    shots: tuple[int, ...] | None = None  # None: every k the dataset has
    tasks: tuple[str, ...] | None = None  # None: all
    style: Style = "specific"
    layout: Layout = "original"
    batch_size: int = 8
    max_new_tokens: int = 16
    pad: PadMode = "none"
    limit: int | None = None  # the first N episodes of each task
    shard: Shard | None = None
    prompts: Path | None = None
    morse_bank: MorseBankMode = "auto"
    seed: int = 0
    name: str | None = None  # the <model> of the file names; default: the model name's last component
    backend_options: Mapping[str, str] = field(default_factory=dict)
    retry_errors: bool = False  # drop the selected episodes' error lines first, so they run again
    strict: bool = False  # refuse, before loading, prompts of more clips than the model takes
    order: RunOrder = "episode"  # episode: an episode's k lines together; k: one k file after another
    window: int | None = None  # prompts per backend call (sorted by length there); None: runner.window_sizes
    control: str | None = None  # a study condition (``prompts.controls.CONTROLS``), part of the model name
    probe: bool = False  # perception probes (``probes``) instead of the task, at k = 0
    allow_missing_audio: bool = False  # run although clips are missing: their episodes get error lines
    draws: int = 1  # demonstration draws per episode (``prompts.draws``); 1: the file's demos only
    orders: int = 1  # demo orders per draw; 1: the draw's own order
    prompt_variants: int = 1  # instruction variants (``prompts.sets.prompt_variants``); 1: the run's wording

    def __post_init__(self) -> None:
        if isinstance(self.model, str):
            object.__setattr__(self, "model", ModelSpec.parse(self.model))
        for name in ("data", "out", "prompts"):  # str paths from callers of the Python API
            value = getattr(self, name)
            if value is not None and not isinstance(value, Path):
                object.__setattr__(self, name, Path(value))

    @property
    def variations(self) -> Variations:
        """The presentations each episode gets: draws x orders x instruction variants."""
        return Variations(self.draws, self.orders, self.prompt_variants)

    @property
    def condition(self) -> str | None:
        """What this run measures beside the task as the benchmark defines it, each part of which changes
        what is measured: ``style-<style>`` for another instruction, a control's name or ``probe``, then
        ``single-clip`` or ``continuation`` for those layouts, then what the backend's options change of the model (``fp8``:
        ``Option.conditions``); None for the task itself. Named alike whether ``run`` or ``study`` made it."""
        parts = [
            None if self.style == "specific" else f"style-{self.style}",
            "probe" if self.probe else self.control,
            self.layout if self.layout in (SINGLE_CLIP, CONTINUATION) else None,
            *option_conditions(self.model, self.backend_options),
        ]
        return CONDITION_MARK.join(part for part in parts if part) or None

    @property
    def model_name(self) -> str:
        """``<name>`` of the results files: the model's, with ``+<condition>`` under a study condition, so a
        condition's files sit beside the plain run's in one folder (``icl+random-labels_results_k1.jsonl``)."""
        name = self.name or self.model.file_name
        return f"{name}{CONDITION_MARK}{self.condition}" if self.condition else name

    @property
    def folder(self) -> Path:
        return self.out / self.shard.folder if self.shard else self.out
