"""Voxtral (``mistralai/Voxtral-Mini-3B-2507``): a tiny checkpoint and the full-size model.

The real checkpoint, as transformers' ``convert_voxtral_weights_to_hf.py`` writes it: ``VoxtralProcessor``
(the Whisper-large-v3 ``WhisperFeatureExtractor``: 128 bins, 30 s windows; and ``MistralCommonBackend`` over
``tekken.json``), a Llama text model with ``audio_token_id`` 24 and a 32-layer Whisper encoder, generation
config ``pad_token_id`` 11. The tiny ``tekken.json`` is the real layout: tokenizer version v7, 1000 special
tokens at the real ranks (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, ``[INST]`` 3, ``[/INST]`` 4, ``<pad>`` 11,
``[SYSTEM_PROMPT]`` 17, ``[AUDIO]`` 24, ``[BEGIN_AUDIO]`` 25, ``[TRANSCRIBE]`` 34), Tekken's split pattern, the
real audio section (16 kHz, 12.5 frames/s, 128 mel bins, 30 s chunks), around the tiny BPE's tokens.
There is no chat template to copy: mistral-common's v7 encoder is the template.
"""

from __future__ import annotations

import base64
import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audioicl.audio import SAMPLE_RATE
from audioicl.backends.families.voxtral import wav_base64
from audioicl.testing.templates import _bpe
from audioicl.testing.weights import config_from, seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, generation_config

SPECIAL_COUNT = 1000  # tekken.json config.default_num_special_tokens
# Ranks 0-19: mistral-common's Tekkenizer.DEPRECATED_SPECIAL_TOKENS (the v7 set); then the audio ones.
SPECIALS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
    "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)  # fmt: skip
NAMED = {24: "[AUDIO]", 25: "[BEGIN_AUDIO]", 34: "[TRANSCRIBE]"}  # VoxtralProcessor.audio_token_id = 24
AUDIO_SECTION = {
    "sampling_rate": SAMPLE_RATE,
    "frame_rate": 12.5,
    "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
    "chunk_length_s": 30.0,
}
VOCAB_SIZE = 131072  # text_config.vocab_size of both checkpoints


def _tekken_pattern() -> str:
    """Tekken's split pattern, from the tekken file mistral-common ships (the same in every Tekken tokenizer)."""
    from importlib.resources import files

    data = json.loads(files("mistral_common").joinpath("data/tekken_240911.json").read_text(encoding="utf-8"))
    return data["config"]["pattern"]


