"""The prompts ``audioicl run`` would send, for tools that send them themselves (inspect_ai, lmms-eval).

``episode_prompts`` goes through the run's own ``preflight`` and ``PromptMaker`` (selection, k = 0 from the
smallest k file, study conditions with their partners and transcripts, the prompt set, the Morse bank), so an
integration's chat is the chat of ``audioicl run`` with the same options, clip for clip. ``wav_bytes`` is the
16 kHz 16-bit WAV the ``openai`` backend sends for a clip (the clip as read from the dataset, bit for bit).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from audioicl import audio
from audioicl.backends import ModelSpec
from audioicl.backends.base import last_component
from audioicl.errors import AudioICLError
from audioicl.inference.options import CONDITION_MARK, RunOptions
from audioicl.inference.runner import PromptMaker, Work, preflight
from audioicl.prompts.build import Prompt
from audioicl.prompts.chat import AudioPart
from audioicl.prompts.clips import ClipStore
from audioicl.records import Episode

# The model of the RunOptions an integration makes: never loaded (preflight is told so); the tool has its own.
PLACEHOLDER_MODEL = ModelSpec("builtin", "integration")
DEFAULT_FAMILY = "default"


@dataclass(frozen=True)
class EpisodePrompt:
    """One episode at one k as ``audioicl run`` would ask it: the episode (as its k file has it), the
    prompt (chat and the clips' meta paths), and the study condition (None: the task itself)."""

    k: int
    episode: Episode
    prompt: Prompt
    condition: str | None

    @property
    def key(self) -> str:
        """``<id>@k<k>``: unique over the ks of one selection (the runner's key of a line)."""
        return f"{self.episode.id}@k{self.k}"


def run_options(
    data: str | Path,
    *,
    shots: Sequence[int] | None = None,
    tasks: Sequence[str] | None = None,
    control: str | None = None,
    style: str = "specific",
    layout: str = "original",
    limit: int | None = None,
    prompts: str | Path | None = None,
    morse_bank: str = "auto",
    seed: int = 0,
) -> RunOptions:
    """The ``RunOptions`` of ``audioicl run --data DATA --k ... --tasks ... --control ...`` with these
    settings (the output folder is a placeholder: nothing is written)."""
    return RunOptions(
        data=Path(data),
        model=PLACEHOLDER_MODEL,
        out=_unused_out(Path(data)),
        shots=tuple(shots) if shots is not None else None,
        tasks=tuple(tasks) if tasks is not None else None,
        style=style,  # type: ignore[arg-type]
        layout=layout,  # type: ignore[arg-type]
        limit=limit,
        prompts=Path(prompts) if prompts is not None else None,
        morse_bank=morse_bank,  # type: ignore[arg-type]
        seed=seed,
        control=control or None,
    )


def _unused_out(data: Path) -> Path:
    """An output folder for the preflight to check and never create: in the temporary folder, unless that
    lies inside the dataset root (which the preflight refuses)."""
    unused = Path(tempfile.gettempdir()).resolve() / "audioicl-integration-unused"
    root = data.resolve()
    return root.parent / "audioicl-integration-unused" if unused.is_relative_to(root) else unused


def _quiet(message: str) -> None:
    """Warnings of the preflight (none are expected: missing clips refuse, as in ``audioicl run``)."""


def episode_prompts(options: RunOptions, family: str = DEFAULT_FAMILY) -> Iterator[EpisodePrompt]:
    """Every selected episode of every k (k ascending, file order) with the prompt ``audioicl run`` sends
    for ``options`` to a model of system-prompt family ``family``. Refuses what ``audioicl run`` refuses
    (a missing meta file or clip, an unknown task or control); an episode whose prompt cannot be made
    raises, naming it (``audioicl run`` would write an error line)."""
    plan = preflight(options, _quiet, model="none")
    maker = PromptMaker(
        options, plan.prompt_set, family, plan.bank, ClipStore(options.data), None, plan.study
    )
    for k in sorted(plan.selected):
        for episode in plan.selected[k]:
            prepared = maker.prepare(Work(k, episode))
            if prepared.prompt is None:
                raise AudioICLError(f"cannot make the prompt at k={k}: {prepared.error}", id=episode.id)
            yield EpisodePrompt(k, episode, prepared.prompt, options.condition)


def results_model_name(model: str, condition: str | None, name: str | None = None) -> str:
    """The ``<model>`` of the results files for a tool's model id (``openai/gpt-4o-audio`` →
    ``gpt-4o-audio``), with ``+<condition>`` as ``audioicl run`` adds it."""
    base = name or last_component(model)
    if not base:
        raise AudioICLError(f"cannot name results files after the model {model!r}; give --name")
    return f"{base}{CONDITION_MARK}{condition}" if condition else base


def parse_shots(text: str) -> list[int]:
    """``"2"``, ``"0,1,2"``, ``"1-5"`` → the ks, sorted and unique (as ``audioicl run --k`` reads them)."""
    values: set[int] = set()
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        try:
            if "-" in piece:
                low, high = piece.split("-", 1)
                values.update(range(int(low), int(high) + 1))
            else:
                values.add(int(piece))
        except ValueError:
            raise AudioICLError(f"k: not a number or range: {piece!r}") from None
    if not values:
        raise AudioICLError(f"k: empty list: {text!r}")
    return sorted(values)


# --------------------------------------------------------------------------- the chat as plain data


def wav_bytes(part: AudioPart) -> bytes:
    """The clip as a mono 16-bit PCM WAV at 16 kHz, exactly as the ``openai`` backend sends it
    (``backends.openai.wav_base64``: scaled by 32768, so a clip decoded from a 16-bit file comes back bit
    for bit)."""
    wave = audio.resample(part.wave, part.sr, audio.SAMPLE_RATE)
    return audio.pcm16_bytes(wave, audio.SAMPLE_RATE, scale=32768.0)
