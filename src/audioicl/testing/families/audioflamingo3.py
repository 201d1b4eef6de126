"""Audio Flamingo 3 (``nvidia/audio-flamingo-3-hf``): a tiny checkpoint and the full-size model.

The real checkpoint, as transformers' ``convert_audioflamingo3_to_hf.py`` writes it: ``AudioFlamingo3Processor``
(``WhisperFeatureExtractor(feature_size=128, return_attention_mask=True)``, the Qwen2.5 tokenizer with ``<sound>``
at 151669, ``max_audio_len`` 600), the processor chat template below, a Qwen2-7B text model and a 32-layer
Whisper-large encoder. The helpers here (``chatml_tokenizer``, ``qwen2_text``, ``save``) serve the other
Qwen-tokenizer families too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.templates import make_tokenizer
from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register

# The processor chat template of nvidia/audio-flamingo-3-hf, verbatim from transformers'
# src/transformers/models/audioflamingo3/convert_audioflamingo3_to_hf.py (write_processor), which wrote the hub
# files. One <sound> per message that holds audio, before the message's text, whatever the number of audio parts.
AF3_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "{% for m in messages if m['content'] is not none %}"
    "<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}"
    "{{ m['content'] }}"
    "{% else %}"
    "{% set audio = namespace(found=False) %}"
    "{% set text_buf = namespace(v='') %}"
    "{% for c in m['content'] %}"
    "{% if c.get('type') == 'audio' or 'audio' in c %}"
    "{% set audio.found = True %}"
    "{% elif c.get('type') == 'text' or 'text' in c %}"
    "{% set text_buf.v = text_buf.v + c['text'] %}"
    "{% endif %}"
    "{% endfor %}"
    "{% if audio.found %}{{ '<sound>' }}{% endif %}{{ text_buf.v }}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "<|im_start|>assistant\n"
    "{% endif %}"
)

# The Qwen2 vocabulary's own added tokens (Qwen2.5 tokenizer.json ids).
CHATML_IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
AF3_TOKENS = {**CHATML_IDS, "<sound>": 151669}  # audio_token_id 151669 (AudioFlamingo3Config default)
AF3_VOCAB = 151672  # len(tokenizer) of the real checkpoint: text_config.vocab_size

TINY_ENCODER = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64, "hidden_size": 32}


def chatml_tokenizer(
    special_tokens: dict[str, int], named_tokens: dict[str, str] | None = None, *, real_ids: bool
):
    """The tiny Qwen2 BPE with the family's special tokens (eos ``<|im_end|>``, pad ``<|endoftext|>``)."""
    return make_tokenizer(special_tokens, named_tokens or {}, real_ids=real_ids)


def qwen2_text(vocab: int, eos: int, pad: int, **real: Any) -> dict[str, Any]:
    """A Qwen2 text config: tiny unless ``real`` gives the full-size values."""
    tiny = {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
    }
    return {
        "model_type": "qwen2",
        "vocab_size": vocab,
        "eos_token_id": eos,
        "pad_token_id": pad,
        **(real or tiny),
    }


def generation_config(eos: int | list[int], pad: int, bos: int | None = None, **extra: Any):
    from transformers import GenerationConfig

    return GenerationConfig(eos_token_id=eos, pad_token_id=pad, bos_token_id=bos, **extra)


def save(out: Path, model, processor, generation) -> Path:
    """Write the model (with its generation config) and the processor to ``out``."""
    model.generation_config = generation
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def whisper_features(**settings: Any):
    """The 128-bin ``WhisperFeatureExtractor`` the Flamingo and GLM-ASR checkpoints ship (30 s windows)."""
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(feature_size=128, return_attention_mask=True, **settings)


def _processor(real_ids: bool):
    from transformers import AudioFlamingo3Processor

    tokenizer = chatml_tokenizer(AF3_TOKENS, real_ids=real_ids)
    return AudioFlamingo3Processor(whisper_features(), tokenizer, chat_template=AF3_TEMPLATE)


def _model_config(tokenizer, vocab: int, encoder: dict[str, Any], text: dict[str, Any]) -> dict[str, Any]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in AF3_TOKENS}
    return {
        "model_type": "audioflamingo3",
        "architectures": ["AudioFlamingo3ForConditionalGeneration"],
        "audio_token_id": ids["<sound>"],
        "audio_config": {"model_type": "audioflamingo3_encoder", "num_mel_bins": 128, **encoder},
        "text_config": qwen2_text(vocab, ids["<|im_end|>"], ids["<|endoftext|>"], **text),
    }


def _generation(tokenizer):
    # convert_audioflamingo3_to_hf.py: eos = the tokenizer's eos (<|im_end|>), pad <|endoftext|>, no bos.
    return generation_config(
        tokenizer.convert_tokens_to_ids("<|im_end|>"),
        tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        max_new_tokens=2048,
    )


def write(out_dir: Path, seed: int) -> Path:
    from transformers import AudioFlamingo3ForConditionalGeneration

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    config = _config(_model_config(tokenizer, len(tokenizer), TINY_ENCODER, {}))
    model = _seeded_model(AudioFlamingo3ForConditionalGeneration, config, seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


# nvidia/audio-flamingo-3-hf config.json: the Qwen2.5-7B text model (convert_audioflamingo3_to_hf.py's
# Qwen2Config) and the Whisper-large-v3 encoder (AudioFlamingo3EncoderConfig defaults: 32 layers, 20 heads, 1280).
FULL_TEXT = {
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "rope_theta": 1000000.0,
    "max_position_embeddings": 32768,
}
FULL_ENCODER = {
    "num_hidden_layers": 32,
    "num_attention_heads": 20,
    "intermediate_size": 5120,
    "hidden_size": 1280,
}


def depth(settings: dict[str, Any], num_layers: int | None) -> dict[str, Any]:
    """``settings`` with ``num_hidden_layers`` replaced where ``num_layers`` is given (tests of the full size)."""
    return settings if num_layers is None else {**settings, "num_hidden_layers": num_layers}


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import AudioFlamingo3ForConditionalGeneration

    processor = _processor(real_ids=True)
    tokenizer = processor.tokenizer
    data = _model_config(tokenizer, AF3_VOCAB, depth(FULL_ENCODER, num_layers), depth(FULL_TEXT, num_layers))
    model = _seeded_model(
        AudioFlamingo3ForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(tokenizer)
    return model, processor


register(
    TinyFamily(
        name="audioflamingo3",
        write=write,
        full_size=full_size,
        template_source="transformers convert_audioflamingo3_to_hf.py (the script that wrote the hub processor)",
    )
)