def _vocab() -> list[dict[str, Any]]:
    """The 256 bytes, then the tiny BPE's merged tokens in merge order, as Tekken's ``vocab`` entries."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    decode = {char: byte for byte, char in bytes_to_unicode().items()}
    tokens, _ = _bpe()
    merged = [bytes(decode[c] for c in token) for token in tokens]
    pieces = [bytes([i]) for i in range(256)] + [piece for piece in merged if len(piece) > 1]
    return [
        {
            "rank": rank,
            "token_bytes": base64.b64encode(piece).decode(),
            "token_str": piece.decode("utf-8", "replace"),
        }
        for rank, piece in enumerate(pieces)
    ]


def tekken_json() -> dict[str, Any]:
    """The tiny ``tekken.json``."""
    vocab = _vocab()
    names = [*SPECIALS, *(NAMED.get(i, f"<SPECIAL_{i}>") for i in range(len(SPECIALS), max(NAMED) + 1))]
    return {
        "config": {
            "pattern": _tekken_pattern(),
            "num_vocab_tokens": len(vocab),
            "default_vocab_size": SPECIAL_COUNT + len(vocab),
            "default_num_special_tokens": SPECIAL_COUNT,
            "version": "v7",
        },
        "vocab": vocab,
        "special_tokens": [
            {"rank": i, "token_str": name, "is_control": True} for i, name in enumerate(names)
        ],
        "audio": AUDIO_SECTION,
    }


def _processor(folder: Path):
    """``VoxtralProcessor`` over ``folder/tekken.json`` (written here) and the Whisper-large-v3 extractor."""
    from transformers import MistralCommonBackend, VoxtralProcessor, WhisperFeatureExtractor

    (folder / "tekken.json").write_text(json.dumps(tekken_json()), encoding="utf-8")
    tokenizer = MistralCommonBackend(tokenizer_path=folder / "tekken.json")
    features = WhisperFeatureExtractor(feature_size=128, sampling_rate=SAMPLE_RATE, chunk_length=30)
    return VoxtralProcessor(features, tokenizer)


def _model_config(vocab: int, text: dict[str, Any], encoder: dict[str, Any]) -> dict[str, Any]:
    return {
        "model_type": "voxtral",
        "architectures": ["VoxtralForConditionalGeneration"],
        "audio_token_id": 24,
        "projector_hidden_act": "gelu",
        "audio_config": {"model_type": "voxtral_encoder", "num_mel_bins": 128, **encoder},
        "text_config": {"model_type": "llama", "vocab_size": vocab, **text},
    }


# Tiny sizes; the encoder keeps 1500 positions (a 30 s window, stride-2 convolution) and an intermediate size
# of 4 x hidden: the projector reads 4 encoder frames as one row (modeling_voxtral.get_audio_features).
# Two heads sharing one KV head (grouped as the real 32 over 8): every clip is 375 tokens, a MorseCode prompt
# over 12,000, and a padded batch's attention on the CPU is the heads x length x length score matrix.
TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "max_position_embeddings": 32768,
    "rope_theta": 100000000.0,
}
TINY_ENCODER = {"hidden_size": 32, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2}

# mistralai/Voxtral-Mini-3B-2507 config.json, the VoxtralConfig defaults (configuration_voxtral.py: text_config
# init_kwargs, VoxtralEncoderConfig defaults), as convert_voxtral_weights_to_hf.py writes them from params.json.
FULL_TEXT = {
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 30,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "rms_norm_eps": 1e-05,
    "rope_theta": 100000000.0,
}
FULL_ENCODER = {
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_hidden_layers": 32,
    "num_attention_heads": 20,
}


def _generation():
    # convert_voxtral_weights_to_hf.py: the model config's bos 1 / eos 2 (</s>), and pad_token_id 11 (<pad>).
    return generation_config(2, 11, bos=1)


def write(out_dir: Path, seed: int) -> Path:
    from transformers import VoxtralForConditionalGeneration

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    processor = _processor(out)
    config = config_from(_model_config(len(processor.tokenizer), TINY_TEXT, TINY_ENCODER))
    model = seeded_model(VoxtralForConditionalGeneration, config, seed)
    model.generation_config = _generation()
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import VoxtralForConditionalGeneration

    with tempfile.TemporaryDirectory(prefix="audioicl-voxtral-") as folder:
        processor = _processor(Path(folder))  # the tokenizer reads tekken.json once, at construction
    data = _model_config(VOCAB_SIZE, depth(FULL_TEXT, num_layers), depth(FULL_ENCODER, num_layers))
    model = seeded_model(
        VoxtralForConditionalGeneration, config_from(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation()
    return model, processor


def _card_conversation(conversation: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the model card writes one: each clip an encoded audio file (``base64``), and a
    system message, which Voxtral refuses beside audio, folded into the first user turn as its opening text."""
    messages = [
        {
            **m,
            "content": [_card_part(p) for p in m["content"]]
            if isinstance(m["content"], list)
            else m["content"],
        }
        for m in conversation
    ]
    if not messages or messages[0]["role"] != "system":
        return messages
    system, rest = messages[0], messages[1:]
    text = (
        system["content"]
        if isinstance(system["content"], str)
        else "".join(p["text"] for p in system["content"])
    )
    user = next(m for m in rest if m["role"] == "user")
    parts = (
        user["content"] if isinstance(user["content"], list) else [{"type": "text", "text": user["content"]}]
    )
    opening = {"type": "text", "text": text + "\n\n"}
    if parts and parts[0]["type"] == "text":
        parts = [{"type": "text", "text": opening["text"] + parts[0]["text"]}, *parts[1:]]
    else:
        parts = [opening, *parts]
    user["content"] = parts
    return rest


def _card_part(part: dict[str, Any]) -> dict[str, Any]:
    if part.get("type") == "audio" and "audio" in part:
        return {"type": "audio", "base64": wav_base64(part["audio"], SAMPLE_RATE)}
    return part


def model_card_inputs(processor: Any, conversation: list[dict[str, Any]]) -> Mapping[str, Any]:
    """The model card's call, ``processor.apply_chat_template(conversation)`` (it returns model inputs)."""
    return processor.apply_chat_template(_card_conversation(conversation))


register(
    TinyFamily(
        name="voxtral",
        write=write,
        full_size=full_size,
        model_card_inputs=model_card_inputs,
        template_source=(
            "none to copy: the prompt is mistral-common's v7 instruct encoder (the real checkpoint's), over a "
            "tiny tekken.json with the real special-token ranks, version and audio section"
        ),
    )
)
