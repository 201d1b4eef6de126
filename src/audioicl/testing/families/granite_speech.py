"""Granite Speech 3.3 (``ibm-granite/granite-speech-3.3-2b`` / ``-8b``): a tiny checkpoint and the full-size model.

As the hub checkpoints load in transformers 5.25: ``GraniteSpeechProcessor`` (its feature extractor is the
``audio_processor`` attribute, ``GraniteSpeechFeatureExtractor`` with the class defaults the checkpoints ship:
80 mel bins at 16 kHz, 10 ms hop, frames stacked in pairs, a 15-frame projector window read by 3 queries: 10
audio tokens a second; it needs torchaudio), the Granite 3.3 ``GPT2Tokenizer`` with ``<|audio|>`` (49155) beside
the role tokens, the Granite 3.3 chat template (string content: the model card writes ``<|audio|>`` into the
user text), eos ``<|end_of_text|>`` (0). The speech LoRA (``adapter_config.json``, loaded through peft when
installed, enabled only with audio) is left out: the model runs without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from audioicl.testing.templates import _bpe
from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TORCHAUDIO, TinyFamily, register, unavailable
from .audioflamingo3 import generation_config, save

# RECONSTRUCTED, not byte-verified (the hub's tokenizer_config.json was not reachable from here): the Granite 3.3
# instruct template's message and generation-prompt rendering, '<|start_of_role|>' + role + '<|end_of_role|>' +
# content + '<|end_of_text|>\n', '<|start_of_role|>assistant<|end_of_role|>' as the prompt, and its default system
# message (with today's date) where the conversation brings none; its tools, documents and thinking branches,
# which audio prompts never reach, are left out.
GRANITE_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{%- set system_message = messages[0]['content'] %}{%- set loop_messages = messages[1:] %}"
    "{%- else %}"
    "{%- set system_message = 'Knowledge Cutoff Date: April 2024.\\nToday\\'s Date: ' + strftime_now('%B %d, %Y')"
    " + '.\\nYou are Granite, developed by IBM. You are a helpful AI assistant.' %}"
    "{%- set loop_messages = messages %}"
    "{%- endif %}"
    "{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_text|>\\n' }}"
    "{%- for message in loop_messages %}"
    "{{- '<|start_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\\n' }}"
    "{%- if loop.last and add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}"
    "{%- endfor %}"
)

# The Granite 3.3 vocabulary's special tokens and their ids (<|end_of_text|> 0 is bos, eos, pad and unk).
GRANITE_IDS = {
    "<|end_of_text|>": 0,
    "<|start_of_role|>": 49152,
    "<|end_of_role|>": 49153,
    "<|tool_call|>": 49154,
    "<|audio|>": 49155,  # GraniteSpeechConfig.audio_token_index
}
GRANITE_VOCAB = 49160  # text_config.vocab_size of both checkpoints


def granite_tokenizer(real_ids: bool):
    """The real ``GPT2Tokenizer`` class around the tiny BPE: ``<|end_of_text|>`` at 0 as in Granite's vocabulary,
    the other special tokens at the real ids or right after the learned ones."""
    from tokenizers import AddedToken
    from transformers import GPT2Tokenizer

    tokens, merges = _bpe()
    vocab = {"<|end_of_text|>": 0, **{token: i + 1 for i, token in enumerate(tokens)}}
    rest = [t for t in GRANITE_IDS if t != "<|end_of_text|>"]
    specials = (
        GRANITE_IDS if real_ids else {"<|end_of_text|>": 0, **{t: len(vocab) + i for i, t in enumerate(rest)}}
    )
    vocab.update(specials)
    tokenizer = GPT2Tokenizer(
        vocab=vocab,
        merges=list(merges),
        unk_token="<|end_of_text|>",
        bos_token="<|end_of_text|>",
        eos_token="<|end_of_text|>",
        pad_token="<|end_of_text|>",
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
    from transformers import GraniteSpeechFeatureExtractor, GraniteSpeechProcessor

    tokenizer = granite_tokenizer(real_ids)
    tokenizer.chat_template = GRANITE_TEMPLATE  # the real tokenizer holds it: the family renders through it
    return GraniteSpeechProcessor(
        audio_processor=GraniteSpeechFeatureExtractor(),
        tokenizer=tokenizer,
        chat_template=GRANITE_TEMPLATE,
    )


# Tiny sizes; the encoder keeps the real input (160 = two stacked 80-bin frames) and the real 200-frame attention
# blocks, the projector the real window (15) and downsampling (5).
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}
TINY_ENCODER = {"num_layers": 2, "hidden_dim": 32, "num_heads": 2, "output_dim": 8}
TINY_PROJECTOR = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}

# ibm-granite/granite-speech-3.3-2b config.json: the granite-3.3-2b-instruct text model (40 layers, hidden 2048,
# 32 heads, 8 KV heads, intermediate 8192, 128k positions, rope_theta 1e7, Granite's muP multipliers); the
# encoder and projector are the GraniteSpeechEncoderConfig / Blip2QFormerConfig values the conversion writes
# (the encoder defaults are documented as this checkpoint's; a 2-layer 1024-wide Q-Former, 16 heads).
FULL_TEXT = {
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "rope_theta": 10000000.0,
    "embedding_multiplier": 12.0,
    "logits_scaling": 8.0,
    "residual_multiplier": 0.22,
    "attention_multiplier": 0.015625,
    "tie_word_embeddings": True,
}
FULL_PROJECTOR = {
    "hidden_size": 1024,
    "num_hidden_layers": 2,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "encoder_hidden_size": 1024,
    "cross_attention_frequency": 1,
}


def _model_config(tokenizer, vocab: int, text: dict, encoder: dict, projector: dict) -> dict[str, Any]:
    width = encoder.get("hidden_dim", 1024)
    return {
        "model_type": "granite_speech",
        "architectures": ["GraniteSpeechForConditionalGeneration"],
        "audio_token_index": tokenizer.convert_tokens_to_ids("<|audio|>"),
        "has_lora_adapter": True,
        "downsample_rate": 5,
        "window_size": 15,
        "text_config": {
            "model_type": "granite",
            "vocab_size": vocab,
            "bos_token_id": 0,
            "eos_token_id": 0,
            "pad_token_id": 0,
            **text,
        },
        "encoder_config": {"model_type": "granite_speech_encoder", **encoder},
        "projector_config": {
            "model_type": "blip_2_qformer",
            "encoder_hidden_size": width,
            "cross_attention_frequency": 1,
            **projector,
        },
    }


def _generation():
    # The checkpoints' generation_config.json: bos, eos and pad <|end_of_text|> (0).
    return generation_config(0, 0, 0)


def write(out_dir: Path, seed: int) -> Path:
    from transformers import GraniteSpeechForConditionalGeneration

    processor = _processor(real_ids=False)
    tokenizer = processor.tokenizer
    data = _model_config(tokenizer, len(tokenizer), TINY_TEXT, TINY_ENCODER, TINY_PROJECTOR)
    model = _seeded_model(GraniteSpeechForConditionalGeneration, _config(data), seed)
    return save(Path(out_dir), model, processor, _generation())


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import GraniteSpeechForConditionalGeneration

    processor = _processor(real_ids=True)
    text = FULL_TEXT if num_layers is None else {**FULL_TEXT, "num_hidden_layers": num_layers}
    encoder = {} if num_layers is None else {"num_layers": num_layers}
    data = _model_config(processor.tokenizer, GRANITE_VOCAB, text, encoder, FULL_PROJECTOR)
    model = _seeded_model(
        GraniteSpeechForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation()
    return model, processor


def model_card_inputs(processor: Any, conversation: list[dict[str, Any]]) -> Mapping[str, Any]:
    """The model card's two calls: the chat template over string contents that hold ``<|audio|>``, then the
    processor over that text and the clips in order. Audio parts (``{"type": "audio", "audio": wave}``) are
    written as the processor's audio token, text parts as they are."""
    waves = []
    messages = []
    for message in conversation:
        content = message["content"]
        if isinstance(content, list):
            waves += [part["audio"] for part in content if part["type"] == "audio"]
            content = "".join(processor.audio_token if p["type"] == "audio" else p["text"] for p in content)
        messages.append({"role": message["role"], "content": content})
    text = processor.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return processor(text=text, audio=waves or None, return_tensors="pt")


# The feature extractor cannot be built without torchaudio (not in the ``hf`` extra: its wheels pin an exact
# torch). Without it the family has no tiny checkpoint, rather than breaking every family's fixture.
if find_spec("torchaudio") is not None:
    register(
        TinyFamily(
            name="granite-speech",
            write=write,
            full_size=full_size,
            model_card_inputs=model_card_inputs,
            template_source="RECONSTRUCTED (the hub's tokenizer_config.json was not reachable): the Granite 3.3 "
            "instruct template's role, end-of-text and generation-prompt rendering and its dated default system "
            "message; the tools, documents and thinking branches left out",
        )
    )
else:
    unavailable("granite-speech", TORCHAUDIO)
