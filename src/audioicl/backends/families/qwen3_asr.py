"""Qwen3-ASR (``Qwen3ASRForConditionalGeneration``), a speech recogniser: one clip a prompt.

From transformers 5.25 ``processing_qwen3_asr.py``: ``validate_inputs`` takes texts and clips 1:1; the feature
extractor pads a call's clips to the longest (``audio_kwargs``: ``padding=True``, ``truncation=False``) and its
log-mel of a clip then differs from the clip's alone (the last frames see the padding), so each prompt is its own
call. The encoder reads 100-frame chunks (``n_window=50``, 13 positions a chunk: any length): 13 tokens a second
(``_get_audio_token_length``). Its longest clip is the original library's single pass, ``MAX_ASR_INPUT_SECONDS =
1200`` (``qwen_asr/inference/utils.py``: longer audio is split by that wrapper, which transformers does not do).

The chat template (``convert_qwen3_asr_to_hf.py``'s ``ASR_CHAT_TEMPLATE``) renders the system messages' text and
the clips of every message, never a user message's text: the model card gives text to the model only as the
system prompt (``apply_transcription_request(prompt=...)``: "context"), so the prompt's text goes there.
"""

from __future__ import annotations

from typing import Any

from audioicl.prompts.chat import AudioPart, Chat, message_text

from .base import AudioFamily, VllmSupport
from .registry import register


class Qwen3AsrFamily(AudioFamily):
    def template_messages(self, chat: Chat) -> list[dict[str, Any]]:
        """The text of the system and user messages, in order, as the system message (the template's only text
        slot besides the assistant's), each user message then holding its clips alone; assistant turns kept."""
        context = "\n\n".join(
            text
            for m in chat.messages
            if m.role in ("system", "user")
            if (text := message_text(m, "").strip())
        )
        messages: list[dict[str, Any]] = [{"role": "system", "content": [{"type": "text", "text": context}]}]
        for m in chat.messages:
            if m.role == "user":
                clips = [{"type": "audio"} for part in m.content if isinstance(part, AudioPart)]
                messages.append({"role": "user", "content": clips})
            elif m.role == "assistant":
                messages.append(
                    {"role": "assistant", "content": [{"type": "text", "text": message_text(m, "")}]}
                )
        return messages


FAMILY = register(
    Qwen3AsrFamily(
        name="qwen3_asr",
        display="Qwen3-ASR",
        model_types=("qwen3_asr",),
        model_class="Qwen3ASRForConditionalGeneration",
        max_clip_seconds=1200.0,
        max_clips=1,
        audio_tokens_per_second=13.0,
        asr_only=True,
        prompts_per_call=1,
        min_transformers="unknown",
        checkpoints=("Qwen/Qwen3-ASR-1.7B", "Qwen/Qwen3-ASR-0.6B"),
        verified="gpu",
        vllm=VllmSupport("Qwen3ASRForConditionalGeneration"),
        notes=(
            "A speech recogniser (transcription only). One clip per prompt (the processor takes texts and clips "
            "1:1). Its chat template renders no user text: the prompt's text reaches the model as the system "
            "prompt (the model card's context slot). At most 1200 s a clip (the original library's single "
            "pass). Each prompt is its own processor call (a call pads its clips together, which changes them)."
        ),
    )
)
