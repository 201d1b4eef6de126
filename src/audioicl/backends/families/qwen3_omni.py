"""Qwen3-Omni (30B-A3B, MoE): the *Thinker* makes the text; 12.5 audio tokens per second (13 per 100 frames)."""

from .base import AudioFamily, VllmSupport
from .registry import register

FAMILY = register(
    AudioFamily(
        name="qwen3-omni",
        display="Qwen3-Omni",
        model_types=("qwen3_omni_moe", "qwen3_omni_moe_thinker"),
        model_class="Qwen3OmniMoeThinkerForConditionalGeneration",
        rendering="inline",
        thinker_of=("qwen3_omni_moe",),
        system_family="qwen3-omni",
        placeholder="<|audio_start|><|audio_pad|><|audio_end|>",
        audio_token="<|audio_pad|>",
        max_clip_seconds=300.0,  # the feature extractor's window (preprocessor_config.json chunk_length)
        audio_tokens_per_second=13.0,
        encoder_reads_valid_frames=True,
        checkpoints=(
            "Qwen/Qwen3-Omni-30B-A3B-Instruct",
            "Qwen/Qwen3-Omni-30B-A3B-Thinking",
            "Qwen/Qwen3-Omni-30B-A3B-Captioner",
        ),
        verified="gpu",
        vllm=VllmSupport("Qwen3OmniMoeThinkerForConditionalGeneration", verified="untested"),
    )
)
