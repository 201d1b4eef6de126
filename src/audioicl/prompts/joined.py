"""The labelled single-clip layout, for models that take one audio per prompt (``--layout single-clip``).

Every clip of the prompt is joined, in presentation order, into one audio with a fixed separator sound between
them, and the text names the sounds in order (``Sound 1: [Demo Audio 1] Label: 7`` ... ``Sound n: [Query
Audio] Label:``). The separator is the same chime everywhere (no label, length or loudness information: it
does not depend on the clips), padded with silence on both sides so that no clip's onset or tail touches it.

This changes what is measured: the model must find the sound boundaries in one stream (audio has no unit
boundaries of its own), so a run in this layout is its own condition, ``<model>+single-clip``, never mixed with
the multi-clip numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from audioicl.audio import SAMPLE_RATE

from .chat import AudioPart, Message, PromptItem, TextPart

SEPARATOR_SILENCE_S = 0.3
CHIME_S = 0.15
CHIME_HZ = (880.0, 1320.0)
CHIME_PEAK = 0.3


def separator(sr: int = SAMPLE_RATE) -> np.ndarray:
    """Silence, a short two-tone chime under a Hann window, silence: the same samples for every prompt."""
    n = int(CHIME_S * sr)
    t = np.arange(n) / sr
    tone = sum(np.sin(2 * np.pi * hz * t) for hz in CHIME_HZ) / len(CHIME_HZ)
    chime = (CHIME_PEAK * np.hanning(n) * tone).astype(np.float32)
    gap = np.zeros(int(SEPARATOR_SILENCE_S * sr), dtype=np.float32)
    return np.concatenate([gap, chime, gap])


def joined_audio(clips: Sequence[AudioPart]) -> AudioPart:
    """The clips one after another, the separator between each two (all at the first clip's rate)."""
    sr = clips[0].sr
    if any(clip.sr != sr for clip in clips):
        raise ValueError("the single-clip layout joins clips of one sampling rate")
    sep = separator(sr)
    pieces: list[np.ndarray] = []
    for number, clip in enumerate(clips):
        if number:
            pieces.append(sep)
        pieces.append(clip.wave)
    return AudioPart.of(np.concatenate(pieces), sr)


def _line(number: int | None, item: PromptItem) -> str:
    """``Sound i: [tag] Label: x`` (``Label:`` alone where the answer goes); an item without audio shows its
    transcript, or nothing, and is no sound of the stream."""
    text = f"Sound {number}: [{item.tag}]" if number is not None else f"[{item.tag}]"
    if item.audio is None and item.transcript is not None:
        text += f" (transcript: {item.transcript})"
    if item.kind == "query" and item.label is None:
        return text + " Label:"
    return text + (f" Label: {item.label}" if item.label is not None else "")


def single_clip_turns(items: Sequence[PromptItem], head: Sequence[str]) -> list[Message]:
    """One user turn: the instruction, the joined audio, then each sound named in order with its label."""
    clips = [item.audio for item in items if item.audio is not None]
    lines: list[str] = []
    number = 0
    for item in items:
        if item.audio is not None:
            number += 1
        lines.append(_line(number if item.audio is not None else None, item))
    if not clips:
        return [Message("user", (TextPart("".join(head) + "\n".join(lines)),))]
    intro = (
        f"The audio below holds {len(clips)} sounds one after another, each separated from the next by a "
        f"short chime: sound 1 to sound {len(clips)}.\n"
    )
    listing = "\n" + "\n".join(lines)
    return [Message("user", (TextPart("".join(head) + intro), joined_audio(clips), TextPart(listing)))]
