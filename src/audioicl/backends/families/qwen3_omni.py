"""Qwen3-Omni (30B-A3B, MoE): the *Thinker* makes the text; 12.5 audio tokens per second (13 per 100 frames).

Its processor pads a call's clips to the longest (``Qwen3OmniMoeProcessor.audio_kwargs``: ``padding=True``,
``truncation=False``), so the fast path extracts a clip alone or beside clips of its own length; it does so
through the feature extractor with those kwargs, the tokens counted as ``_process_audio`` counts them.
"""

from collections.abc import Sequence
from typing import Any

from .base import AudioFamily, VllmSupport
from .registry import register


class Qwen3OmniFamily(AudioFamily):
    def clip_features(
        self, processor: Any, waves: Sequence[Any], sampling_rate: int, **extract: Any
    ) -> tuple[Any, Any, list[int]]:
        """``Qwen3OmniMoeProcessor._process_audio`` without the text around it: the feature extractor with
        the processor's audio kwargs, each clip's tokens from its valid frames (``n_window`` the
        processor's)."""
        from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import (
            _get_feat_extract_output_lengths,
        )

        out = processor.feature_extractor(
            list(waves),
            sampling_rate=sampling_rate,
            padding=True,
            truncation=False,
            return_attention_mask=True,
            return_tensors="pt",
            **extract,
        )
        mask = out["attention_mask"]
        tokens = _get_feat_extract_output_lengths(mask.sum(-1), processor.n_window)
        return out["input_features"], mask, [int(t) for t in tokens]


FAMILY = register(
    Qwen3OmniFamily(
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
