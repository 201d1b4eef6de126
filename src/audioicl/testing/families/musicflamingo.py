"""Music Flamingo (``nvidia/music-flamingo-2601-hf``): a tiny checkpoint and the full-size model.

As transformers' ``convert_musicflamingo_to_hf.py`` writes it: ``MusicFlamingoProcessor`` (the AF3 feature
extractor, ``max_audio_len`` 1200, ``<sound>`` 151669 wrapped in ``<|sound_bos|>`` 151670 and ``<|sound_eos|>``
151671), the AF3 chat template with Music Flamingo's default system prompt, the AF3 model sizes and the rotary
time embedding over 1200 s (``MusicFlamingoConfig`` defaults).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import (
    AF3_TEMPLATE,
    AF3_TOKENS,
    AF3_VOCAB,
    FULL_ENCODER,
    FULL_TEXT,
    TINY_ENCODER,
    chatml_tokenizer,
    depth,
    generation_config,
    qwen2_text,
    save,
    whisper_features,
)

# The default system prompt of convert_musicflamingo_to_hf.py (write_processor), verbatim, typos included.
SYSTEM_PROMPT = (
    "You are Music Flamingo, a multimodal assistant for language and music. "
    "On each turn you receive an audio clip which contains music and optional text, "
    "you will receive at least one or both; use your world knowledge and reasoning "
    "to help the user with any task. Interpret the entirety of the content any input music"
    "--regardlenss of whether the user calls it audio, music, or sound."
)
# The processor chat template of the script: the AF3 one with this system prompt as the default.
MF_TEMPLATE = AF3_TEMPLATE.replace("You are a helpful assistant.", SYSTEM_PROMPT, 1)
MF_TOKENS = {**AF3_TOKENS, "<|sound_bos|>": 151670, "<|sound_eos|>": 151671}


def _processor(real_ids: bool):
    from transformers import MusicFlamingoProcessor

    tokenizer = chatml_tokenizer(MF_TOKENS, real_ids=real_ids)
    return MusicFlamingoProcessor(whisper_features(), tokenizer, chat_template=MF_TEMPLATE)


def _model_config(tokenizer, vocab: int, encoder: dict[str, Any], text: dict[str, Any]) -> dict[str, Any]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in MF_TOKENS}
    return {
        "model_type": "musicflamingo",
        "architectures": ["MusicFlamingoForConditionalGeneration"],
        "audio_token_id": ids["<sound>"],
        "audio_bos_token_id": ids["<|sound_bos|>"],
        "audio_eos_token_id": ids["<|sound_eos|>"],
        "audio_config": {"model_type": "audioflamingo3_encoder", "num_mel_bins": 128, **encoder},
        "text_config": qwen2_text(vocab, ids["<|im_end|>"], ids["<|endoftext|>"], **text),
    }


def _generation(tokenizer):
    return generation_config(
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
        tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        max_new_tokens=2048,
    )


def write(out_dir: Path, seed: int) -> Path:
    from transformers import MusicFlamingoForConditionalGeneration

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    config = _config(_model_config(tokenizer, len(tokenizer), TINY_ENCODER, {}))
    model = _seeded_model(MusicFlamingoForConditionalGeneration, config, seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    """The AF3 sizes (convert_musicflamingo_to_hf.py: the same Qwen2Config and encoder) with the rotary time
    embedding."""
    import torch
    from transformers import MusicFlamingoForConditionalGeneration

    processor = _processor(real_ids=True)
    tokenizer = processor.tokenizer
    data = _model_config(tokenizer, AF3_VOCAB, depth(FULL_ENCODER, num_layers), depth(FULL_TEXT, num_layers))
    model = _seeded_model(
        MusicFlamingoForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(tokenizer)
    return model, processor


register(
    TinyFamily(
        name="musicflamingo",
        write=write,
        full_size=full_size,
        template_source="transformers convert_musicflamingo_to_hf.py (the script that wrote the hub processor)",
    )
)
