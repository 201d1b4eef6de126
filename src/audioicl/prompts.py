"""Episode → typed chat (SPEC §4): layouts, instruction styles, system prompts, prompt files, padding.

A ``Chat`` holds the messages a model sees (text and audio parts) and ``items``, the structured view of the
clips in presentation order with the labels the prompt shows. The query's target clip never carries its
label, so no backend can see the answer.

Original layout (default): a system message, then one user turn::

    <instruction>

    [Demo Audio 1] <audio> Label: 7
    [Demo Audio 2] <audio> Label: 1
    [Query Audio] <audio> Label:

Multi-clip tasks tag clips ``Demo <i> <role>`` / ``Query <role>``; a Morse alphabet bank, when shown, comes
first as ``Letter A`` .. ``Letter Z``. The multi-turn layout puts each demo in its own user turn (ending in
``Label:``) with its label as the assistant's answer, then the query turn.

A chat keeps its ``frame`` (system prompt, instruction, layout), so that a study condition (``controls``) can
change its items (a label redrawn, a clip replaced by noise or by a transcript, a clip removed) and lay it out
again exactly as ``build_prompt`` would have. An item without audio shows its transcript in its place
(``[Demo Audio 1] (transcript: ...) Label: 7``) or nothing (``[Demo Audio 1] Label: 7``).
"""

from __future__ import annotations

import hashlib
import json
import os
import string
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml

from . import audio
from .errors import AudioICLError
from .meta import resolve_audio_path
from .records import Episode
from .tasks import TASKS

Role = Literal["system", "user", "assistant"]
ItemKind = Literal["bank", "demo", "query"]
Style = Literal["specific", "general", "none"]
Layout = Literal["original", "multiturn"]
PadMode = Literal["none", "episode", "batch"]
MorseBankMode = Literal["auto", "on", "off"]

STYLES: tuple[str, ...] = ("specific", "general", "none")
LAYOUTS: tuple[str, ...] = ("original", "multiturn")
PAD_MODES: tuple[str, ...] = ("none", "episode", "batch")
MORSE_BANK_MODES: tuple[str, ...] = ("auto", "on", "off")

NOISE_PATH = "control:noise"  # names a noise clip a study condition put in a clip's place (+ "/<episode id>")
MORSE_TASK = "MorseCode"
MORSE_BANK_DIR = "data/MorseCode/alphabet"
MORSE_LETTERS = string.ascii_uppercase

# System prompts per model family (SPEC §4); "default" serves every other model, the built-ins included.
QWEN_OMNI_SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
    "auditory and visual inputs, as well as generating text and speech."
)
DEFAULT_SYSTEM = {
    "default": "You are a helpful assistant.",
    "qwen2-audio": "You are a helpful assistant.",
    "qwen2.5-omni": QWEN_OMNI_SYSTEM,
    "qwen3-omni": QWEN_OMNI_SYSTEM,
}
FAMILIES: tuple[str, ...] = tuple(DEFAULT_SYSTEM)

GENERAL_INSTRUCTION = (
    "Each audio clip below comes with a numeric label. A hidden rule, the same for every clip here, maps "
    "each clip to its label. Infer the rule from the labelled examples and apply it to the query clip. "
    "Answer with a single integer only."
)


# --------------------------------------------------------------------------- the typed chat


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True, eq=False)
class AudioPart:
    """Mono float32 samples at ``sr`` and ``digest``, a hash of them that names the clip by content.

    No file name travels with the samples: what reaches a model is the sound, never a path that could
    spell the label (``_5.wav``). Backends key their caches by ``digest``."""

    wave: np.ndarray
    sr: int
    digest: str

    @classmethod
    def of(cls, wave: np.ndarray, sr: int) -> AudioPart:
        wave = np.ascontiguousarray(wave, dtype=np.float32)
        hasher = hashlib.blake2b(int(sr).to_bytes(4, "little"), digest_size=16)
        hasher.update(wave.tobytes())
        return cls(wave=wave, sr=int(sr), digest=hasher.hexdigest())

    @property
    def seconds(self) -> float:
        return len(self.wave) / self.sr


