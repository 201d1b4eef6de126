"""Granite Speech 3.3 (``GraniteSpeechForConditionalGeneration``), a speech recogniser and translator.

From transformers 5.25: the processor's feature extractor is its ``audio_processor`` attribute (``sampling_rate``
16,000; it needs torchaudio). ``GraniteSpeechFeatureExtractor`` pads the call's clips to the longest with zeros
and truncates nothing; ``_get_num_audio_features`` gives a clip ceil((samples // 160 + 1) // 2 / 15) * 3
``<|audio|>`` tokens (10 a second). The encoder (``GraniteSpeechCTCEncoder``) takes no mask: its 200-frame
attention blocks and convolutions read the zero padding past a clip's end, and the log-mel floor is set per
padded row, so a clip's audio embeddings depend on the longest clip of the call: each prompt is its own call.
Its chat template (Granite 3.3's) takes string content only; the model card writes ``<|audio|>`` into the user
text and passes the clips to the processor beside it, which this family does (``chat_inputs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audioicl import audio
from audioicl.prompts.chat import Chat

from .base import AudioFamily, VllmSupport
from .registry import register


class StringContentFamily(AudioFamily):
    """A family whose chat template renders string content only, the audio token written into the text."""

    def chat_inputs(self, processor: Any, chats: Sequence[Chat], sampling_rate: int) -> Any | None:
        """As the model card: each message's parts joined into one string (a clip as the processor's
        ``audio_token``), the tokenizer's chat template over them, then one processor call over the texts and
        their clips in order (texts left-padded by the processor)."""
        texts, waves = [], []
        for chat in chats:
            messages = [
                {"role": m["role"], "content": _joined(m["content"], processor.audio_token)}
                for m in self.template_messages(chat)
            ]
            texts.append(
                processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            )
            for clip in chat.audio_parts():
                same = clip.sr == sampling_rate
                waves.append(clip.wave if same else audio.resample(clip.wave, clip.sr, sampling_rate))
        return processor(text=texts, audio=waves or None, return_tensors="pt")


def _joined(parts: list[dict[str, Any]], audio_token: str) -> str:
    return "".join(audio_token if part["type"] == "audio" else part["text"] for part in parts)


FAMILY = register(
    StringContentFamily(
        name="granite-speech",
        display="Granite Speech",
        model_types=("granite_speech",),
        model_class="GraniteSpeechForConditionalGeneration",
        audio_tokens_per_second=10.0,
        prompts_per_call=1,  # the encoder reads the call's padding (module docstring)
        asr_only=True,
        adapter=".",  # the speech LoRA: adapter_config.json at the checkpoint's root
        verified="ci",  # CI installs torchaudio 2.11.1 beside torch 2.14.1 (scripts/test.sh)
        min_transformers="4.52",
        checkpoints=("ibm-granite/granite-speech-3.3-2b", "ibm-granite/granite-speech-3.3-8b"),
        vllm=VllmSupport("GraniteSpeechForConditionalGeneration", placeholder="<|audio|>", max_clips=1),
        notes=(
            "A speech recogniser and translator (two-pass design: the model card transcribes, then a second "
            "call to the text model reasons). Needs torchaudio (the feature extractor's mel spectrogram) and "
            "peft for the speech LoRA the checkpoints ship (adapter_config.json; without peft the base model "
            "runs without it). Several clips per prompt go through the processor and model (each <|audio|> is "
            "expanded), but the model was trained on one. The encoder reads the padding of a call, so prompts "
            "are processed one by one. The processor's feature extractor is processor.audio_processor."
        ),
    )
)
