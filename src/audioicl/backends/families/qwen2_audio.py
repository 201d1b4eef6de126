"""Qwen2-Audio (``Qwen2AudioForConditionalGeneration``): 30 s Whisper windows, 25 audio tokens per second."""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="qwen2-audio",
        display="Qwen2-Audio",
        model_types=("qwen2_audio",),
        model_class="Qwen2AudioForConditionalGeneration",
        rendering="inline",
        system_family="qwen2-audio",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        max_clip_seconds=30.0,  # the feature extractor's window (preprocessor_config.json chunk_length)
        audio_tokens_per_second=25.0,
        features_independent_of_batch=True,
        checkpoints=("Qwen/Qwen2-Audio-7B-Instruct", "Qwen/Qwen2-Audio-7B"),
        base_checkpoints=("Qwen/Qwen2-Audio-7B",),  # the pretrained model behind the instruct one
        verified="gpu",
        vllm=VllmSupport("Qwen2AudioForConditionalGeneration", verified="ci"),
    )
)