Part = TextPart | AudioPart


@dataclass(frozen=True)
class Message:
    role: Role
    content: tuple[Part, ...]


@dataclass(frozen=True)
class PromptItem:
    """One clip as presented. ``index``: demo number 1..k (shared by a demo's clips), letter number 1..26
    for the Morse bank, 1 for the query. ``label`` is the label the prompt shows (None on the target).
    ``audio`` is None where a study condition took the clip out: ``transcript`` then holds the text shown
    in its place, if any."""

    kind: ItemKind
    index: int
    role: str | None
    tag: str
    audio: AudioPart | None
    label: str | None
    transcript: str | None = None


@dataclass(frozen=True)
class Frame:
    """What lays items out as messages: the system prompt, the instruction (None: no instruction) and the
    layout."""

    system: str
    instruction: str | None
    layout: Layout = "original"


@dataclass(frozen=True)
class Chat:
    task: str
    messages: tuple[Message, ...]
    items: tuple[PromptItem, ...]
    frame: Frame | None = None  # None: made by hand, cannot be laid out again

    def audio_parts(self) -> Iterator[AudioPart]:
        """Audio parts in the order the model hears them."""
        for message in self.messages:
            for part in message.content:
                if isinstance(part, AudioPart):
                    yield part


def message_text(message: Message, placeholder: str = "<audio>") -> str:
    """One message's text with each audio part written as ``placeholder`` (the model's own audio tokens)."""
    return "".join(p.text if isinstance(p, TextPart) else placeholder for p in message.content)


def render_text(chat: Chat, placeholder: str = "<audio>") -> str:
    """The text view of a chat: one ``role: text`` block per message, each audio part as ``placeholder``."""
    return "\n".join(f"{m.role}: {message_text(m, placeholder)}" for m in chat.messages)


def system_family(model_name: str) -> str:
    """The system-prompt family of a model name or path (``Qwen/Qwen2.5-Omni-7B`` → ``qwen2.5-omni``)."""
    name = model_name.lower().replace("_", "-")
    if "qwen3-omni" in name:
        return "qwen3-omni"
    if "qwen2.5-omni" in name or "qwen2-5-omni" in name:
        return "qwen2.5-omni"
    if "qwen2-audio" in name:
        return "qwen2-audio"
    return "default"


# --------------------------------------------------------------------------- prompt sets


@dataclass(frozen=True)
class PromptSet:
    """The wording: system prompt per family, the general instruction, specific instructions per task.
    Tasks missing from ``instructions`` use their ``TaskSpec.instruction``."""

    system: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SYSTEM))
    general: str = GENERAL_INSTRUCTION
    instructions: Mapping[str, str] = field(default_factory=dict)

    def instruction(self, task: str, style: Style) -> str | None:
        if style == "none":
            return None
        if style == "general":
            return self.general
        if task in self.instructions:
            return self.instructions[task]
        if task in TASKS:
            return TASKS.get(task).instruction
        return self.general

    def system_prompt(self, family: str) -> str:
        return self.system.get(family, self.system["default"])


PROMPT_FILE_KEYS = ("system", "general", "instructions")


