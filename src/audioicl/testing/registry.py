"""The registry of test-model families (``TINY``): one ``TinyFamily`` per model family, registered by its module
of ``testing.families``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl.registry import Registry


def card_inputs(processor: Any, conversation: list[dict[str, Any]]) -> Mapping[str, Any]:
    """The model card's way: the conversation (audio parts carry ``"audio": wave``) through the processor's
    chat template, tokenized, with the generation prompt."""
    return processor.apply_chat_template(
        conversation, tokenize=True, return_dict=True, return_tensors="pt", add_generation_prompt=True
    )


@dataclass(frozen=True)
class TinyFamily:
    """``name``: the ``backends.families`` name; ``write(out_dir, seed)``: the tiny checkpoint folder;
    ``full_size(device, dtype, num_layers, seed)``: ``(model, processor)`` at the real size (None: not built);
    ``template_source``: where the chat template written into the checkpoint comes from."""

    name: str
    write: Callable[[Path, int], Path]
    template_source: str
    full_size: Callable[..., tuple[Any, Any]] | None = None
    model_card_inputs: Callable[[Any, list[dict[str, Any]]], Mapping[str, Any]] = card_inputs


TINY: Registry[TinyFamily] = Registry("tiny model family")
# family name → why its tiny checkpoint cannot be written here (a package its processor needs is missing)
UNAVAILABLE: dict[str, str] = {}


def register(family: TinyFamily) -> TinyFamily:
    return TINY.add(family.name, family)


def unavailable(name: str, reason: str) -> None:
    """Record that family ``name`` has a tiny checkpoint, which cannot be written here, and why."""
    UNAVAILABLE[name] = reason
