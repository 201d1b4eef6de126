"""The three families' specs and configurations: what each checkpoint holds, as config.json content.

``Family`` (one per family, ``family(name)``) names the model, full Omni and processor classes, the chat
template and the special tokens at their real ids. ``tiny_config`` is the tiny model's config.json (the
thinker's, for the Omni families), ``tiny_omni_config`` the full Omni layout around it, ``full_config`` the
real full size, ``with_head_dim`` a tiny thinker with wider attention heads.

Where the real checkpoints' facts come from is cited next to each constant. Layouts of the real checkpoints:

- ``Qwen/Qwen2-Audio-7B-Instruct``: ``config.json`` of ``model_type`` ``qwen2_audio``
  (``Qwen2AudioForConditionalGeneration``), ``Qwen2AudioProcessor``; chat template in ``chat_template.json``.
- ``Qwen/Qwen2.5-Omni-7B``: ``model_type`` ``qwen2_5_omni`` with ``thinker_config`` (``qwen2_5_omni_thinker``),
  ``talker_config`` and ``token2wav_config`` inside and weights under ``thinker.``, ``talker.``, ``token2wav.``;
  ``Qwen2_5OmniProcessor``. ``Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained`` reads the thinker
  part of such a folder.
- ``Qwen/Qwen3-Omni-30B-A3B-Instruct``: ``model_type`` ``qwen3_omni_moe`` with ``thinker_config``
  (``qwen3_omni_moe_thinker``), ``talker_config``, ``code2wav_config``; ``Qwen3OmniMoeProcessor``.

Plain data: no torch or transformers here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from audioicl.testing.templates import QWEN2_5_OMNI_TEMPLATE, QWEN2_AUDIO_TEMPLATE, QWEN3_OMNI_TEMPLATE

FAMILIES: tuple[str, ...] = ("qwen2-audio", "qwen2.5-omni", "qwen3-omni")


# --------------------------------------------------------------------------- the families


@dataclass(frozen=True)
class Family:
    """What a family's checkpoint holds; token ids are the real checkpoints' ids (added_tokens.json)."""

    name: str
    model_class: str  # the class a backend loads: the model, or the Omni thinker
    full_class: str | None  # the full Omni class (thinker, talker, vocoder), None where there is none
    processor_class: str
    chat_template: str
    special_tokens: dict[str, int]  # token → real id, in added-token order
    named_tokens: dict[str, str] = field(default_factory=dict)  # extra_special_tokens: attribute → token
    audio_placeholder: str = ""  # what the chat template puts per audio part
    audio_token: str = ""  # the token the processor repeats once per audio frame group
    chunk_length: int = 30  # WhisperFeatureExtractor window in seconds (preprocessor_config.json)
    image_patch_size: int = 14


# Ids: Qwen2 vocabulary's added tokens (<|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645) and each
# checkpoint's audio/vision tokens, as in its added_tokens.json and the config ids below.
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
)
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
)
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
)
FAMILY_SPECS: dict[str, Family] = {f.name: f for f in (QWEN2_AUDIO, QWEN2_5_OMNI, QWEN3_OMNI)}


def family(name: str) -> Family:
    try:
        return FAMILY_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r} (known: {', '.join(FAMILIES)})") from None


# --------------------------------------------------------------------------- configurations


def tiny_config(spec: Family, ids: dict[str, int], vocab: int, user_id: int) -> dict[str, Any]:
    """config.json content of the tiny model (the thinker's, for the Omni families)."""
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    if spec.name == "qwen2-audio":
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
    if spec.name == "qwen2.5-omni":
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


def tiny_omni_config(spec: Family, thinker: dict[str, Any], ids: dict[str, int]) -> dict[str, Any]:
    """The full Omni config.json around a tiny thinker: tiny talker and vocoder, real-layout keys."""
    thinker = copy.deepcopy(thinker)
    hidden = thinker["text_config"]["hidden_size"]
    if spec.name == "qwen2.5-omni":
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


# Full-size configurations. Qwen2-Audio-7B: config.json of Qwen/Qwen2-Audio-7B(-Instruct) (text_config: Qwen2
# 4096 hidden, 32 layers, 32 heads (MHA), intermediate 11008, vocab 156032, 8192 positions, rms eps 1e-5; Whisper
# large-v3-sized encoder: 32 layers, d_model 1280, 20 heads, ffn 5120); as quoted in vLLM/transformers test
# fixtures of the checkpoint. Qwen2.5-Omni-7B thinker: Qwen/Qwen2.5-Omni-7B config.json thinker_config (text
# 3584 hidden, 28 layers, 28 heads / 4 KV, intermediate 18944, vocab 152064, 32768 positions, rope theta 1e6,
# mrope_section [16, 24, 24]; audio encoder 32 x 1280, n_window 100, output_dim 3584; vision 32 x 1280, out 3584).
# Qwen3-Omni-30B-A3B thinker: Qwen/Qwen3-Omni-30B-A3B-Instruct config.json thinker_config, from a dump of the
# loaded config (text: 48 layers, hidden 2048, 32 heads / 4 KV of head_dim 128, 128 experts, 8 active, moe
# intermediate 768, vocab 152064, 65536 positions, mrope [24, 20, 20] interleaved; audio encoder 32 x 1280,
# n_window 50, n_window_infer 800, downsample_hidden_size 480, output_dim 2048; vision 27 x 1152, out 2048).
def full_config(spec: Family, num_layers: int | None) -> dict[str, Any]:
    if spec.name == "qwen2-audio":
        cfg = {
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
    elif spec.name == "qwen2.5-omni":
        cfg = {
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
    else:
        cfg = {
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
    if num_layers is not None:
        cfg["text_config"]["num_hidden_layers"] = num_layers
        cfg["audio_config"]["encoder_layers"] = num_layers
        if "vision_config" in cfg:
            vision = cfg["vision_config"]
            vision["depth"] = num_layers
            if "fullatt_block_indexes" in vision:
                vision["fullatt_block_indexes"] = [num_layers - 1]
            if "deepstack_visual_indexes" in vision:
                vision["deepstack_visual_indexes"] = list(range(min(num_layers, 3)))
    return cfg


def with_head_dim(thinker: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """The tiny thinker with attention heads of ``head_dim`` (vLLM's CPU attention takes 64 and up): the
    text model widens to heads x head_dim, M-RoPE sections and the encoders' outputs follow."""
    thinker = copy.deepcopy(thinker)
    text = thinker["text_config"]
    hidden = text["num_attention_heads"] * head_dim
    old_head_dim = text.get("head_dim", text["hidden_size"] // text["num_attention_heads"])
    text.update(hidden_size=hidden, intermediate_size=2 * hidden)
    if "head_dim" in text:
        text["head_dim"] = head_dim
    rope = text.get("rope_parameters") or {}
    if "mrope_section" in rope:
        rope["mrope_section"] = [n * head_dim // old_head_dim for n in rope["mrope_section"]]
    if "output_dim" in thinker["audio_config"]:
        thinker["audio_config"]["output_dim"] = hidden
    if "vision_config" in thinker:
        thinker["vision_config"]["out_hidden_size"] = hidden
    return thinker