def _string_map(value: Any, key: str, known: Sequence[str], kind: str, file: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise AudioICLError(f"{key!r} must be a mapping of {kind} to text", file=file)
    unknown = [name for name in value if name not in known]
    if unknown:
        raise AudioICLError(
            f"unknown {kind} in {key!r}: {', '.join(map(str, unknown))} (known: {', '.join(known)})",
            file=file,
        )
    for name, text in value.items():
        if not isinstance(text, str):
            raise AudioICLError(f"{key}.{name} must be a string, got {type(text).__name__}", file=file)
    return dict(value)


def read_structured_file(path: Path, what: str) -> Any:
    """Decode a JSON (``.json``) or YAML (anything else) file; errors name the file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AudioICLError(f"cannot read {what}: {exc.strerror}", file=str(path)) from exc
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise AudioICLError(f"malformed JSON: {exc.msg}", file=str(path), line=exc.lineno) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise AudioICLError(f"malformed YAML: {problem}", file=str(path), line=line) from exc


def load_prompt_set(path: str | os.PathLike) -> PromptSet:
    """A prompt file (YAML or JSON) over the defaults; any of ``system`` (family → text), ``general``
    (text) and ``instructions`` (task → text). Unknown keys, families or tasks are errors."""
    path = Path(path)
    data = read_structured_file(path, "prompt file")
    file = str(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AudioICLError(f"prompt file must hold a mapping, got {type(data).__name__}", file=file)
    unknown = [key for key in data if key not in PROMPT_FILE_KEYS]
    if unknown:
        raise AudioICLError(
            f"unknown key(s) {', '.join(map(str, unknown))} (known: {', '.join(PROMPT_FILE_KEYS)})", file=file
        )
    base = PromptSet()
    system = dict(base.system)
    system.update(_string_map(data.get("system", {}), "system", FAMILIES, "model family", file))
    instructions = _string_map(data.get("instructions", {}), "instructions", TASKS.names(), "task", file)
    general = data.get("general", base.general)
    if not isinstance(general, str):
        raise AudioICLError(f"'general' must be a string, got {type(general).__name__}", file=file)
    return PromptSet(system=system, general=general, instructions=instructions)


# --------------------------------------------------------------------------- audio and the Morse bank


def load_clip(root: str | os.PathLike, audio_path: str, sr: int = audio.SAMPLE_RATE) -> AudioPart:
    wave, rate = audio.load(resolve_audio_path(root, audio_path), sr=sr)
    return AudioPart.of(wave, rate)


class ClipStore:
    """Loads a dataset's clips (mono, ``sr``), each read and resampled once while it stays among the most
    recently used ``max_samples`` samples (default 20 minutes of audio at 16 kHz, 77 MB of float32), so a
    run that visits an episode's k files together decodes its clips once."""

    def __init__(
        self, root: str | os.PathLike, sr: int = audio.SAMPLE_RATE, max_samples: int = 20 * 60 * 16_000
    ):
        self.root, self.sr, self.max_samples = root, sr, max_samples
        self._parts: OrderedDict[str, AudioPart] = OrderedDict()
        self._samples = 0
        self.loads = 0  # files decoded (for tests and progress reports)

    def load(self, audio_path: str) -> AudioPart:
        part = self._parts.get(audio_path)
        if part is not None:
            self._parts.move_to_end(audio_path)
            return part
        part = load_clip(self.root, audio_path, self.sr)
        self.loads += 1
        self._parts[audio_path] = part
        self._samples += len(part.wave)
        while self._samples > self.max_samples and len(self._parts) > 1:
            _, dropped = self._parts.popitem(last=False)
            self._samples -= len(dropped.wave)
        return part


class SilentClips(ClipStore):
    """A clip store that reads nothing: every clip is empty. Lays out a chat's text and items without the
    audio (the text-only floor in ``audit``, which must work where the audio is missing)."""

    def __init__(self) -> None:
        super().__init__(".")
        self._silence = AudioPart.of(np.zeros(0, dtype=np.float32), self.sr)

    def load(self, audio_path: str) -> AudioPart:
        return self._silence


def morse_bank_paths() -> tuple[str, ...]:
    return tuple(f"{MORSE_BANK_DIR}/{letter}.wav" for letter in MORSE_LETTERS)


def load_morse_bank(root: str | os.PathLike, mode: MorseBankMode) -> tuple[AudioPart, ...]:
    """The 26 letter clips A..Z to show before MorseCode demos: ``off`` never, ``auto`` when the dataset
    has all of them, ``on`` requires them. Empty when not shown."""
    if mode == "off":
        return ()
    paths = morse_bank_paths()
    missing = [p for p in paths if not resolve_audio_path(root, p).is_file()]
    if missing:
        if mode == "on":
            raise AudioICLError(
                f"--morse-bank on, but the dataset lacks {len(missing)} of the 26 letter clips "
                f"(first: {missing[0]})",
                file=str(root),
            )
        return ()
    return tuple(load_clip(root, p) for p in paths)


@dataclass(frozen=True)
class Prompt:
    """A chat for the backend and, beside it, the meta ``audio_path`` each of its items stands for, in
    order (for result lines and messages; never part of the chat). A study condition keeps them in step:
    a swapped clip's path is the clip heard, a transcript's the clip transcribed, a noise clip's
    ``NOISE_PATH``."""

    chat: Chat
    audio_paths: tuple[str, ...]


# --------------------------------------------------------------------------- building chats


def _episode_items(
    episode: Episode, clips: ClipStore, bank: Sequence[AudioPart]
) -> list[tuple[PromptItem, str]]:
    """The clips in presentation order, each with its meta ``audio_path``."""
    bank_paths = morse_bank_paths()
    items: list[tuple[PromptItem, str]] = []
    if episode.task == MORSE_TASK:
        for number, part in enumerate(bank, start=1):
            letter = MORSE_LETTERS[number - 1]
            item = PromptItem("bank", number, None, f"Letter {letter}", part, letter.lower())
            items.append((item, bank_paths[number - 1]))
    for number, demo in enumerate(episode.demos, start=1):
        for clip in demo.clips:
            tag = f"Demo {number} {clip.role}" if demo.multi else f"Demo Audio {number}"
            item = PromptItem("demo", number, clip.role, tag, clips.load(clip.audio_path), clip.label)
            items.append((item, clip.audio_path))
    query = episode.query
    for position, clip in enumerate(query.clips):
        target = position == len(query.clips) - 1
        tag = f"Query {clip.role}" if query.multi else "Query Audio"
        label = None if target else clip.label
        items.append(
            (PromptItem("query", 1, clip.role, tag, clips.load(clip.audio_path), label), clip.audio_path)
        )
    return items


def _clip_line(item: PromptItem, answer_slot: bool) -> list[str | AudioPart]:
    """``[tag] <audio> Label: x``; the clip that is answered (the query target, or a demo's last clip in
    the multi-turn layout) ends in ``Label:``; an unlabelled earlier clip has no label part. An item
    without audio shows ``(transcript: ...)`` in its place, or nothing."""
    segments: list[str | AudioPart] = [f"[{item.tag}]"]
    if item.audio is not None:
        segments += [" ", item.audio]
    elif item.transcript is not None:
        segments.append(f" (transcript: {item.transcript})")
    if answer_slot:
        segments.append(" Label:")
    elif item.label is not None:
        segments.append(f" Label: {item.label}")
    return segments


def _message(role: Role, segments: Sequence[str | AudioPart]) -> Message:
    """A message from text and audio segments, adjacent text merged into one part."""
    parts: list[Part] = []
    for segment in segments:
        if isinstance(segment, str):
            if parts and isinstance(parts[-1], TextPart):
                parts[-1] = TextPart(parts[-1].text + segment)
            elif segment:
                parts.append(TextPart(segment))
        else:
            parts.append(segment)
    return Message(role, tuple(parts))


def _lines(groups: Sequence[list[str | AudioPart]]) -> list[str | AudioPart]:
    out: list[str | AudioPart] = []
    for number, group in enumerate(groups):
        if number:
            out.append("\n")
        out.extend(group)
    return out


def _original_turns(items: Sequence[PromptItem], head: list[str]) -> list[Message]:
    lines = [_clip_line(item, answer_slot=item.kind == "query" and item.label is None) for item in items]
    return [_message("user", head + _lines(lines))]


def _multiturn(items: Sequence[PromptItem], head: list[str]) -> list[Message]:
    """Bank clips and demo 1 share the first user turn; each demo's label is the assistant's answer."""
    messages: list[Message] = []
    pending: list[list[str | AudioPart]] = []
    for position, item in enumerate(items):
        nxt = items[position + 1] if position + 1 < len(items) else None
        demo_ends = item.kind == "demo" and (nxt is None or nxt.kind != "demo" or nxt.index != item.index)
        is_target = item.kind == "query" and item.label is None
        pending.append(_clip_line(item, answer_slot=demo_ends or is_target))
        if demo_ends:
            messages.append(_message("user", (head if not messages else []) + _lines(pending)))
            messages.append(_message("assistant", [item.label or ""]))
            pending = []
    messages.append(_message("user", (head if not messages else []) + _lines(pending)))
    return messages


def build_prompt(
    episode: Episode,
    clips: ClipStore,
    *,
    style: Style = "specific",
    layout: Layout = "original",
    family: str = "default",
    prompt_set: PromptSet | None = None,
    bank: Sequence[AudioPart] = (),
) -> Prompt:
    """Load the episode's audio through ``clips`` and lay it out as a chat. ``bank``: Morse letter clips
    A..Z (``load_morse_bank``), shown for MorseCode episodes only. Audio problems raise ``AudioICLError``
    carrying the episode id."""
    prompt_set = prompt_set or PromptSet()
    try:
        placed = _episode_items(episode, clips, bank)
    except AudioICLError as exc:
        exc.id = exc.id or episode.id
        raise
    items = tuple(item for item, _ in placed)
    frame = Frame(prompt_set.system_prompt(family), prompt_set.instruction(episode.task, style), layout)
    return Prompt(lay_out(episode.task, items, frame), tuple(path for _, path in placed))


def lay_out(task: str, items: Sequence[PromptItem], frame: Frame) -> Chat:
    """The chat that shows ``items`` in ``frame``: the system message, then the layout's turns."""
    head = [frame.instruction + "\n\n"] if frame.instruction else []
    system = Message("system", (TextPart(frame.system),))
    turns = _multiturn(items, head) if frame.layout == "multiturn" else _original_turns(items, head)
    return Chat(task=task, messages=(system, *turns), items=tuple(items), frame=frame)


def with_items(chat: Chat, items: Sequence[PromptItem], instruction: str | None = None) -> Chat:
    """``chat`` laid out again with other ``items`` (and, when given, another instruction)."""
    if chat.frame is None:
        raise ValueError("this chat has no frame (it was not made by build_prompt) and cannot be laid out")
    frame = chat.frame if instruction is None else replace(chat.frame, instruction=instruction)
    return lay_out(chat.task, items, frame)


def build_chat(episode: Episode, root: str | os.PathLike, **layout: Any) -> Chat:
    """``build_prompt``'s chat, loading clips from the dataset at ``root`` (mono, 16 kHz)."""
    return build_prompt(episode, ClipStore(root), **layout).chat


# --------------------------------------------------------------------------- padding


def _pad_wave(part: AudioPart, samples: int) -> AudioPart:
    if len(part.wave) >= samples:
        return part
    wave = np.concatenate([part.wave, np.zeros(samples - len(part.wave), dtype=part.wave.dtype)])
    return AudioPart.of(wave, part.sr)


def _pad_chat_to(chat: Chat, samples: int) -> Chat:
    padded: dict[int, AudioPart] = {}

    def pad(part: AudioPart) -> AudioPart:
        if id(part) not in padded:
            padded[id(part)] = _pad_wave(part, samples)
        return padded[id(part)]

    messages = tuple(
        Message(m.role, tuple(pad(p) if isinstance(p, AudioPart) else p for p in m.content))
        for m in chat.messages
    )
    items = tuple(replace(item, audio=pad(item.audio)) if item.audio else item for item in chat.items)
    return replace(chat, messages=messages, items=items)


def _longest(chat: Chat) -> int:
    return max((len(p.wave) for p in chat.audio_parts()), default=0)


def pad_chats(chats: Sequence[Chat], mode: PadMode) -> list[Chat]:
    """Trailing zero padding as the original did (SPEC §4): ``episode`` pads every clip of a chat to that
    chat's longest clip, ``batch`` to the longest clip of all ``chats``, ``none`` leaves them alone.
    Pure: returns new chats, the inputs are unchanged."""
    if mode == "none":
        return list(chats)
    if mode == "episode":
        return [_pad_chat_to(chat, _longest(chat)) for chat in chats]
    if mode == "batch":
        samples = max((_longest(chat) for chat in chats), default=0)
        return [_pad_chat_to(chat, samples) for chat in chats]
    raise ValueError(f"unknown pad mode {mode!r}")
