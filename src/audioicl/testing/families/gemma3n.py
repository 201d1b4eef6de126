"""Gemma 3n (``google/gemma-3n-E2B-it``, ``google/gemma-3n-E4B-it``): a tiny checkpoint and the full-size model.

The real checkpoints, as transformers' ``convert_gemma3n_weights.py`` writes them: ``Gemma3nProcessor`` with
``Gemma3nAudioFeatureExtractor()`` (defaults: 128 mel bins, 30 s = 480,000 samples at most) and
``SiglipImageProcessor`` (768 px, 256 image tokens), a SentencePiece ``GemmaTokenizer`` with ``add_bos_token``
and the six multimodal tokens at fixed ids, the chat template below, eos ``[<eos>, <end_of_turn>]``.

The tiny tokenizer (``gemma_tokenizer``, also used by Gemma 4) is the real ``GemmaTokenizer`` class (BPE, byte
fallback, spaces as ``▁``) around a BPE learned from the benchmark's wording: ``<pad> <eos> <bos> <unk> <mask>``
at 0-4 and the turn tokens at 105/106 as in the real vocabulary, the 256 byte-fallback tokens and the learned
ones after them; the multimodal tokens at the real ids (full size) or, tiny, at the same offsets from the end of
a small text vocabulary. The vision tower needs ``timm`` (``TimmWrapperModel``); the tiny one is timm's
``test_efficientnet`` instead of ``mobilenetv5_300m_enc`` (300 M parameters), which audio never reaches.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, generation_config, save

# The chat template of google/gemma-3n-E{2,4}B-it, verbatim from transformers'
# src/transformers/models/gemma3n/convert_gemma3n_weights.py (_CHAT_TEMPLATE, written with
# --include_chat_template); the same text ships in the hub checkpoints' GGUF conversions. A system message
# becomes the first user turn's prefix (its first text part only), text parts are trimmed, and every audio part
# is one <audio_soft_token>, which the processor expands to "\n\n<start_of_audio>" + 188 tokens +
# "<end_of_audio>\n\n".
GEMMA3N_TEMPLATE = (
    "{{ bos_token }}\n"
    "{%- if messages[0]['role'] == 'system' -%}\n"
    "    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
    "    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
    "    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n"
    "{%- else -%}\n"
    '    {%- set first_user_prefix = "" -%}\n'
    "    {%- set loop_messages = messages -%}\n"
    "{%- endif -%}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    '        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}\n'
    "    {%- endif -%}\n"
    "    {%- if (message['role'] == 'assistant') -%}\n"
    '        {%- set role = "model" -%}\n'
    "    {%- else -%}\n"
    "        {%- set role = message['role'] -%}\n"
    "    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n"
    "        {{ message['content'] | trim }}\n"
    "    {%- elif message['content'] is iterable -%}\n"
    "        {%- for item in message['content'] -%}\n"
    "            {%- if item['type'] == 'audio' -%}\n"
    "                {{ '<audio_soft_token>' }}\n"
    "            {%- elif item['type'] == 'image' -%}\n"
    "                {{ '<image_soft_token>' }}\n"
    "            {%- elif item['type'] == 'text' -%}\n"
    "                {{ item['text'] | trim }}\n"
    "            {%- endif -%}\n"
    "        {%- endfor -%}\n"
    "    {%- else -%}\n"
    '        {{ raise_exception("Invalid content type") }}\n'
    "    {%- endif -%}\n"
    "    {{ '<end_of_turn>\\n' }}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\\n'}}\n"
    "{%- endif -%}\n"
)

# The SentencePiece vocabulary's own specials (ids of every Gemma 3 / 3n / 4 tokenizer).
GEMMA_BASE = {"<pad>": 0, "<eos>": 1, "<bos>": 2, "<unk>": 3, "<mask>": 4}
FIRST_LEARNED = 107  # after <start_of_turn> 105 / <end_of_turn> 106 (Gemma 4: <|turn> / <turn|>)
TEXT_VOCAB = 262_144  # the real text vocabulary (vocab_size_per_layer_input)
TINY_TEXT_VOCAB = 8192  # the tiny one: room below it for <start_of_image> / <|audio> (6,145 from the end)
TINY_LEARNED = 1000

# convert_gemma3n_weights.py: the tokenizer's named multimodal tokens and their real ids.
GEMMA3N_NAMED = {
    "image_token": "<image_soft_token>",
    "boi_token": "<start_of_image>",
    "eoi_token": "<end_of_image>",
    "audio_token": "<audio_soft_token>",
    "boa_token": "<start_of_audio>",
    "eoa_token": "<end_of_audio>",
}
GEMMA3N_IDS = {
    "<start_of_turn>": 105,
    "<end_of_turn>": 106,
    "<start_of_image>": 255_999,
    "<start_of_audio>": 256_000,
    "<end_of_image>": 262_144,  # vision_config.vocab_offset: the 128 vision "hard" tokens start here
    "<image_soft_token>": 262_145,
    "<end_of_audio>": 262_272,  # audio_config.vocab_offset = 262,144 + 128
    "<audio_soft_token>": 262_273,
}
GEMMA3N_VOCAB = 262_400  # text_config.vocab_size: text + 128 vision + 128 audio tokens


def relocate(ids: dict[str, int], text_vocab: int) -> dict[str, int]:
    """Token ids of the real vocabulary mapped to one whose text part has ``text_vocab`` ids: ids below 256
    stay, the others keep their distance from the end of the real text vocabulary."""
    return {t: i if i < 256 else text_vocab + i - TEXT_VOCAB for t, i in ids.items()}


@lru_cache(maxsize=1)
def _gemma_bpe() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Tokens and merges of a tiny BPE with Gemma's normalisation (spaces as ``▁``), trained once a process."""
    import json

    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    from audioicl.testing.templates import _corpus

    corpus = _corpus()
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.Replace(" ", "▁")
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    alphabet = sorted({c for line in corpus for c in line.replace(" ", "▁")})
    trainer = trainers.BpeTrainer(vocab_size=TINY_LEARNED, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    model = json.loads(tok.to_str())["model"]
    tokens = tuple(sorted(model["vocab"], key=model["vocab"].get))
    merges = tuple(tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"])
    return tokens, merges  # type: ignore[return-value]


def gemma_tokenizer(special_ids: dict[str, int], named: dict[str, str], **settings: Any):
    """The real ``GemmaTokenizer`` class around the tiny BPE, ``special_ids`` (beside ``GEMMA_BASE``) at their
    ids, the processor's named tokens (``audio_token``, ``boa_token``, ...) in ``extra_special_tokens``."""
    from tokenizers import AddedToken
    from transformers import GemmaTokenizer

    learned, merges = _gemma_bpe()
    vocab = dict(GEMMA_BASE)
    vocab.update({f"<0x{b:02X}>": FIRST_LEARNED + b for b in range(256)})
    for token in learned:
        vocab.setdefault(token, FIRST_LEARNED + len(vocab) - len(GEMMA_BASE))
    learned_end = max(vocab.values())
    vocab.update(special_ids)
    tokenizer = GemmaTokenizer(vocab=vocab, merges=list(merges), extra_special_tokens=dict(named), **settings)
    tokenizer.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in special_ids], special_tokens=True
    )
    wrong = {t: i for t, i in special_ids.items() if tokenizer.convert_tokens_to_ids(t) != i}
    if (
        wrong
        or len(set(vocab.values())) != len(vocab)
        or min(special_ids.values(), default=0) <= 0
        or any(FIRST_LEARNED <= i <= learned_end for i in special_ids.values())
    ):
        raise RuntimeError(f"special tokens did not get their ids: {wrong}")
    return tokenizer


