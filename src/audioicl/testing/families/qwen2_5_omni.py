"""The QWEN2_5_OMNI family's test models: its spec, its tiny and full-size configurations (config.json content),
registered as a ``TinyFamily`` (the folder writer and the full-size builder are ``testing.qwen``'s, shared by
the three Qwen families). The real checkpoint's facts: ``testing.configs``' module docstring; the full size:
the Qwen2.5-Omni-7B thinker: Qwen/Qwen2.5-Omni-7B config.json thinker_config."""

from __future__ import annotations

import copy
from typing import Any

from audioicl.testing.configs import Family
from audioicl.testing.qwen import qwen_tiny_family
from audioicl.testing.templates import QWEN2_5_OMNI_TEMPLATE


def tiny_config(spec: Family, ids: dict[str, int], vocab: int, user_id: int) -> dict[str, Any]:
    """config.json content of the tiny model (the thinker's, for an Omni family)."""
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    return {
        "model_type": "qwen2_5_omni_thinker",
        "architectures": ["Qwen2_5OmniThinkerForConditionalGeneration"],
        "audio_token_index": ids["<|AUDIO|>"],
        "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "audio_end_token_id": ids["<|audio_eos|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "vision_end_token_id": ids["<|vision_eos|>"],
        "vision_token_id": ids["<|vision_pad|>"],
        "user_token_id": user_id,
        "bos_token_id": ids["<|im_start|>"],
        "eos_token_id": eos,
        "pad_token_id": pad,
        "position_id_per_seconds": 25,
        "seconds_per_chunk": 2,
        "audio_config": {
            "model_type": "qwen2_5_omni_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 2,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "d_model": 32,
            "max_source_positions": 1500,
            "n_window": 100,
            "output_dim": 64,
        },
        "vision_config": {
            "model_type": "qwen2_5_omni_vision_encoder",
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "patch_size": spec.image_patch_size,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [1],
        },
        "text_config": {
            "model_type": "qwen2_5_omni_text",
            "vocab_size": vocab,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            # head_dim 16: the three M-RoPE sections (time, height, width) must add up to head_dim / 2.
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [2, 3, 3],
            },
            "tie_word_embeddings": False,
        },
    }


def omni_config(spec: Family, thinker: dict[str, Any], ids: dict[str, int]) -> dict[str, Any]:
    """The full Omni config.json around a tiny thinker: tiny talker and vocoder, real-layout keys."""
    thinker = copy.deepcopy(thinker)
    hidden = thinker["text_config"]["hidden_size"]
    talker = {
        "model_type": "qwen2_5_omni_talker",
        "audio_token_index": ids["<|AUDIO|>"],
        "image_token_index": ids["<|IMAGE|>"],
        "video_token_index": ids["<|VIDEO|>"],
        "vision_start_token_id": ids["<|vision_bos|>"],
        "vision_end_token_id": ids["<|vision_eos|>"],
        "audio_start_token_id": ids["<|audio_bos|>"],
        "audio_end_token_id": ids["<|audio_eos|>"],
        "embedding_size": hidden,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 8448,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
    }
    token2wav = {
        "model_type": "qwen2_5_omni_token2wav",
        "dit_config": {
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "head_dim": 16,
            "ff_mult": 2,
            "emb_dim": 16,
            "look_ahead_layers": [1],
            "look_backward_layers": [0],
            "enc_emb_dim": 16,
            "enc_dim": 16,
            "enc_channels": [16, 16, 16, 16, 48],
            "enc_attention_channels": 16,
            "enc_se_channels": 16,
        },
        "bigvgan_config": {"upsample_initial_channel": 32},
    }
    return {
        "model_type": "qwen2_5_omni",
        "architectures": ["Qwen2_5OmniForConditionalGeneration"],
        "thinker_config": thinker,
        "talker_config": talker,
        "token2wav_config": token2wav,
        "enable_audio_output": True,
    }


def full_config() -> dict[str, Any]:
    """The real full-size configuration (the Qwen2.5-Omni-7B thinker: Qwen/Qwen2.5-Omni-7B config.json thinker_config)."""
    return {
        "model_type": "qwen2_5_omni_thinker",
        "architectures": ["Qwen2_5OmniThinkerForConditionalGeneration"],
        "audio_token_index": 151646,
        "image_token_index": 151655,
        "video_token_index": 151656,
        "audio_start_token_id": 151647,
        "audio_end_token_id": 151648,
        "vision_start_token_id": 151652,
        "vision_end_token_id": 151653,
        "vision_token_id": 151654,
        "user_token_id": 872,
        "bos_token_id": 151644,
        "eos_token_id": 151645,
        "pad_token_id": 151643,
        "position_id_per_seconds": 25,
        "seconds_per_chunk": 2,
        "audio_config": {
            "model_type": "qwen2_5_omni_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 32,
            "encoder_attention_heads": 20,
            "encoder_ffn_dim": 5120,
            "d_model": 1280,
            "max_source_positions": 1500,
            "n_window": 100,
            "output_dim": 3584,
        },
        "vision_config": {
            "model_type": "qwen2_5_omni_vision_encoder",
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 3584,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [7, 15, 23, 31],
        },
        "text_config": {
            "model_type": "qwen2_5_omni_text",
            "vocab_size": 152064,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [16, 24, 24],
            },
            "tie_word_embeddings": False,
        },
    }


QWEN2_5_OMNI = Family(
    name="qwen2.5-omni",
    model_class="Qwen2_5OmniThinkerForConditionalGeneration",
    full_class="Qwen2_5OmniForConditionalGeneration",
    processor_class="Qwen2_5OmniProcessor",
    chat_template=QWEN2_5_OMNI_TEMPLATE,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|AUDIO|>": 151646,
        "<|audio_bos|>": 151647,
        "<|audio_eos|>": 151648,
        "<|vision_bos|>": 151652,
        "<|vision_eos|>": 151653,
        "<|vision_pad|>": 151654,
        "<|IMAGE|>": 151655,
        "<|VIDEO|>": 151656,
    },
    named_tokens={
        "image_token": "<|IMAGE|>",
        "audio_token": "<|AUDIO|>",
        "video_token": "<|VIDEO|>",
        "vision_bos_token": "<|vision_bos|>",
        "vision_eos_token": "<|vision_eos|>",
        "audio_bos_token": "<|audio_bos|>",
        "audio_eos_token": "<|audio_eos|>",
    },
    audio_placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
    audio_token="<|AUDIO|>",
    chunk_length=300,  # n_samples 4800000, nb_max_frames 30000
    image_patch_size=14,
    tiny_config=tiny_config,
    full_config=full_config,
    omni_config=omni_config,
)

qwen_tiny_family(QWEN2_5_OMNI, "Qwen/Qwen2.5-Omni-7B's chat_template.json")
