"""One rendering of a typed chat into a model family's prompt text, shared by every model backend.

The original (SPEC §4) writes each clip's audio placeholder inline in the user text
(``[Demo Audio 1] <|audio_bos|><|AUDIO|><|audio_eos|> Label: 7``) and renders the messages, as plain strings,
with the model's own chat template and the generation prompt. String content matters: the templates'
list-of-parts path adds text of its own (Qwen2-Audio's writes ``Audio 1: `` before each clip).

``AudioFamily`` holds what differs between model families: the placeholder, the system-prompt family, the
encoder's window and its audio tokens per second. The ``hf`` and ``vllm`` backends both render through
``render_chat``; only how the text and the waves reach the model differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import AudioICLError
from ..prompts import AudioPart, Chat, message_text


@dataclass(frozen=True)
class AudioFamily:
    """``model_types``: the ``config.json`` model types of the family; ``thinker_of``: for a full Omni
    checkpoint, the sub-config holding the text-producing model (SPEC §6); ``system_family``: which
    system prompt it gets (``prompts.DEFAULT_SYSTEM``)."""

    name: str
    model_types: tuple[str, ...]
    model_class: str  # the transformers class that produces text
    system_family: str
    placeholder: str  # the audio placeholder as written in the prompt text
    audio_token: str  # the token the processor repeats once per audio frame
    thinker_of: tuple[str, ...] = ()  # model types whose checkpoint holds the model under ``thinker``
    # True where the audio encoder keeps only the frames its feature mask marks (the Omni thinkers): the
    # processor's padding beyond them is then never seen, and need not be stored or sent.
    encoder_reads_valid_frames: bool = False
    # True where the processor pads every clip to its window, so a clip's features are the same whatever
    # else is in the call, and clips can be extracted many at a time.
    features_independent_of_batch: bool = False


FAMILIES: tuple[AudioFamily, ...] = (
    AudioFamily(
        name="qwen2-audio",
        model_types=("qwen2_audio",),
        model_class="Qwen2AudioForConditionalGeneration",
        system_family="qwen2-audio",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        features_independent_of_batch=True,
    ),
    AudioFamily(
        name="qwen2.5-omni",
        model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
        model_class="Qwen2_5OmniThinkerForConditionalGeneration",
        system_family="qwen2.5-omni",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        thinker_of=("qwen2_5_omni",),
        encoder_reads_valid_frames=True,
        features_independent_of_batch=True,
    ),
    AudioFamily(
        name="qwen3-omni",
        model_types=("qwen3_omni_moe", "qwen3_omni_moe_thinker"),
        model_class="Qwen3OmniMoeThinkerForConditionalGeneration",
        system_family="qwen3-omni",
        placeholder="<|audio_start|><|audio_pad|><|audio_end|>",
        audio_token="<|audio_pad|>",
        thinker_of=("qwen3_omni_moe",),
        encoder_reads_valid_frames=True,
    ),
)


def family_of(model_type: str) -> AudioFamily | None:
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def generic_family(model_type: str, processor: Any) -> AudioFamily:
    """The family of an audio chat model we know nothing of, from its processor's audio tokens
    (``audio_bos_token`` + ``audio_token`` + ``audio_eos_token``, as the Qwen processors name them)."""
    token = getattr(processor, "audio_token", None)
    if not isinstance(token, str):
        raise AudioICLError(
            f"model_type {model_type!r}: its processor names no audio token (processor.audio_token), so "
            "audioicl cannot place audio in its prompt; supported: "
            + ", ".join(t for f in FAMILIES for t in f.model_types)
        )
    bos = getattr(processor, "audio_bos_token", None) or ""
    eos = getattr(processor, "audio_eos_token", None) or ""
    return AudioFamily(
        name=model_type,
        model_types=(model_type,),
        model_class="",
        system_family="default",
        placeholder=f"{bos}{token}{eos}",
        audio_token=token,
    )


def chat_messages(chat: Chat, placeholder: str) -> list[dict[str, str]]:
    """The chat as template messages with string content, each audio part written as ``placeholder``."""
    return [{"role": m.role, "content": message_text(m, placeholder)} for m in chat.messages]


TemplateFn = Callable[..., str]


def render_chat(
    chat: Chat, family: AudioFamily, apply_chat_template: TemplateFn
) -> tuple[str, list[AudioPart]]:
    """The prompt text (chat template applied, generation prompt added) and the clips in the order their
    placeholders appear. ``apply_chat_template``: the tokenizer's or processor's own method."""
    text = apply_chat_template(
        chat_messages(chat, family.placeholder), tokenize=False, add_generation_prompt=True
    )
    clips = list(chat.audio_parts())
    found = text.count(family.placeholder)
    if found != len(clips):
        raise AudioICLError(
            f"the chat template wrote {found} audio placeholders for {len(clips)} clips "
            f"({family.placeholder!r}); does the text contain the placeholder, or drop a message?"
        )
    return text, clips
