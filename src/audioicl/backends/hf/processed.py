"""The ``hf`` backend's path for the families rendered as their model cards do it (``rendering="parts"``).

What the model receives is what the family's own processor makes: the chat rendered by its template, then one
processor call over a micro-batch's texts and all their clips in order (``AudioFamily.process``), and of its
outputs those the model's ``forward`` names (or the family's ``forward_keys``) go to ``generate``. No feature
cache and no prefix reuse: a processor that pads a call's clips together, or wraps each clip in tokens of its
own, is then still exactly itself (the parity test in ``tests/backends/test_families.py`` compares every family's inputs
with its model card's call).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat

from ..families import AudioFamily


class PlaceholderMismatch(AudioICLError):
    """The processor did not turn a prompt's clips into features and audio tokens."""


@dataclass(frozen=True)
class Rendered:
    """A request rendered by the family's template: its text and its clips at the model's rate, in order."""

    index: int
    text: str
    clips: list[AudioPart]
    group: str
    chat: Chat | None = None  # kept for a family that makes its inputs from chats (``tokenizes_chat``)

    @property
    def length(self) -> tuple[int, int]:
        return sum(len(clip.wave) for clip in self.clips), len(self.text)


def forward_names(model: Any, family: AudioFamily) -> frozenset[str]:
    """The processor outputs ``generate`` gets: the family's ``forward_keys``, else the names ``forward`` takes."""
    if family.forward_keys is not None:
        return frozenset(family.forward_keys)
    return frozenset(inspect.signature(model.forward).parameters)


def model_inputs(
    processor: Any,
    family: AudioFamily,
    batch: Sequence[Rendered],
    *,
    sampling_rate: int,
    names: frozenset[str],
    audio_token_id: int | None,
    device: torch.device,
    dtype: torch.dtype,
) -> dict[str, Any]:
    """The model inputs of ``batch`` (left-padded), floating tensors in the model's dtype (but the family's
    ``float32_inputs``), on ``device``."""
    if family.tokenizes_chat:
        out = family.chat_inputs(
            processor, [item.chat for item in batch if item.chat is not None], sampling_rate
        )
    else:
        waves = [clip.wave for item in batch for clip in item.clips]
        out = family.process(processor, [item.text for item in batch], waves, sampling_rate)
    inputs = {
        key: _placed(value, device, family.input_dtype(key, dtype))
        for key, value in _items(out)
        if key in names
    }
    if "input_ids" not in inputs or "attention_mask" not in inputs:
        raise PlaceholderMismatch(f"the processor of {family.label} returned no input_ids and attention_mask")
    if audio_token_id is not None:
        found = (inputs["input_ids"] == audio_token_id).sum(dim=1).tolist()
        for item, tokens in zip(batch, found, strict=True):
            if item.clips and tokens < len(item.clips):
                raise PlaceholderMismatch(
                    f"the processor of {family.label} made {tokens} audio tokens for {len(item.clips)} clips: "
                    "does its chat template write an audio placeholder for each audio part?"
                )
    return inputs


def _items(out: Any) -> list[tuple[str, Any]]:
    return list(out.items()) if isinstance(out, Mapping) or hasattr(out, "items") else []


def _placed(value: Any, device: torch.device, dtype: torch.dtype) -> Any:
    if not isinstance(value, torch.Tensor):
        return value
    value = value.to(device)
    return value.to(dtype) if value.is_floating_point() else value
