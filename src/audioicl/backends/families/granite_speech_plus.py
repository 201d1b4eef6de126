"""Granite Speech Plus (``GraniteSpeechPlusForConditionalGeneration``, Granite Speech 4.1 Plus): Granite Speech whose
projector reads the encoder's last hidden states concatenated with a chosen subset of its intermediate ones.

transformers 5.25 ``models/granite_speech_plus``: the same processor (``GraniteSpeechProcessor``, its feature
extractor the ``audio_processor``, 10 ``<|audio|>`` tokens a second), the same mask-less CTC encoder, so a
clip's embeddings depend on the longest clip of a call as Granite Speech's do (each prompt its own call); only
the encoder's output and the projector's input width differ (``encoder_config.cat_hidden_layers``). vLLM 0.32
serves it (``granite_speech_plus.py``, Granite Speech's processing: one clip per prompt).
"""

from __future__ import annotations

from .base import VllmSupport
from .granite_speech import StringContentFamily
from .registry import register

FAMILY = register(
    StringContentFamily(
        name="granite-speech-plus",
        display="Granite Speech Plus",
        model_types=("granite_speech_plus",),
        model_class="GraniteSpeechPlusForConditionalGeneration",
        audio_tokens_per_second=10.0,
        prompts_per_call=1,  # the encoder reads the call's padding, as Granite Speech's
        asr_only=True,
        adapter=".",
        verified="ci",  # CI installs torchaudio 2.11.1 beside torch 2.14.1 (scripts/test.sh)
        min_transformers="5.25",
        checkpoints=("ibm-granite/granite-speech-4.1-2b-plus",),
        vllm=VllmSupport("GraniteSpeechPlusForConditionalGeneration", placeholder="<|audio|>", max_clips=1),
        notes=(
            "A speech recogniser (its model card's tasks: transcription, speaker-attributed transcription, word "
            "timestamps, keyword-biased transcription). Granite Speech's processor and prompt rules (the audio "
            "token written into the user text; one prompt per call, the encoder reading the call's padding); "
            "needs torchaudio. Its tiny checkpoint uses the Granite 3.3 template: the 4.1 checkpoint's was not "
            "found offline."
        ),
    )
)
