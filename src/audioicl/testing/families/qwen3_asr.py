"""Qwen3-ASR (``Qwen/Qwen3-ASR-1.7B``): a tiny checkpoint and the full-size model.

The real checkpoint, as transformers' ``convert_qwen3_asr_to_hf.py`` writes it: ``Qwen3ASRProcessor``
(``Qwen3ASRFeatureExtractor()`` with its defaults, the Qwen3 tokenizer whose ``audio_token`` /
``audio_bos_token`` / ``audio_eos_token`` are ``<|audio_pad|>`` / ``<|audio_start|>`` / ``<|audio_end|>``),
``ASR_CHAT_TEMPLATE`` below, a Qwen3 text model and the Qwen3-ASR audio encoder, and the generation config
eos (151643, 151645), pad 151645.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import CHATML_IDS, chatml_tokenizer, depth, generation_config, save

# The processor chat template of the converted checkpoint, verbatim from transformers'
# src/transformers/models/qwen3_asr/convert_qwen3_asr_to_hf.py (ASR_CHAT_TEMPLATE, passed to write_processor):
# the text of every system message, then one user turn holding only the audio placeholders (a user message's
# text is not rendered), then the assistant turns.
ASR_CHAT_TEMPLATE = (
    "{%- set ns = namespace(system_text='') -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' -%}"
    "{%- if m.content is string -%}"
    "{%- set ns.system_text = ns.system_text + m.content -%}"
    "{%- else -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns.system_text = ns.system_text + c.text -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- set ns2 = namespace(audio_tokens='') -%}"
    "{%- for m in messages -%}"
    "{%- if m.content is not string -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'audio' or ('audio' in c) or ('audio_url' in c) -%}"
    "{%- set ns2.audio_tokens = ns2.audio_tokens + '<|audio_start|><|audio_pad|><|audio_end|>' -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{{- '<|im_start|>system\\n' + ns.system_text + '<|im_end|>\\n' -}}"
    "{{- '<|im_start|>user\\n' + ns2.audio_tokens + '<|im_end|>\\n' -}}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set ns3 = namespace(assistant_text='') -%}"
    "{%- if m.content is string -%}"
    "{%- set ns3.assistant_text = m.content -%}"
    "{%- else -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'text' and (c.text is defined) -%}"
    "{%- set ns3.assistant_text = ns3.assistant_text + c.text -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{% generation %}"
    "{{- ns3.assistant_text + '<|im_end|>\\n' -}}"
    "{% endgeneration %}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- endif -%}"
)

# Qwen3 vocabulary ids: <|audio_start|>/<|audio_end|> as in every Qwen3 tokenizer; audio_token_id 151676 and
# timestamp_token_id 151705 are Qwen3ASRConfig's defaults.
QWEN3_ASR_TOKENS = {
    **CHATML_IDS,
    "<|audio_start|>": 151669,
    "<|audio_end|>": 151670,
    "<|audio_pad|>": 151676,
    "<timestamp>": 151705,
}
NAMED_TOKENS = {
    "audio_token": "<|audio_pad|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
}
QWEN3_VOCAB = 151936  # Qwen3 text_config.vocab_size

TINY_ENCODER = {
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 64,
    "d_model": 32,
    "downsample_hidden_size": 16,
}
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}


def _processor(real_ids: bool):
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRProcessor

    tokenizer = chatml_tokenizer(QWEN3_ASR_TOKENS, NAMED_TOKENS, real_ids=real_ids)
    return Qwen3ASRProcessor(Qwen3ASRFeatureExtractor(), tokenizer, chat_template=ASR_CHAT_TEMPLATE)


def _model_config(tokenizer, vocab: int, encoder: dict[str, Any], text: dict[str, Any]) -> dict[str, Any]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in QWEN3_ASR_TOKENS}
    eos = [ids["<|endoftext|>"], ids["<|im_end|>"]]
    return {
        "model_type": "qwen3_asr",
        "architectures": ["Qwen3ASRForConditionalGeneration"],
        "audio_token_id": ids["<|audio_pad|>"],
        "timestamp_token_id": ids["<timestamp>"],
        "pad_token_id": ids["<|im_end|>"],
        "eos_token_id": eos,
        "audio_config": {
            "model_type": "qwen3_asr_encoder",
            **encoder,
            "output_dim": text["hidden_size"],
        },
        "text_config": {"model_type": "qwen3", "vocab_size": vocab, "tie_word_embeddings": True, **text},
    }


def _generation(tokenizer):
    # convert_qwen3_asr_to_hf.py (write_asr_model): eos (<|endoftext|>, <|im_end|>), pad <|im_end|>, greedy, 512.
    ids = [tokenizer.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")]
    return generation_config(ids, ids[1], do_sample=False, max_new_tokens=512)


def write(out_dir: Path, seed: int) -> Path:
    from transformers import Qwen3ASRForConditionalGeneration

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    config = _config(_model_config(tokenizer, len(tokenizer), TINY_ENCODER, TINY_TEXT))
    model = _seeded_model(Qwen3ASRForConditionalGeneration, config, seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


# Qwen/Qwen3-ASR-1.7B: the Qwen3-1.7B text model (Qwen3ASRConfig's text_config defaults: 2048 wide, 28 layers,
# 16 heads, 8 KV heads, head_dim 128, 65536 positions) and the audio encoder (Qwen3ASREncoderConfig defaults:
# 24 layers, 16 heads, d_model 1024, ffn 4096, downsample 480; output_dim = the text width).
FULL_TEXT = {
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 65536,
    "rope_theta": 1000000.0,
}
FULL_ENCODER = {
    "encoder_layers": 24,
    "encoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "d_model": 1024,
    "downsample_hidden_size": 480,
}


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import Qwen3ASRForConditionalGeneration

    processor = _processor(real_ids=True)
    tokenizer = processor.tokenizer
    encoder = FULL_ENCODER if num_layers is None else {**FULL_ENCODER, "encoder_layers": num_layers}
    data = _model_config(tokenizer, QWEN3_VOCAB, encoder, depth(FULL_TEXT, num_layers))
    model = _seeded_model(
        Qwen3ASRForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(tokenizer)
    return model, processor


register(
    TinyFamily(
        name="qwen3_asr",
        write=write,
        full_size=full_size,
        template_source="transformers convert_qwen3_asr_to_hf.py ASR_CHAT_TEMPLATE (the script that wrote the hub "
        "processor)",
    )
)
