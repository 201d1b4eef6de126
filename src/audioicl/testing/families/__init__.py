"""Tiny random-weight checkpoints (and full-size builders) of the families beyond the three Qwen ones.

Each module here registers one ``TinyFamily`` under the name of its ``backends.families`` family: ``write``
makes, offline and in seconds, a folder that loads like the real checkpoint (the real config, processor and
feature-extractor classes, the real special tokens and chat template, 2 small layers); ``full_size`` builds the
real full-size configuration with random weights on a device, for the GPU measurements; ``model_card_inputs``
is how the family's model card turns a conversation into model inputs, the reference of the parity test
(default: the processor's ``apply_chat_template(..., tokenize=True, return_dict=True)``).
Importing the package imports every module in it. Needs the ``hf`` extra.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import import_module
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


def register(family: TinyFamily) -> TinyFamily:
    return TINY.add(family.name, family)


for _module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    import_module(f"{__name__}.{_module}")
