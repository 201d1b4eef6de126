"""Episode → typed chat (SPEC §4): an episode's clips and shown labels laid out as the messages of a ``Chat``.

``build_prompt`` loads the episode's clips (``prompts.clips``) and lays them out in a frame: the system prompt
and instruction of the prompt set (``prompts.sets``) and a layout. The query's target clip never carries its
label, so no backend can see the answer.

Original layout (default): a system message, then one user turn::

    <instruction>

    [Demo Audio 1] <audio> Label: 7
    [Demo Audio 2] <audio> Label: 1
    [Query Audio] <audio> Label:

Multi-clip tasks tag clips ``Demo <i> <role>`` / ``Query <role>``; a Morse alphabet bank, when shown, comes
first as ``Letter A`` .. ``Letter Z``. The multi-turn layout puts each demo in its own user turn (ending in
``Label:``) with its label as the assistant's answer, then the query turn.

The continuation layout (``--layout continuation``, for pretrained base models: no chat template, no system
prompt) is one text that the model continues, each label on a line of its own, the query's left open; the
answer is what the model writes up to the end of that line (the run stops its answer at ``\n``)::

    <instruction>

    [Demo Audio 1] <audio>
    Label: 7
    [Demo Audio 2] <audio>
    Label: 1
    [Query Audio] <audio>
    Label:

A chat keeps its ``frame``, so that a study condition (``prompts.controls``) can change its items (a label
redrawn, a clip replaced by noise or by a transcript, a clip removed) and lay it out again exactly as
``build_prompt`` would have (``with_items``). An item without audio shows its transcript in its place
(``[Demo Audio 1] (transcript: ...) Label: 7``) or nothing (``[Demo Audio 1] Label: 7``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from audioicl.errors import AudioICLError
from audioicl.records import Episode

from .chat import (
    CONTINUATION,
    LAYOUTS,
    AudioPart,
    Chat,
    Frame,
    Layout,
    Message,
    Part,
    PromptItem,
    Role,
    TextPart,
)
from .clips import MORSE_LETTERS, MORSE_TASK, ClipStore, morse_bank_paths
from .joined import single_clip_turns
from .sets import STYLES, PromptSet, Style


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


def _clip_line(item: PromptItem, answer_slot: bool, before_label: str = " ") -> list[str | AudioPart]:
    """``[tag] <audio> Label: x``; the clip that is answered (the query target, or a demo's last clip in
    the multi-turn layout) ends in ``Label:``; an unlabelled earlier clip has no label part. An item
    without audio shows ``(transcript: ...)`` in its place, or nothing. ``before_label``: what separates the
    clip from its label (the continuation layout's label is a line of its own)."""
    segments: list[str | AudioPart] = [f"[{item.tag}]"]
    if item.audio is not None:
        segments += [" ", item.audio]
    elif item.transcript is not None:
        segments.append(f" (transcript: {item.transcript})")
    if answer_slot:
        segments.append(f"{before_label}Label:")
    elif item.label is not None:
        segments.append(f"{before_label}Label: {item.label}")
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


def _continuation(items: Sequence[PromptItem], head: list[str]) -> list[Message]:
    """One text to continue (the module docstring): each label on its own line, the query's left open."""
    lines = [
        _clip_line(item, answer_slot=item.kind == "query" and item.label is None, before_label="\n")
        for item in items
    ]
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
    carrying the episode id; an unknown style or layout raises ``ValueError`` (rather than fall back to the
    original's without a word)."""
    if style not in STYLES:
        raise ValueError(f"unknown prompt style {style!r}: one of {', '.join(STYLES)}")
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
    """The chat that shows ``items`` in ``frame``: the system message, then the layout's turns; the
    continuation layout's one text alone (a base model has no system prompt)."""
    if frame.layout not in LAYOUTS:
        raise ValueError(f"unknown prompt layout {frame.layout!r}: one of {', '.join(LAYOUTS)}")
    head = [frame.instruction + "\n\n"] if frame.instruction else []
    if frame.layout == CONTINUATION:
        return Chat(task=task, messages=tuple(_continuation(items, head)), items=tuple(items), frame=frame)
    system = Message("system", (TextPart(frame.system),))
    if frame.layout == "multiturn":
        turns = _multiturn(items, head)
    elif frame.layout == "single-clip":
        turns = single_clip_turns(items, head)
    else:
        turns = _original_turns(items, head)
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
