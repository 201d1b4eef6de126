"""Qwen2.5-Omni (3B and 7B): the *Thinker* makes the text; its checkpoint holds it under ``thinker.``."""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="qwen2.5-omni",
        display="Qwen2.5-Omni",
        model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
        model_class="Qwen2_5OmniThinkerForConditionalGeneration",
        rendering="inline",
        thinker_of=("qwen2_5_omni",),
        system_family="qwen2.5-omni",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        max_clip_seconds=300.0,  # the feature extractor's window (preprocessor_config.json chunk_length)
        audio_tokens_per_second=25.0,
        encoder_reads_valid_frames=True,
        features_independent_of_batch=True,
        checkpoints=("Qwen/Qwen2.5-Omni-7B", "Qwen/Qwen2.5-Omni-3B"),
        verified="gpu",
        vllm=VllmSupport("Qwen2_5OmniThinkerForConditionalGeneration", verified="untested"),
    )
)