def _processor(ids: dict[str, int]):
    from transformers import Gemma3nAudioFeatureExtractor, Gemma3nProcessor, SiglipImageProcessor
    from transformers.image_utils import PILImageResampling

    tokenizer = gemma_tokenizer(ids, GEMMA3N_NAMED, add_bos_token=True)
    # convert_gemma3n_weights.py: the image processor's settings (SiglipImageProcessorFast there).
    images = SiglipImageProcessor(
        image_seq_length=256,
        image_mean=(0.5,) * 3,
        image_std=(0.5,) * 3,
        size={"height": 768, "width": 768},
        resample=PILImageResampling.BILINEAR,
        do_normalize=False,
    )
    return Gemma3nProcessor(
        feature_extractor=Gemma3nAudioFeatureExtractor(),
        image_processor=images,
        tokenizer=tokenizer,
        chat_template=GEMMA3N_TEMPLATE,
    )


TINY_TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,  # two of them reuse the KV of the first two, as the real last layers do
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "num_kv_shared_layers": 2,
    "activation_sparsity_pattern": [0.95, 0.0, 0.0, 0.0],
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "hidden_size_per_layer_input": 16,
    "laurel_rank": 8,
}
# The real subsampling (two stride-2 convolutions, then a 4x reduction: 188 tokens per 30 s), small widths.
TINY_AUDIO = {
    "hidden_size": 32,
    "conf_num_attention_heads": 2,
    "conf_num_hidden_layers": 2,
    "sscp_conv_channel_size": [8, 4],
}
TINY_VISION = {"architecture": "test_efficientnet", "hidden_size": 32}

