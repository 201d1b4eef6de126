"""The QWEN2_AUDIO family's test models: its spec, its tiny and full-size configurations (config.json content),
registered as a ``TinyFamily`` (the folder writer and the full-size builder are ``testing.qwen``'s, shared by
the three Qwen families). The real checkpoint's facts: ``testing.configs``' module docstring; the full size:
Qwen2-Audio-7B(-Instruct): config.json of Qwen/Qwen2-Audio-7B(-Instruct)."""

from __future__ import annotations

from typing import Any

from audioicl.testing.configs import Family
from audioicl.testing.qwen import qwen_tiny_family
from audioicl.testing.templates import QWEN2_AUDIO_TEMPLATE


def tiny_config(spec: Family, ids: dict[str, int], vocab: int, user_id: int) -> dict[str, Any]:
    """config.json content of the tiny model (the thinker's, for an Omni family)."""
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    return {
        "model_type": "qwen2_audio",
        "architectures": ["Qwen2AudioForConditionalGeneration"],
        "audio_token_index": ids["<|AUDIO|>"],
        # The real encoder's frame rate and window (1500 positions = 30 s) with tiny widths.
        "audio_config": {
            "model_type": "qwen2_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 2,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "d_model": 32,
            "max_source_positions": 1500,
        },
        "text_config": {
            "model_type": "qwen2",
            "vocab_size": vocab,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-5,
            "bos_token_id": pad,
            "eos_token_id": eos,
        },
    }


def full_config() -> dict[str, Any]:
    """The real full-size configuration (Qwen2-Audio-7B(-Instruct): config.json of Qwen/Qwen2-Audio-7B(-Instruct))."""
    return {
        "model_type": "qwen2_audio",
        "architectures": ["Qwen2AudioForConditionalGeneration"],
        "audio_token_index": 151646,
        "audio_config": {
            "model_type": "qwen2_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 32,
            "encoder_attention_heads": 20,
            "encoder_ffn_dim": 5120,
            "d_model": 1280,
            "max_source_positions": 1500,
        },
        "text_config": {
            "model_type": "qwen2",
            "vocab_size": 156032,
            "hidden_size": 4096,
            "intermediate_size": 11008,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 32,
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-5,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
            "bos_token_id": 151643,
            "eos_token_id": 151645,
        },
    }


QWEN2_AUDIO = Family(
    name="qwen2-audio",
    model_class="Qwen2AudioForConditionalGeneration",
    full_class=None,
    processor_class="Qwen2AudioProcessor",
    chat_template=QWEN2_AUDIO_TEMPLATE,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|AUDIO|>": 151646,
        "<|audio_bos|>": 151647,
        "<|audio_eos|>": 151648,
    },
    audio_placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
    audio_token="<|AUDIO|>",
    chunk_length=30,  # n_samples 480000, nb_max_frames 3000: a 30 s encoder window
    tiny_config=tiny_config,
    full_config=full_config,
)

qwen_tiny_family(QWEN2_AUDIO, "Qwen/Qwen2-Audio-7B-Instruct's chat_template.json")
