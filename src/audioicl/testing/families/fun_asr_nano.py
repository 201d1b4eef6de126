"""Fun-ASR-Nano (``FunAudioLLM/Fun-ASR-Nano-2512``): a tiny checkpoint and the full-size model.

The real checkpoint, as transformers' ``convert_fun_asr_nano_to_hf.py`` writes it: ``FunAsrNanoProcessor``
(``FunAsrNanoFeatureExtractor(return_attention_mask=True)``, the Qwen3-0.6B tokenizer left-padded, audio token
``<|object_ref_start|>`` 151646), ``CHAT_TEMPLATE`` below, the Qwen3-0.6B text model, the SAN-M audio encoder
and the audio adaptor.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TORCHAUDIO, TinyFamily, register, unavailable
from .audioflamingo3 import CHATML_IDS, chatml_tokenizer, depth, generation_config, save

# The processor chat template of the converted checkpoint, verbatim from transformers'
# src/transformers/models/fun_asr_nano/convert_fun_asr_nano_to_hf.py (CHAT_TEMPLATE): a user message with audio
# becomes the checkpoint's transcription prompt, its text parts the "context" lines, then one placeholder a clip.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}"
    "{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% set audio_items = message['content'] | selectattr('type', 'equalto', 'audio') | list %}"
    "{% if message['role'] == 'user' and audio_items %}"
    "{% set text_items = message['content'] | selectattr('type', 'equalto', 'text') | list %}"
    "{% set keyword_items = message['content'] | selectattr('type', 'equalto', 'keywords') | list %}"
    "{% set language_items = message['content'] | selectattr('type', 'equalto', 'language') | list %}"
    "{% if text_items or keyword_items %}"
    "请结合上下文信息，更加准确地完成语音转写任务。如果没有相关信息，我们会留空。\n\n\n"
    "**上下文信息：**\n\n\n"
    "{% for item in text_items %}{{ item['text'] }}\n{% endfor %}"
    "{% set keyword_namespace = namespace(items=[]) %}"
    "{% for item in keyword_items %}"
    "{% set keyword_namespace.items = keyword_namespace.items + item['keywords'] %}"
    "{% endfor %}"
    "{% if keyword_namespace.items %}"
    "热词列表：[{{ keyword_namespace.items | join(', ') }}]\n"
    "{% endif %}"
    "{% endif %}"
    "语音转写{% if language_items %}成{{ language_items[0]['language'] }}{% endif %}："
    "{% for content in audio_items %}<|object_ref_start|>{% endfor %}"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'audio' %}"
    "<|object_ref_start|>"
    "{% elif content['type'] == 'text' %}"
    "{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}"
    "<|im_start|>assistant\n"
    "{% endif %}"
)

FUN_ASR_TOKENS = {**CHATML_IDS, "<|object_ref_start|>": 151646}  # audio_token_id 151646 (FunAsrNanoConfig)
QWEN3_VOCAB = 151936  # Qwen3-0.6B vocab_size

TINY_ENCODER = {
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_timestamp_prediction_layers": 1,
}
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
}
TINY_ADAPTOR = {"num_attention_heads": 2, "num_hidden_layers": 2, "projector_hidden_size": 32}


def _processor(real_ids: bool):
    from transformers import FunAsrNanoFeatureExtractor, FunAsrNanoProcessor

    tokenizer = chatml_tokenizer(FUN_ASR_TOKENS, real_ids=real_ids)
    tokenizer.padding_side = "left"  # convert_fun_asr_nano_to_hf.py: AutoTokenizer(..., padding_side="left")
    return FunAsrNanoProcessor(
        FunAsrNanoFeatureExtractor(return_attention_mask=True), tokenizer, chat_template=CHAT_TEMPLATE
    )


def _model_config(
    tokenizer, vocab: int, encoder: dict[str, Any], text: dict[str, Any], adaptor: dict[str, Any]
) -> dict[str, Any]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in FUN_ASR_TOKENS}
    width = text["hidden_size"]
    return {
        "model_type": "fun_asr_nano",
        "architectures": ["FunAsrNanoForConditionalGeneration"],
        "audio_token_id": ids["<|object_ref_start|>"],
        "audio_config": {
            "model_type": "fun_asr_nano_encoder",
            "hidden_dropout": 0.0,
            "attention_dropout": 0.0,
            **encoder,
        },
        # FunAsrNanoConfig.validate_architecture: the adaptor is as wide as the text model, its FFN a quarter.
        "adaptor_config": {**adaptor, "hidden_size": width, "intermediate_size": width // 4},
        "text_config": {
            "model_type": "qwen3",
            "vocab_size": vocab,
            "bos_token_id": ids["<|endoftext|>"],
            "eos_token_id": ids["<|im_end|>"],
            "tie_word_embeddings": True,
            **text,
        },
    }


def _generation(tokenizer):
    # Qwen3-0.6B's generation roles: eos <|im_end|>, pad <|endoftext|>, bos <|endoftext|>.
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")}
    return generation_config(ids["<|im_end|>"], ids["<|endoftext|>"], bos=ids["<|endoftext|>"])


def write(out_dir: Path, seed: int) -> Path:
    from transformers import FunAsrNanoForConditionalGeneration

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    config = _config(_model_config(tokenizer, len(tokenizer), TINY_ENCODER, TINY_TEXT, TINY_ADAPTOR))
    model = _seeded_model(FunAsrNanoForConditionalGeneration, config, seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


# FunAudioLLM/Fun-ASR-Nano-2512: Qwen3-0.6B (FunAsrNanoConfig's text_config defaults: 1024 wide, 28 layers, 16
# heads, 8 KV heads, 40960 positions; head_dim 128, rope_theta 1e6 as Qwen3-0.6B's config.json), the SAN-M encoder
# and the adaptor (FunAsrNanoEncoderConfig / FunAsrNanoAdaptorConfig defaults: 512 wide, 4 heads, 2048 FFN, 70
# layers, 20 timestamp layers; adaptor 2 layers, 8 heads, projector 2048).
FULL_TEXT = {
    "hidden_size": 1024,
    "intermediate_size": 3072,
    "num_hidden_layers": 28,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000.0,
}
FULL_ENCODER = {
    "hidden_size": 512,
    "num_attention_heads": 4,
    "intermediate_size": 2048,
    "num_hidden_layers": 70,
    "num_timestamp_prediction_layers": 20,
}
FULL_ADAPTOR = {"num_attention_heads": 8, "num_hidden_layers": 2, "projector_hidden_size": 2048}


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import FunAsrNanoForConditionalGeneration

    processor = _processor(real_ids=True)
    tokenizer = processor.tokenizer
    encoder = depth(FULL_ENCODER, num_layers)
    data = _model_config(tokenizer, QWEN3_VOCAB, encoder, depth(FULL_TEXT, num_layers), FULL_ADAPTOR)
    model = _seeded_model(
        FunAsrNanoForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(tokenizer)
    return model, processor


# FunAsrNanoFeatureExtractor needs torchaudio (its Kaldi fbank), which the ``hf`` extra does not install: without
# it the checkpoint cannot be written, and the family's tests are left out rather than breaking every family's.
if find_spec("torchaudio") is not None:
    register(
        TinyFamily(
            name="fun_asr_nano",
            write=write,
            full_size=full_size,
            template_source="transformers convert_fun_asr_nano_to_hf.py CHAT_TEMPLATE (the script that wrote the hub "
            "processor)",
        )
    )
else:
    unavailable("fun_asr_nano", TORCHAUDIO)