# google/gemma-3n-E2B-it config.json, as convert_gemma3n_weights.py's _VARIANTS["gemma3n_e2b"] builds it:
# Gemma3nTextConfig defaults (hidden 2048, 8 heads, 2 KV heads, head_dim 256, vocab 262,400) with 30 layers,
# intermediate 8192, the first 10 layers 95 % sparse and the last 10 reusing KV; Gemma3nAudioConfig and
# Gemma3nVisionConfig defaults (1536-wide 12-layer conformer, mobilenetv5_300m_enc).
FULL_TEXT = {
    "intermediate_size": 2048 * 4,
    "num_hidden_layers": 30,
    "activation_sparsity_pattern": [0.95] * 10 + [0.0] * 20,
    "num_kv_shared_layers": 10,
}


def _model_config(ids: dict[str, int], text_vocab: int, text: dict, audio: dict, vision: dict) -> dict:
    return {
        "model_type": "gemma3n",
        "architectures": ["Gemma3nForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma3n_text",
            "vocab_size": text_vocab + 256,
            "vocab_size_per_layer_input": text_vocab,
            **text,
        },
        "audio_config": {"model_type": "gemma3n_audio", "vocab_offset": text_vocab + 128, **audio},
        "vision_config": {"model_type": "gemma3n_vision", "vocab_offset": text_vocab, **vision},
        "audio_soft_tokens_per_image": 188,
        "vision_soft_tokens_per_image": 256,
        "boi_token_id": ids["<start_of_image>"],
        "eoi_token_id": ids["<end_of_image>"],
        "image_token_id": ids["<image_soft_token>"],
        "boa_token_id": ids["<start_of_audio>"],
        "eoa_token_id": ids["<end_of_audio>"],
        "audio_token_id": ids["<audio_soft_token>"],
        "eos_token_id": [1, 106],  # the -it checkpoints: <eos> and <end_of_turn>
    }


def _generation(ids: dict[str, int]):
    # convert_gemma3n_weights.py: eos [<eos>, <end_of_turn>], pad <pad>, bos <bos>, its sampling defaults.
    return generation_config(
        [GEMMA_BASE["<eos>"], ids["<end_of_turn>"]],
        GEMMA_BASE["<pad>"],
        GEMMA_BASE["<bos>"],
        cache_implementation="hybrid",
        do_sample=True,
        temperature=1.0,
        top_k=64,
        top_p=0.95,
    )


def write(out_dir: Path, seed: int) -> Path:
    from transformers import Gemma3nForConditionalGeneration

    ids = relocate(GEMMA3N_IDS, TINY_TEXT_VOCAB)
    data = _model_config(ids, TINY_TEXT_VOCAB, TINY_TEXT, TINY_AUDIO, TINY_VISION)
    model = _seeded_model(Gemma3nForConditionalGeneration, _config(data), seed)
    return save(Path(out_dir), model, _processor(ids), _generation(ids))


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import Gemma3nForConditionalGeneration

    text = depth(FULL_TEXT, num_layers)
    if num_layers is not None:  # keep the real proportions: a third sparse, a third KV-sharing
        text = {
            **text,
            "activation_sparsity_pattern": [0.95] * (num_layers // 3)
            + [0.0] * (num_layers - num_layers // 3),
            "num_kv_shared_layers": num_layers // 3,
        }
    audio = {} if num_layers is None else {"conf_num_hidden_layers": num_layers}
    data = _model_config(GEMMA3N_IDS, TEXT_VOCAB, text, audio, {})
    model = _seeded_model(
        Gemma3nForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(GEMMA3N_IDS)
    return model, _processor(GEMMA3N_IDS)


register(
    TinyFamily(
        name="gemma3n",
        write=write,
        full_size=full_size,
        template_source="transformers convert_gemma3n_weights.py (_CHAT_TEMPLATE, the script that wrote the hub "
        "checkpoints)",
    )
)
