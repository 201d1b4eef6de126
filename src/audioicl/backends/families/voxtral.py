"""Voxtral (``VoxtralForConditionalGeneration``, Mini-3B and Small-24B): prompts made by mistral-common.

Its processor has no Jinja chat template: ``VoxtralProcessor.apply_chat_template`` hands the conversation to
``MistralCommonBackend``, whose mistral-common encoder (tokenizer version v7) writes the control tokens and,
for each audio part, ``[BEGIN_AUDIO]`` and 375 ``[AUDIO]`` per started 30 s of the clip, so the token count
needs the clip's samples; ``tokenize=False`` is ignored (it returns model inputs) and ``VoxtralProcessor()``
refuses any text holding ``[AUDIO]``. Text cannot carry the prompt, so the family makes its inputs straight
from the chats (``chat_inputs``), each clip passed as the model card passes audio: an encoded audio file
(here a lossless float32 WAV, base64).

Limits, from transformers 5.25 and mistral-common 1.13: ``AudioEncoder.pad`` pads each clip to a multiple of
``chunk_length_s`` (30 s) and ``VoxtralProcessor._retrieve_input_features`` cuts it into 3000-frame windows, so
nothing is truncated and a clip's features never depend on its batch mates; the bound is the 32k-token
context the model was trained for (the model card: 40 minutes of audio for understanding). A system message
beside audio is refused (``Found system messages ... and audio chunks ... not allowed prior to the tokenizer
version 13``), so its text opens the first user turn.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

from audioicl import audio
from audioicl.prompts.chat import Chat

from .base import AudioFamily, VllmSupport
from .registry import register

CHUNK_SECONDS = 30.0  # tekken.json audio.chunk_length_s
TOKENS_PER_CHUNK = 375  # 30 s at frame_rate 12.5 (tekken.json audio.frame_rate)


def wav_base64(wave: Any, sr: int) -> str:
    """The samples as a base64 float32 WAV file: what mistral-common decodes back to the very same samples
    (a 16-bit file, as ``load_audio_as`` writes, would round them)."""
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, wave, sr, format="WAV", subtype="FLOAT")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


class VoxtralFamily(AudioFamily):
    """Voxtral: the inputs come from ``processor.apply_chat_template`` over conversations carrying the clips."""

    def conversation(self, chat: Chat, sampling_rate: int) -> list[dict[str, Any]]:
        """``template_messages(chat)`` with each audio part carrying its clip at ``sampling_rate``
        (``{"type": "audio", "base64": ...}``, as the model card's conversations do)."""
        clips = iter(chat.audio_parts())
        messages = self.template_messages(chat)
        for message in messages:
            for part in message["content"]:
                if part["type"] == "audio":
                    clip = next(clips)
                    wave = (
                        clip.wave
                        if clip.sr == sampling_rate
                        else audio.resample(clip.wave, clip.sr, sampling_rate)
                    )
                    part["base64"] = wav_base64(wave, sampling_rate)
        return messages

    def chat_inputs(self, processor: Any, chats: Sequence[Chat], sampling_rate: int) -> Any | None:
        """One ``apply_chat_template`` call over the micro-batch: token ids padded on the tokenizer's side
        (the backend sets left), every clip's 30 s windows as rows of ``input_features``, in order."""
        return processor.apply_chat_template([self.conversation(chat, sampling_rate) for chat in chats])

    def prompt_ids(self, processor: Any, chat: Chat, sampling_rate: int) -> list[int]:
        """The ids ``chat_inputs`` makes, from the tokenizer's side of the call alone (mistral-common's
        encoder), the clips' mel features left out."""
        made = processor.tokenizer.apply_chat_template(
            [self.conversation(chat, sampling_rate)], tokenize=True, return_dict=True
        )
        return list(made["input_ids"][0])

    def clip_inputs(self, processor: Any, wave: Any, sampling_rate: int) -> tuple[Any, int]:
        """A one-clip conversation through ``chat_inputs``: the clip's 30 s windows laid end to end
        ([128, 3000 x windows]; each window's features are the processor's own, whatever else a call holds)
        and its ``[AUDIO]`` tokens (375 a window)."""
        import torch

        from audioicl.prompts.chat import AudioPart, Message

        clip = AudioPart.of(wave, sampling_rate)
        made = self.chat_inputs(processor, [Chat("", (Message("user", (clip,)),), ())], sampling_rate)
        windows = made["input_features"].to(torch.float32)  # [windows, 128, 3000]
        tokens = int((made["input_ids"][0] == processor.audio_token_id).sum())
        return windows.transpose(0, 1).reshape(windows.shape[1], -1), tokens


FAMILY = register(
    VoxtralFamily(
        name="voxtral",
        display="Voxtral",
        model_types=("voxtral",),
        model_class="VoxtralForConditionalGeneration",
        system="merged",
        max_clip_seconds=2400.0,  # the model card's 40 minutes (32k-token context; 375 tokens per 30 s window)
        audio_tokens_per_second=12.5,
        min_transformers="4.54",
        checkpoints=("mistralai/Voxtral-Mini-3B-2507", "mistralai/Voxtral-Small-24B-2507"),
        vllm=VllmSupport("VoxtralForConditionalGeneration", max_clips=5),
        notes=(
            "Needs mistral-common (with its audio extra: soundfile, soxr), which pins numpy < 2.4 on Python "
            "<= 3.12. Every clip costs [BEGIN_AUDIO] and 375 audio tokens per started 30 s (a 1 s clip costs "
            "376), so 32 one-second clips take 12,000 tokens. No system message beside audio: its text opens "
            "the first user turn. vLLM serves it with --tokenizer-mode mistral from mistral-common's own "
            "request encoding, which a text prompt cannot give: vLLM takes 5 clips per prompt of it, and our vllm "
            "backend cannot serve it yet (untested)."
        ),
    )
)
