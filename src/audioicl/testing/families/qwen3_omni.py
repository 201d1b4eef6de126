"""The QWEN3_OMNI family's test models: its spec, its tiny and full-size configurations (config.json content),
registered as a ``TinyFamily`` (the folder writer and the full-size builder are ``testing.qwen``'s, shared by
the three Qwen families). The real checkpoint's facts: ``testing.configs``' module docstring; the full size:
the Qwen3-Omni-30B-A3B thinker: Qwen/Qwen3-Omni-30B-A3B-Instruct config.json thinker_config."""

from __future__ import annotations

import copy
from typing import Any

from audioicl.testing.configs import Family
from audioicl.testing.qwen import qwen_tiny_family
from audioicl.testing.templates import QWEN3_OMNI_TEMPLATE


def tiny_config(spec: Family, ids: dict[str, int], vocab: int, user_id: int) -> dict[str, Any]:
    """config.json content of the tiny model (the thinker's, for an Omni family)."""
    return {
        "model_type": "qwen3_omni_moe_thinker",
        "architectures": ["Qwen3OmniMoeThinkerForConditionalGeneration"],
        "audio_token_id": ids["<|audio_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "audio_start_token_id": ids["<|audio_start|>"],
        "audio_end_token_id": ids["<|audio_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "user_token_id": user_id,
        "position_id_per_seconds": 13,
        "seconds_per_chunk": 2,
        "audio_config": {
            "model_type": "qwen3_omni_moe_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 2,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "d_model": 32,
            "max_source_positions": 1500,
            # The real chunking (100 frames → 13 tokens), attention window and conv chunk size.
            "n_window": 50,
            "n_window_infer": 800,
            "conv_chunksize": 500,
            "downsample_hidden_size": 16,
            "output_dim": 64,
        },
        "vision_config": {
            "model_type": "qwen3_omni_moe_vision_encoder",
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "patch_size": spec.image_patch_size,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": [1],
        },
        "text_config": {
            "model_type": "qwen3_omni_moe_text",
            "vocab_size": vocab,
            "hidden_size": 64,
            "intermediate_size": 64,
            "moe_intermediate_size": 32,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [4, 2, 2],
                "interleaved": True,
            },
            "tie_word_embeddings": False,
        },
    }


def omni_config(spec: Family, thinker: dict[str, Any], ids: dict[str, int]) -> dict[str, Any]:
    """The full Omni config.json around a tiny thinker: tiny talker and vocoder, real-layout keys."""
    thinker = copy.deepcopy(thinker)
    hidden = thinker["text_config"]["hidden_size"]
    talker = {
        "thinker_hidden_size": hidden,
        "accept_hidden_layer": 1,
        "num_code_groups": 4,
        "audio_token_id": ids["<|audio_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "audio_start_token_id": ids["<|audio_start|>"],
        "audio_end_token_id": ids["<|audio_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "position_id_per_seconds": 13,
        "seconds_per_chunk": 2,
        "spatial_merge_size": 2,
        "speaker_id": {"chelsie": 2301, "ethan": 2302, "aiden": 2303},
        "text_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "moe_intermediate_size": 16,
            "shared_expert_intermediate_size": 32,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 3072,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [4, 2, 2],
                "interleaved": True,
            },
        },
        "code_predictor_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 2048,
            "num_code_groups": 4,
        },
    }
    code2wav = {
        "codebook_size": 2048,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_quantizers": 4,
        "decoder_dim": 32,
        "upsample_rates": [2, 2, 2, 2],
        "upsampling_ratios": [2, 2],
    }
    return {
        "model_type": "qwen3_omni_moe",
        "architectures": ["Qwen3OmniMoeForConditionalGeneration"],
        "thinker_config": thinker,
        "talker_config": talker,
        "code2wav_config": code2wav,
        "enable_audio_output": True,
        "im_start_token_id": ids["<|im_start|>"],
        "im_end_token_id": ids["<|im_end|>"],
        "user_token_id": thinker["user_token_id"],
    }


def full_config() -> dict[str, Any]:
    """The real full-size configuration (the Qwen3-Omni-30B-A3B thinker: Qwen/Qwen3-Omni-30B-A3B-Instruct config.json thinker_config)."""
    return {
        "model_type": "qwen3_omni_moe_thinker",
        "architectures": ["Qwen3OmniMoeThinkerForConditionalGeneration"],
        "audio_token_id": 151675,
        "image_token_id": 151655,
        "video_token_id": 151656,
        "audio_start_token_id": 151669,
        "audio_end_token_id": 151670,
        "vision_start_token_id": 151652,
        "vision_end_token_id": 151653,
        "user_token_id": 872,
        "position_id_per_seconds": 13,
        "seconds_per_chunk": 2,
        "audio_config": {
            "model_type": "qwen3_omni_moe_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 32,
            "encoder_attention_heads": 20,
            "encoder_ffn_dim": 5120,
            "d_model": 1280,
            "max_source_positions": 1500,
            "n_window": 50,
            "n_window_infer": 800,
            "conv_chunksize": 500,
            "downsample_hidden_size": 480,
            "output_dim": 2048,
        },
        "vision_config": {
            "model_type": "qwen3_omni_moe_vision_encoder",
            "depth": 27,
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_heads": 16,
            "out_hidden_size": 2048,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": [8, 16, 24],
        },
        "text_config": {
            "model_type": "qwen3_omni_moe_text",
            "vocab_size": 152064,
            "hidden_size": 2048,
            "intermediate_size": 768,
            "moe_intermediate_size": 768,
            "num_experts": 128,
            "num_experts_per_tok": 8,
            "norm_topk_prob": True,
            "num_hidden_layers": 48,
            "num_attention_heads": 32,
            "num_key_value_heads": 4,
            "head_dim": 128,
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [24, 20, 20],
                "interleaved": True,
            },
            "tie_word_embeddings": False,
        },
    }


QWEN3_OMNI = Family(
    name="qwen3-omni",
    model_class="Qwen3OmniMoeThinkerForConditionalGeneration",
    full_class="Qwen3OmniMoeForConditionalGeneration",
    processor_class="Qwen3OmniMoeProcessor",
    chat_template=QWEN3_OMNI_TEMPLATE,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|vision_start|>": 151652,
        "<|vision_end|>": 151653,
        "<|vision_pad|>": 151654,
        "<|image_pad|>": 151655,
        "<|video_pad|>": 151656,
        "<|audio_start|>": 151669,
        "<|audio_end|>": 151670,
        "<|audio_pad|>": 151675,
    },
    named_tokens={
        "image_token": "<|image_pad|>",
        "audio_token": "<|audio_pad|>",
        "video_token": "<|video_pad|>",
        "vision_bos_token": "<|vision_start|>",
        "vision_eos_token": "<|vision_end|>",
        "audio_bos_token": "<|audio_start|>",
        "audio_eos_token": "<|audio_end|>",
    },
    audio_placeholder="<|audio_start|><|audio_pad|><|audio_end|>",
    audio_token="<|audio_pad|>",
    chunk_length=300,
    image_patch_size=16,
    tiny_config=tiny_config,
    full_config=full_config,
    omni_config=omni_config,
)

qwen_tiny_family(QWEN3_OMNI, "Qwen/Qwen3-Omni-30B-A3B-Instruct's chat_template.json")
