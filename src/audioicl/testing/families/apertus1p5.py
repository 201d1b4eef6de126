"""Apertus 1.5 (``swiss-ai/Apertus-v1.5-8B``): a tiny checkpoint and the full-size model.

The real checkpoint, as transformers' ``convert_apertus1p5_weights_to_hf.py`` assembles it: ``Apertus1p5Processor``
with ``Apertus1p5ImageProcessor``, ``WavTokenizerFeatureExtractor(sampling_rate=24000, hop_length=600)`` and the
backbone's tokenizer taken as it is (left padding, the named media tokens ``image_token``, ``audio_token``,
``boi_token`` ... ``eoa_token`` in its ``extra_special_tokens``, the chat template of ``apertus-omni-tokenizer``);
``Apertus1p5Config`` with an Apertus text model whose input vocabulary holds the text tokens, 131,072 visual and
4,096 audio codes at fixed offsets, a pruned (text-only) LM head, the EMU3.5 vision tokenizer and the WavTokenizer
encoder (both kept in fp32). Audio is discrete: each clip is tokenized alone, one code per 600 samples at 24 kHz
(40 a second), each code embedded by the text embedding table, the clip wrapped in ``boa`` / ``eoa``.

Not available offline, so RECONSTRUCTED (docs/models.md says so): the hub tokenizer's chat template (below) and the
names of the media tokens (their ids, 131079 and 131085 for the image and audio placeholders, are the config's).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.templates import make_tokenizer
from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, generation_config, save

# swiss-ai/Apertus-8B-Instruct-2509's chat template, its plain-message path as a public copy prints it (a system
# turn, the developer turn that disables deliberation and tools, user and assistant turns between their start and
# end tokens, the generation prompt <|assistant_start|>), with the content-parts branch the 1.5 tokenizer adds
# (the converter warns where a template lacks one): text parts verbatim, an audio part as the processor's placeholder, which it expands to boa + one <|audio|> per
# code + eoa. With no system message the real template writes a default one holding today's date; the benchmark
# always sends its own.
APERTUS_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- elif content is not mapping -%}"
    "{%- for part in content -%}"
    "{%- if part.type == 'text' -%}{{- part.text -}}"
    "{%- elif part.type == 'audio' -%}{{- '<|audio|>' -}}"
    "{%- elif part.type == 'image' -%}{{- '<|image|>' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}"
    "{{- bos_token -}}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{%- set message = messages[0] -%}"
    "{{- '<|system_start|>' + render(message.content) + '<|system_end|>' -}}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{{- '<|system_start|>You are Apertus, a helpful assistant created by the SwissAI initiative.\\n"
    "Knowledge cutoff: 2024-04\\nCurrent date: ' + strftime_now('%Y-%m-%d') + '<|system_end|>' -}}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{{- '<|developer_start|>Deliberation: disabled\\nTool Capabilities: disabled<|developer_end|>' -}}"
    "{%- for message in loop_messages -%}"
    "{%- if message.role == 'user' -%}"
    "{{- '<|user_start|>' + render(message.content) + '<|user_end|>' -}}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|assistant_start|>' + render(message.content) + '<|assistant_end|>' -}}"
    "{%- else -%}"
    "{{- raise_exception('Invalid message role: ' + message.role) -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|assistant_start|>' -}}{%- endif -%}"
)

# Apertus' special tokens. The real ids (<s> 1, </s> 2, <pad> 3, the control tokens 61-72 as in
# Apertus-8B-Instruct-2509, the media tokens above the 131,072 text ids: Apertus1p5Config's image_token_id 131079
# and audio_token_id 131085) fall among the tiny BPE's learned ones, so both builders put them after those: the
# configs take every id from the tokenizer.
TEXT_SPECIALS = ("<s>", "</s>", "<pad>")
CONTROLS = (
    "<|system_start|>",
    "<|system_end|>",
    "<|developer_start|>",
    "<|developer_end|>",
    "<|user_start|>",
    "<|user_end|>",
    "<|assistant_start|>",
    "<|assistant_end|>",
    "<|inner_prefix|>",
    "<|inner_suffix|>",
    "<|tools_prefix|>",
    "<|tools_suffix|>",
)
MEDIA = {  # the processor's named attributes → token; ids from 131073 so that <|image|> / <|audio|> fall on the config's
    "boi_token": "<|image start|>",
    "eoi_token": "<|image end|>",
    "image_wrapper_token": "<|image token|>",
    "eol_token": "<|image eol|>",
    "boa_token": "<|audio start|>",
    "eoa_token": "<|audio end|>",
    "image_token": "<|image|>",
    "audio_token": "<|audio|>",
}
TOKENS = (*TEXT_SPECIALS, *CONTROLS, *MEDIA.values())
TEXT_VOCAB = 131072  # the text ids, and the pruned LM head's rows
FULL_VOCAB = 266752  # Apertus1p5TextConfig.vocab_size
STOP = ("</s>", "<|assistant_end|>")

TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
# The real hop (600 samples a code, from the stride product of 6, 5, 5, 4), small widths and a small codebook.
TINY_AUDIO = {
    "num_filters": 4,
    "hidden_size": 16,
    "codebook_dim": 16,
    "codebook_size": 32,
    "num_lstm_layers": 1,
}
# The EMU3.5 encoder at its smallest: its GroupNorms take 32 groups, so 32 channels.
TINY_VISION = {
    "codebook_size": 16,
    "embed_dim": 8,
    "latent_channels": 32,
    "base_channels": 32,
    "channel_multiplier": [1, 1],
    "num_res_blocks": 1,
    "attn_resolutions": [],
    "resolution": 32,
}


def _tokenizer():
    """Apertus' special tokens over the tiny BPE, as the ``TokenizersBackend`` the hub tokenizer loads as: bos
    ``<s>``, eos ``</s>``, pad ``<pad>``, left padding, the named media tokens."""
    from transformers import TokenizersBackend

    bpe = make_tokenizer({t: i for i, t in enumerate(TOKENS)}, {}, real_ids=False)
    return TokenizersBackend(
        tokenizer_object=bpe.backend_tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        padding_side="left",
        model_max_length=65536,
        extra_special_tokens=dict(MEDIA),
    )


def _processor():
    from transformers import Apertus1p5ImageProcessor, Apertus1p5Processor, WavTokenizerFeatureExtractor

    return Apertus1p5Processor(
        image_processor=Apertus1p5ImageProcessor(),
        feature_extractor=WavTokenizerFeatureExtractor(sampling_rate=24000, hop_length=600),
        tokenizer=_tokenizer(),
        chat_template=APERTUS_TEMPLATE,
    )


def _model_config(
    tokenizer, text_vocab: int, vocab: int, text: dict, audio: dict, vision: dict
) -> dict[str, Any]:
    """The composite config. The input vocabulary, as the real one lays it out: the ``text_vocab`` text ids (the
    pruned LM head's rows), 200 reserved ids holding the media tokens, the visual codes, the audio codes, padding
    to ``vocab``."""
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in TOKENS}
    image_offset = text_vocab + 200
    audio_offset = image_offset + vision.get("codebook_size", 131072)
    return {
        "model_type": "apertus1p5",
        "architectures": ["Apertus1p5ForConditionalGeneration"],
        "image_token_id": ids["<|image|>"],
        "audio_token_id": ids["<|audio|>"],
        "image_token_offset": image_offset,
        "audio_token_offset": audio_offset,
        "text_config": {
            "model_type": "apertus1p5_text",
            "vocab_size": max(vocab, audio_offset + audio.get("codebook_size", 4096)),
            "output_vocab_size": text_vocab,
            "bos_token_id": ids["<s>"],
            "eos_token_id": ids["</s>"],
            "pad_token_id": ids["<pad>"],
            **text,
        },
        "audio_config": {"model_type": "wavtokenizer_encoder", **audio},
        "vision_config": {"model_type": "apertus1p5_vision_tokenizer", **vision},
    }


def _generation(tokenizer):
    ids = [tokenizer.convert_tokens_to_ids(t) for t in STOP]
    return generation_config(
        ids, tokenizer.convert_tokens_to_ids("<pad>"), tokenizer.convert_tokens_to_ids("<s>")
    )


def write(out_dir: Path, seed: int) -> Path:
    from transformers import Apertus1p5ForConditionalGeneration

    processor = _processor()
    tokenizer = processor.tokenizer
    # the generated ids stop below the media tokens, as the real pruned head's stop below 131,072
    text_vocab = min(tokenizer.convert_tokens_to_ids(t) for t in MEDIA.values())
    data = _model_config(tokenizer, text_vocab, 0, TINY_TEXT, TINY_AUDIO, TINY_VISION)
    model = _seeded_model(Apertus1p5ForConditionalGeneration, _config(data), seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


# swiss-ai/Apertus-v1.5-8B: the Apertus1p5Config defaults are the released values (an 8B Apertus text model 4096
# wide, 32 layers, 32 heads over 8 KV heads, 21,504 xIELU MLP, 65,536 positions, llama3 RoPE at 12e6, QK norms;
# the EMU3.5 vision tokenizer and WavTokenizer-large-unify-40token as their configs' defaults).
FULL_TEXT = {
    "hidden_size": 4096,
    "intermediate_size": 21504,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
}


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import Apertus1p5ForConditionalGeneration

    processor = _processor()
    tokenizer = processor.tokenizer
    data = _model_config(tokenizer, TEXT_VOCAB, FULL_VOCAB, depth(FULL_TEXT, num_layers), {}, {})
    model = _seeded_model(
        Apertus1p5ForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(tokenizer)
    return model, processor


register(
    TinyFamily(
        name="apertus1p5",
        write=write,
        full_size=full_size,
        template_source="RECONSTRUCTED: swiss-ai/Apertus-8B-Instruct-2509's chat template (its plain-message path as "
        "a public copy prints it) with a content-parts branch writing an audio part as <|audio|>; the 1.5 "
        "tokenizer's own template is on the hub only",
    )
)
