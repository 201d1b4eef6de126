"""AudioICL-Bench as an inspect_ai task (extra ``inspect``; docs/inspect.md).

``inspect eval audioicl/audioicl_bench --model PROVIDER/MODEL -T data=ROOT -T k=2 -T tasks=AudioCount``
finds ``audioicl_bench`` through the ``inspect_ai`` entry point (``inspect_registry``). One ``Sample`` per
episode and k: its input is the chat ``audioicl run`` sends (``episodes.episode_prompts``: the same selection,
instruction, layout, Morse bank and study condition), message for message, text and clips in order, each clip
an inspect ``ContentAudio`` holding the 16 kHz WAV the ``openai`` backend would send (``episodes.wav_bytes``),
as a file in a content-addressed clip folder (``audio="file"``, the default: inspect reads it when the sample
runs) or inline as a data URI (``audio="data"``: self-contained, but every clip of the selection is held in
memory). The target is the query's label; the scorer is audioicl's rule for the task (``scoring.rules.judge``,
SPEC §5: an unparsed answer is wrong), with accuracy and its standard error overall and per task and k.

The system prompt is chosen when a sample runs, from the model's name as ``audioicl run`` chooses it
(``family="auto"``: Qwen2-Audio's, the Omni models' or the default), or named with ``-T family=...``.
Decoding: greedy (temperature 0), ``max_new_tokens`` (16) new tokens, the run seed.

Each sample's id is ``<episode id>@k<k>`` and its metadata holds ``episode_id``, ``task``, ``k``,
``condition`` (the control, or None), ``audio_paths`` (the meta paths of the clips, in order) and the
prompt settings; ``audioicl import-inspect`` turns the log into results files that ``audioicl score`` reads.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    Content,
    ContentAudio,
    ContentText,
    GenerateConfig,
)
from inspect_ai.scorer import (
    CORRECT,
    INCORRECT,
    Score,
    Scorer,
    Target,
    accuracy,
    grouped,
    scorer,
    stderr,
)
from inspect_ai.solver import Generate, Solver, TaskState, generate, solver

from audioicl.errors import AudioICLError
from audioicl.files import write_atomic
from audioicl.prompts.chat import AudioPart, Chat, TextPart
from audioicl.prompts.sets import PromptSet, load_prompt_set, system_family
from audioicl.scoring.rules import judge

from .episodes import EpisodePrompt, episode_prompts, parse_shots, run_options, wav_bytes

AUDIO_MODES = ("file", "data")
CLIP_DIR_ENV = "AUDIOICL_INSPECT_CLIPS"


def _names(value: str | Sequence[str] | None) -> list[str] | None:
    """``-T tasks=AudioCount,MorseCode`` (a string) or a YAML list; None: all."""
    if value is None or value == "":
        return None
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [item.strip() for item in items if item.strip()] or None


def _shots(value: int | str | Sequence[int] | None) -> list[int] | None:
    """``-T k=2``, ``-T k=0,1,2``, ``-T k=1-5`` or a YAML list; None: every k the dataset has."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise AudioICLError(f"k must be a number, a list or a range, got {value!r}")
    if isinstance(value, int):
        values = [value]
    elif isinstance(value, str):
        values = parse_shots(value)
    else:
        values = [int(v) for v in value]
    if any(v < 0 for v in values):
        raise AudioICLError(f"k must be >= 0, got {value!r}")
    return sorted(set(values))


