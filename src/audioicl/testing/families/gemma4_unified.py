"""Gemma 4 Unified (``Gemma4UnifiedForConditionalGeneration``, ``google/gemma-4-12B-it``): tiny and full size.

The unified Gemma 4 has no audio encoder: ``Gemma4UnifiedAudioFeatureExtractor`` cuts the 16 kHz waveform into
640-sample frames (40 ms, the last zero-padded), each frame is one ``<|audio|>`` soft token (RMSNorm then a
linear projection, ``Gemma4UnifiedMultimodalEmbedder``), wrapped in ``<|audio>`` ... ``<audio|>`` by the processor.
The tokenizer, its named tokens and the chat template are Gemma 4's (``testing/families/gemma4.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, save
from .gemma3n import TEXT_VOCAB, TINY_TEXT_VOCAB, gemma_tokenizer, relocate
from .gemma4 import GEMMA4_IDS, GEMMA4_NAMED, GEMMA4_TEMPLATE, ROPE
from .gemma4 import _generation as gemma4_generation


def _processor(ids: dict[str, int]):
    from transformers import (
        Gemma4UnifiedAudioFeatureExtractor,
        Gemma4UnifiedImageProcessor,
        Gemma4UnifiedProcessor,
        Gemma4UnifiedVideoProcessor,
    )

    tokenizer = gemma_tokenizer(ids, GEMMA4_NAMED, add_bos_token=False, padding_side="left")
    return Gemma4UnifiedProcessor(
        feature_extractor=Gemma4UnifiedAudioFeatureExtractor(),  # 640 samples a token (the class defaults)
        image_processor=Gemma4UnifiedImageProcessor(),
        tokenizer=tokenizer,
        video_processor=Gemma4UnifiedVideoProcessor(),
        chat_template=GEMMA4_TEMPLATE,
    )


TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "layer_types": ["sliding_attention", "full_attention"],
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "global_head_dim": 64,
}
TINY_VISION = {"mm_embed_dim": 32, "mm_posemb_size": 64, "output_proj_dims": 64}

# google/gemma-4-12B-it, as Gemma4UnifiedTextConfig's defaults (its auto_docstring checkpoint): 30 layers of
# hidden 2304 (5 sliding : 1 full), 8 heads, 4 KV heads, head_dim 256, 262,144 positions; the vision embedder
# (Gemma4UnifiedVisionConfig defaults: 3840 wide) and the 640-sample audio embedder (Gemma4UnifiedAudioConfig).
FULL_TEXT = {
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 30,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 5,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
}


def _model_config(ids: dict[str, int], vocab: int, text: dict, vision: dict) -> dict:
    return {
        "model_type": "gemma4_unified",
        "architectures": ["Gemma4UnifiedForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma4_unified_text",
            "vocab_size": vocab,
            "final_logit_softcapping": 30.0,
            "rope_parameters": ROPE,
            **text,
        },
        "audio_config": {"model_type": "gemma4_unified_audio", "audio_embed_dim": 640},
        "vision_config": {"model_type": "gemma4_unified_vision", **vision},
        "boi_token_id": ids["<|image>"],
        "eoi_token_id": ids["<image|>"],
        "image_token_id": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "boa_token_id": ids["<|audio>"],
        "eoa_token_index": ids["<audio|>"],
        "audio_token_id": ids["<|audio|>"],
        "eos_token_id": [1, ids["<turn|>"]],
    }


def write(out_dir: Path, seed: int) -> Path:
    from transformers import Gemma4UnifiedForConditionalGeneration

    ids = relocate(GEMMA4_IDS, TINY_TEXT_VOCAB)
    data = _model_config(ids, TINY_TEXT_VOCAB, TINY_TEXT, TINY_VISION)
    model = _seeded_model(Gemma4UnifiedForConditionalGeneration, _config(data), seed)
    return save(Path(out_dir), model, _processor(ids), gemma4_generation(ids))


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import Gemma4UnifiedForConditionalGeneration

    text = depth(FULL_TEXT, num_layers)
    if num_layers is not None:  # the real pattern cut to length, the last layer full
        text = {**text, "layer_types": [*FULL_TEXT["layer_types"][: num_layers - 1], "full_attention"]}
    data = _model_config(GEMMA4_IDS, TEXT_VOCAB, text, {})
    model = _seeded_model(
        Gemma4UnifiedForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = gemma4_generation(GEMMA4_IDS)
    return model, _processor(GEMMA4_IDS)


register(
    TinyFamily(
        name="gemma4_unified",
        write=write,
        full_size=full_size,
        template_source="google/gemma-4-E4B-it chat_template.jinja (testing/families/gemma4.py); that the unified "
        "checkpoint ships the same Gemma 4 template was not verified (its hub files were not found)",
    )
)
