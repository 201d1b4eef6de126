"""Phi-4-multimodal (``microsoft/Phi-4-multimodal-instruct``): a tiny checkpoint and the full-size model.

The transformers-native checkpoint, as transformers' ``convert_phi4_multimodal_weights_to_hf.py`` writes it:
``Phi4MultimodalProcessor`` (its audio feature extractor is the ``audio_processor`` attribute, a
``Phi4MultimodalFeatureExtractor`` with the remote code's settings, which are the class defaults: 80 mel bins,
16 kHz, 10 ms hop, 8x compression: 12.5 audio tokens a second; the image processor ``Phi4MultimodalImageProcessor``
with its defaults), the Phi-4-mini ``GPT2Tokenizer`` with ``extra_special_tokens`` ``image_token``
``<|endoftext10|>`` (200010) and ``audio_token`` ``<|endoftext11|>`` (200011), the chat template below, eos
``[<|endoftext|> 199999, <|end|> 200020]``. The speech LoRA the real checkpoint keeps in ``speech-lora/`` is
left out: the base model loads and runs without it (the backend does not load adapters).

The tiny tokenizer is the real ``GPT2Tokenizer`` class around the tiny byte-level BPE, the special tokens right
after the learned ones (tiny) or at the real ids (full size).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.templates import _bpe
from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, generation_config, save

# The hub's transformers-native chat template was not reachable from here. This is the closest faithful one:
# the content-parts template of transformers' own Phi-4-multimodal processor test
# (tests/models/phi4_multimodal/test_processor_phi4_multimodal.py, prepare_processor_dict), which renders every
# message as the remote-code template does ('<|' + role + '|>' + content + '<|end|>', '<|assistant|>' as the
# generation prompt), with the placeholders of the converted tokenizer (convert_phi4_multimodal_weights_to_hf.py:
# image_token <|endoftext10|>, audio_token <|endoftext11|>) in place of the test's <|image|> / <|audio|>.
PHI4_TEMPLATE = (
    "{% for message in messages %}{{ '<|' + message['role'] + '|>' }}{% if message['content'] is string %}"
    "{{ message['content'] }}{% else %}{% for content in message['content'] %}{% if content['type'] == 'image' %}"
    "{{ '<|endoftext10|>' }}{% elif content['type'] == 'audio' %}{{ '<|endoftext11|>' }}"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}"
    "{{ '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% endif %}{{ '<|end|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)

# The Phi-4-mini vocabulary's special tokens and their real ids (tokenizer.json of the checkpoint).
PHI4_IDS = {
    "<|endoftext|>": 199999,
    "<|endoftext10|>": 200010,
    "<|endoftext11|>": 200011,
    "<|assistant|>": 200019,
    "<|end|>": 200020,
    "<|user|>": 200021,
    "<|system|>": 200022,
    "<|tool|>": 200023,
    "<|/tool|>": 200024,
}
PHI4_NAMED = {"image_token": "<|endoftext10|>", "audio_token": "<|endoftext11|>"}
PHI4_VOCAB = 200064  # config.json vocab_size


def phi4_tokenizer(real_ids: bool):
    """The real ``GPT2Tokenizer`` class (eos, bos, pad and unk ``<|endoftext|>``, as Phi-4-mini's) around the tiny
    BPE, the special tokens at the real ids or right after the learned ones."""
    from tokenizers import AddedToken
    from transformers import GPT2Tokenizer

    tokens, merges = _bpe()
    vocab = {token: i for i, token in enumerate(tokens)}
    specials = PHI4_IDS if real_ids else {t: len(tokens) + i for i, t in enumerate(PHI4_IDS)}
    vocab.update(specials)
    tokenizer = GPT2Tokenizer(
        vocab=vocab,
        merges=list(merges),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        extra_special_tokens=dict(PHI4_NAMED),
        model_max_length=131072,
    )
    tokenizer.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in specials], special_tokens=True
    )
    wrong = {t: i for t, i in specials.items() if tokenizer.convert_tokens_to_ids(t) != i}
    if wrong:
        raise RuntimeError(f"special tokens did not get their ids: {wrong}")
    return tokenizer


def _processor(real_ids: bool):
    from transformers import (
        Phi4MultimodalFeatureExtractor,
        Phi4MultimodalImageProcessor,
        Phi4MultimodalProcessor,
    )

    return Phi4MultimodalProcessor(
        image_processor=Phi4MultimodalImageProcessor(),
        audio_processor=Phi4MultimodalFeatureExtractor(),
        tokenizer=phi4_tokenizer(real_ids),
        chat_template=PHI4_TEMPLATE,
    )


# Tiny sizes. The audio encoder keeps the real subsampling (time_reduction 8: three stride-2 convolutions, so
# audio_embed_sizes, from the feature extractor's compression rate 8, matches the encoder's output length) and
# the real input (80 mel bins); the partial rotary factor is the real 0.75.
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75},
}
TINY_AUDIO = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_blocks": 2,
    "num_attention_heads": 2,
    "ext_pw_out_channel": 32,
    "depthwise_separable_out_channel": 32,
    "nemo_conv_channels": 32,
}
TINY_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}

# microsoft/Phi-4-multimodal-instruct config.json (the Phi-4-mini text model): 32 layers, hidden 3072, 24 heads,
# 8 KV heads, intermediate 8192, tied embeddings, 128k positions (original 4096), partial rotary factor 0.75,
# rope_theta 10000. Its LongRoPE short/long factors (48 each) are not reproduced: they change no shape or cost.
# The audio and vision encoders are Phi4MultimodalAudioConfig / Phi4MultimodalVisionConfig defaults, which are
# the checkpoint's (24-block 1024-wide conformer, 27-layer SigLIP).
FULL_TEXT = {
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 32,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "original_max_position_embeddings": 4096,
    "tie_word_embeddings": True,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.75},
}


def _model_config(
    tokenizer, vocab: int, text: dict[str, Any], audio: dict[str, Any], vision: dict[str, Any]
) -> dict[str, Any]:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in PHI4_IDS}
    return {
        "model_type": "phi4_multimodal",
        "architectures": ["Phi4MultimodalForCausalLM"],
        "vocab_size": vocab,
        "bos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "eos_token_id": [ids["<|endoftext|>"], ids["<|end|>"]],
        "audio_config": {"audio_token_id": ids["<|endoftext11|>"], **audio},
        "vision_config": {"image_token_id": ids["<|endoftext10|>"], **vision},
        **text,
    }


def _generation(tokenizer):
    # The checkpoint's generation_config.json: eos [<|endoftext|>, <|end|>], pad and bos <|endoftext|>.
    end_of_text = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    return generation_config(
        [end_of_text, tokenizer.convert_tokens_to_ids("<|end|>")], end_of_text, end_of_text
    )


def write(out_dir: Path, seed: int) -> Path:
    from transformers import Phi4MultimodalForCausalLM

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    data = _model_config(tokenizer, len(tokenizer), TINY_TEXT, TINY_AUDIO, TINY_VISION)
    model = _seeded_model(Phi4MultimodalForCausalLM, _config(data), seed)
    return save(Path(out_dir), model, processor, _generation(tokenizer))


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import Phi4MultimodalForCausalLM

    processor = _processor(real_ids=True)
    tokenizer = processor.tokenizer
    audio = {} if num_layers is None else {"num_blocks": num_layers}
    vision = {} if num_layers is None else {"num_hidden_layers": num_layers}
    data = _model_config(tokenizer, PHI4_VOCAB, depth(FULL_TEXT, num_layers), audio, vision)
    model = _seeded_model(Phi4MultimodalForCausalLM, _config(data), seed, dtype or torch.bfloat16, device)
    model.generation_config = _generation(tokenizer)
    return model, processor


register(
    TinyFamily(
        name="phi4-multimodal",
        write=write,
        full_size=full_size,
        template_source="RECONSTRUCTED (the hub's native chat_template.json was not reachable): the content-parts "
        "template of transformers' Phi-4-multimodal processor test with the converted tokenizer's placeholders "
        "<|endoftext10|> / <|endoftext11|> (convert_phi4_multimodal_weights_to_hf.py)",
    )
)