def default_clip_dir() -> Path:
    """Where the clips of ``audio="file"`` samples are written by default: ``$AUDIOICL_INSPECT_CLIPS``, else
    ``$XDG_CACHE_HOME/audioicl/inspect-clips`` (``~/.cache/...``). Files are named by the digest of their
    samples, so one folder serves any dataset and run."""
    if os.environ.get(CLIP_DIR_ENV):
        return Path(os.environ[CLIP_DIR_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "audioicl" / "inspect-clips"


class _ClipRefs:
    """Each distinct clip once: a WAV file in ``folder`` named by its digest, or an inline data URI."""

    def __init__(self, mode: str, folder: Path):
        if mode not in AUDIO_MODES:
            raise AudioICLError(f"audio must be one of {', '.join(AUDIO_MODES)}, got {mode!r}")
        self.mode, self.folder = mode, folder
        self._refs: dict[str, str] = {}

    def ref(self, part: AudioPart) -> str:
        found = self._refs.get(part.digest)
        if found is not None:
            return found
        data = wav_bytes(part)
        if self.mode == "data":
            ref = "data:audio/wav;base64," + base64.b64encode(data).decode("ascii")
        else:
            path = self.folder / f"{part.digest}.wav"
            if not (path.is_file() and path.stat().st_size == len(data)):
                self.folder.mkdir(parents=True, exist_ok=True)
                write_atomic(path, data)
            ref = str(path.resolve())
        self._refs[part.digest] = ref
        return ref


def chat_messages(chat: Chat, clips: _ClipRefs) -> list[ChatMessage]:
    """The typed chat as inspect messages, parts in order; a turn without audio is a plain string (as the
    ``openai`` backend sends it)."""
    messages: list[ChatMessage] = []
    for message in chat.messages:
        parts: list[Content] = []
        for part in message.content:
            if isinstance(part, TextPart):
                parts.append(ContentText(text=part.text))
            else:
                parts.append(ContentAudio(audio=clips.ref(part), format="wav"))
        content: str | list[Content]
        if all(isinstance(p, ContentText) for p in parts):
            content = "".join(p.text for p in parts if isinstance(p, ContentText))
        else:
            content = parts
        if message.role == "system":
            messages.append(ChatMessageSystem(content=content))
        elif message.role == "assistant":
            messages.append(ChatMessageAssistant(content=content))
        else:
            messages.append(ChatMessageUser(content=content))
    return messages


def episode_sample(item: EpisodePrompt, clips: _ClipRefs, settings: dict[str, Any]) -> Sample:
    episode = item.episode
    return Sample(
        id=item.key,
        input=chat_messages(item.prompt.chat, clips),
        target=episode.query.label,
        metadata={
            "episode_id": episode.id,
            "task": episode.task,
            "k": item.k,
            "condition": item.condition,
            "audio_paths": list(item.prompt.audio_paths),
            **settings,
        },
    )


@solver
def audioicl_system_prompt(family: str = "auto", prompts: str | None = None) -> Solver:
    """Put the system prompt of the model's family in the first message, as ``audioicl run`` does:
    ``family="auto"`` reads it from the model's name (``openai/Qwen2-Audio-7B-Instruct`` → Qwen2-Audio's)."""
    prompt_set = load_prompt_set(prompts) if prompts else PromptSet()

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        chosen = system_family(str(state.model)) if family == "auto" else family
        text = prompt_set.system_prompt(chosen)
        if state.messages and isinstance(state.messages[0], ChatMessageSystem):
            state.messages[0] = ChatMessageSystem(content=text)
        state.metadata["family"] = chosen
        return state

    return solve


@scorer(
    metrics=[
        accuracy(),
        stderr(),
        grouped(accuracy(), "task", name_template="{group_name}"),
        grouped(accuracy(), "k", name_template="k{group_name}"),
    ]
)
def audioicl_rule(strict: bool = False) -> Scorer:
    """audioicl's rule for the sample's task (SPEC §5; ``strict``: only the bare answer): correct or not;
    an unparsed answer is wrong. The answer is the response as read by the rule."""

    async def score(state: TaskState, target: Target) -> Score:
        task_name = str(state.metadata.get("task", ""))
        response = state.output.completion.strip() if state.output is not None else None
        verdict = judge(task_name, response, target.text, strict=strict)
        return Score(
            value=CORRECT if verdict.correct else INCORRECT,
            answer=None if verdict.prediction is None else str(verdict.prediction),
            explanation=None if verdict.parsed else "unparsed",
            metadata={"parsed": verdict.parsed},
        )

    return score


@task
def audioicl_bench(
    data: str,
    k: int | str | list[int] | None = None,
    tasks: str | list[str] | None = None,
    control: str | None = None,
    style: str = "specific",
    layout: str = "original",
    family: str = "auto",
    limit: int | None = None,
    prompts: str | None = None,
    morse_bank: str = "auto",
    seed: int = 0,
    max_new_tokens: int = 16,
    strict: bool = False,
    audio: str = "file",
    clip_dir: str | None = None,
) -> Task:
    """AudioICL-Bench episodes of the dataset at ``data`` (a root with ``meta/*_k*.jsonl`` and the clips).

    Args:
        data: the dataset root (``audioicl build`` or ``audioicl download``).
        k: shots: one number, a list, ``"1-5"``; None: every k the dataset has (0: the queries asked zero-shot).
        tasks: benchmark task names (``"AudioCount,MorseCode"``); None: all.
        control: a study condition of ``audioicl study`` (``random-labels``, ``no-audio``, ``noise-query``,
            ``swapped-query``, ``transcript``); None: the task itself.
        style: instruction style (``specific``, ``general``, ``none``).
        layout: ``original`` (one user turn) or ``multiturn``.
        family: system prompt family (``qwen2-audio``, ``qwen2.5-omni``, ``qwen3-omni``, ``default``) or
            ``auto`` (from the model's name).
        limit: the first N episodes of each task.
        prompts: a prompt set file (``audioicl run --prompts``).
        morse_bank: ``auto``, ``on`` or ``off``: the Morse alphabet bank before MorseCode demos.
        seed: the run seed (study conditions, the model's sampling seed).
        max_new_tokens: the most tokens a model may answer with (greedy).
        strict: score with the strict rules (only the bare answer counts).
        audio: ``file`` (clips written once to ``clip_dir``) or ``data`` (inline data URIs).
        clip_dir: the folder for ``audio="file"`` clips (default: ``default_clip_dir()``).
    """
    options = run_options(
        data,
        shots=_shots(k),
        tasks=_names(tasks),
        control=control,
        style=style,
        layout=layout,
        limit=limit,
        prompts=prompts,
        morse_bank=morse_bank,
        seed=seed,
    )
    clips = _ClipRefs(audio, Path(clip_dir) if clip_dir else default_clip_dir())
    settings = {"style": style, "layout": layout, "seed": seed}
    samples = [episode_sample(item, clips, settings) for item in episode_prompts(options)]
    if not samples:
        raise AudioICLError("the selection holds no episode", file=str(data))
    return Task(
        dataset=MemoryDataset(samples, name="audioicl-bench", location=str(data)),
        solver=[audioicl_system_prompt(family, prompts), generate()],
        scorer=audioicl_rule(strict),
        config=GenerateConfig(max_tokens=max_new_tokens, temperature=0.0, seed=seed),
        metadata={
            "audioicl": {"data": str(data), "control": control, "shots": _shots(k), "tasks": _names(tasks)}
        },
        name="audioicl_bench",
    )
