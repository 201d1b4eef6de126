"""GLM-ASR (``zai-org/GLM-ASR-Nano-2512``): a tiny checkpoint and the full-size model.

The real checkpoint, as transformers' ``convert_glmasr_to_hf.py`` writes it: ``GlmAsrProcessor``
(``WhisperFeatureExtractor(feature_size=128)``, the GLM tokenizer loaded as ``TokenizersBackend`` with its pad set
to its eos ``<|endoftext|>``, audio token ``<|pad|>``), ``GLMASR_TEMPLATE`` below, a Llama text model (vocab 59264)
and the GLM-ASR Whisper-style encoder with partial rotary positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.templates import make_tokenizer
from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, generation_config, save, whisper_features

# The processor chat template of the converted checkpoint, verbatim from transformers'
# src/transformers/models/glmasr/convert_glmasr_to_hf.py (chat_template, passed to GlmAsrProcessor). A clip is
# written as <|begin_of_audio|><|pad|><|end_of_audio|> and followed by a new <|user|> line; vLLM's test prompt
# for the checkpoint ("<|user|>\n<|begin_of_audio|><|pad|><|end_of_audio|><|user|>\nPlease transcribe this audio
# into text<|assistant|>\n") is this template's rendering of a clip then its instruction.
GLMASR_TEMPLATE = """{%- macro to_text(content) -%}
{%- if content is string -%}
{{- content -}}
{%- elif content is iterable and content is not mapping -%}
{%- for item in content -%}
{%- if item is mapping and item.type == 'text' and item.text is defined -%}
{{- item.text -}}
{%- elif item is mapping and (item.type == 'audio' or 'audio' in item) -%}
<|begin_of_audio|><|pad|><|end_of_audio|><|user|>
{% elif item is string -%}
{{- item -}}
{%- endif -%}
{%- endfor -%}
{%- else -%}
{{- content -}}
{%- endif -%}
{%- endmacro -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}
<|system|>
{{ to_text(m.content) | trim }}
{%- elif m.role == 'user' -%}
<|user|>
{{ to_text(m.content) | trim }}
{%- elif m.role == 'assistant' -%}
<|assistant|>
{{ to_text(m.content) | trim }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|assistant|>
{% endif -%}"""

# GLM's special tokens from <|endoftext|> at 59246, in GLM-4's order: text_config.eos_token_id [59246, 59253,
# 59255] are <|endoftext|>, <|user|>, <|observation|> and audio_token_id 59260 is <|pad|> (GlmAsrConfig).
# <|begin_of_audio|> and <|end_of_audio|> follow <|pad|>: their ids are inferred, not read from the hub file.
GLM_SPECIALS = (
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|pad|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
)
GLM_TOKENS = {token: 59246 + i for i, token in enumerate(GLM_SPECIALS)}
GLM_VOCAB = 59264  # GlmAsrConfig text_config vocab_size
STOP = ("<|endoftext|>", "<|user|>", "<|observation|>")

TINY_ENCODER = {"num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64, "hidden_size": 32}
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


def _tokenizer(real_ids: bool):
    """The tiny BPE with GLM's special tokens, as the ``TokenizersBackend`` the real checkpoint loads as (eos and
    pad ``<|endoftext|>``)."""
    from transformers import TokenizersBackend

    bpe = make_tokenizer(GLM_TOKENS, {}, real_ids=real_ids)
    tokenizer = TokenizersBackend(
        tokenizer_object=bpe.backend_tokenizer,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        model_max_length=8192,
    )
    return tokenizer


def _processor(real_ids: bool):
    from transformers import GlmAsrProcessor

    return GlmAsrProcessor(whisper_features(), _tokenizer(real_ids), chat_template=GLMASR_TEMPLATE)


def _model_config(tokenizer, vocab: int, encoder: dict[str, Any], text: dict[str, Any]) -> dict[str, Any]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in GLM_SPECIALS}
    return {
        "model_type": "glmasr",
        "architectures": ["GlmAsrForConditionalGeneration"],
        "audio_token_id": ids["<|pad|>"],
        "audio_config": {"model_type": "glmasr_encoder", "num_mel_bins": 128, **encoder},
        "text_config": {
            "model_type": "llama",
            "vocab_size": vocab,
            "eos_token_id": [ids[t] for t in STOP],
            "pad_token_id": ids["<|endoftext|>"],
            "max_position_embeddings": 8192,
            "rms_norm_eps": 1e-05,
            **text,
        },
    }


def _generation(tokenizer):
    # GlmAsrConfig: eos <|endoftext|>, <|user|>, <|observation|>; convert_glmasr_to_hf.py: pad = eos.
    ids = [tokenizer.convert_tokens_to_ids(t) for t in STOP]
    return generation_config(ids, ids[0])


def write(out_dir: Path, seed: int) -> Path:
    from transformers import GlmAsrForConditionalGeneration

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    config = _config(_model_config(tokenizer, len(tokenizer), TINY_ENCODER, TINY_TEXT))
    model = _seeded_model(GlmAsrForConditionalGeneration, config, seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


# zai-org/GLM-ASR-Nano-2512: GlmAsrConfig's defaults are the checkpoint's (the conversion builds GlmAsrConfig()):
# a Llama text model 2048 wide, 28 layers, 16 heads, 4 KV heads, 6144 FFN, 8192 positions, rope_theta 1e4, and the
# GlmAsrEncoderConfig defaults (Whisper-large size: 32 layers, 20 heads, 1280 wide, 5120 FFN).
FULL_TEXT = {
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
}
FULL_ENCODER = {
    "num_hidden_layers": 32,
    "num_attention_heads": 20,
    "intermediate_size": 5120,
    "hidden_size": 1280,
}


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import GlmAsrForConditionalGeneration

    processor = _processor(real_ids=True)
    tokenizer = processor.tokenizer
    data = _model_config(tokenizer, GLM_VOCAB, depth(FULL_ENCODER, num_layers), depth(FULL_TEXT, num_layers))
    model = _seeded_model(
        GlmAsrForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(tokenizer)
    return model, processor


register(
    TinyFamily(
        name="glmasr",
        write=write,
        full_size=full_size,
        template_source="transformers convert_glmasr_to_hf.py chat_template (the script that wrote the hub "
        "processor); matches vLLM's test prompt for the checkpoint",
    )
)
