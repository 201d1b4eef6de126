"""The form of the Qwen families' specs (``Family``), and what the three share: the full-size depth override and
wider tiny heads. Each family's spec and config.json contents live in its module of ``testing.families``.

``Family`` (one per family, ``testing.family(name)``) names the model, full Omni and processor classes, the chat
template and the special tokens at their real ids, and holds the family's config.json builders: ``tiny_config``
(the tiny model's, the thinker's for the Omni families), ``omni_config`` (the full Omni layout around it) and
``full_config`` (the real full size, which ``full_config(spec, num_layers)`` here makes shallower for tests);
``with_head_dim`` gives a tiny thinker wider attention heads.

Where the real checkpoints' facts come from is cited next to each constant. Layouts of the real checkpoints:

- ``Qwen/Qwen2-Audio-7B-Instruct``: ``config.json`` of ``model_type`` ``qwen2_audio``
  (``Qwen2AudioForConditionalGeneration``), ``Qwen2AudioProcessor``; chat template in ``chat_template.json``.
- ``Qwen/Qwen2.5-Omni-7B``: ``model_type`` ``qwen2_5_omni`` with ``thinker_config`` (``qwen2_5_omni_thinker``),
  ``talker_config`` and ``token2wav_config`` inside and weights under ``thinker.``, ``talker.``, ``token2wav.``;
  ``Qwen2_5OmniProcessor``. ``Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained`` reads the thinker
  part of such a folder.
- ``Qwen/Qwen3-Omni-30B-A3B-Instruct``: ``model_type`` ``qwen3_omni_moe`` with ``thinker_config``
  (``qwen3_omni_moe_thinker``), ``talker_config``, ``code2wav_config``; ``Qwen3OmniMoeProcessor``.

Plain data: no torch or transformers here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Family:
    """What a family's checkpoint holds; token ids are the real checkpoints' ids (added_tokens.json)."""

    name: str
    model_class: str  # the class a backend loads: the model, or the Omni thinker
    full_class: str | None  # the full Omni class (thinker, talker, vocoder), None where there is none
    processor_class: str
    chat_template: str
    special_tokens: dict[str, int]  # token → real id, in added-token order
    named_tokens: dict[str, str] = field(default_factory=dict)  # extra_special_tokens: attribute → token
    audio_placeholder: str = ""  # what the chat template puts per audio part
    audio_token: str = ""  # the token the processor repeats once per audio frame group
    chunk_length: int = 30  # WhisperFeatureExtractor window in seconds (preprocessor_config.json)
    image_patch_size: int = 14
    # config.json contents: the tiny model's (spec, ids, vocab, user id), the full Omni layout around a tiny
    # thinker (spec, thinker, ids; None: no Omni layout) and the real full size
    tiny_config: Callable[..., dict[str, Any]] | None = None
    full_config: Callable[[], dict[str, Any]] | None = None
    omni_config: Callable[..., dict[str, Any]] | None = None


# Full-size configurations. Qwen2-Audio-7B: config.json of Qwen/Qwen2-Audio-7B(-Instruct) (text_config: Qwen2
# 4096 hidden, 32 layers, 32 heads (MHA), intermediate 11008, vocab 156032, 8192 positions, rms eps 1e-5; Whisper
# large-v3-sized encoder: 32 layers, d_model 1280, 20 heads, ffn 5120); as quoted in vLLM/transformers test
# fixtures of the checkpoint. Qwen2.5-Omni-7B thinker: Qwen/Qwen2.5-Omni-7B config.json thinker_config (text
# 3584 hidden, 28 layers, 28 heads / 4 KV, intermediate 18944, vocab 152064, 32768 positions, rope theta 1e6,
# mrope_section [16, 24, 24]; audio encoder 32 x 1280, n_window 100, output_dim 3584; vision 32 x 1280, out 3584).
# Qwen3-Omni-30B-A3B thinker: Qwen/Qwen3-Omni-30B-A3B-Instruct config.json thinker_config, from a dump of the
# loaded config (text: 48 layers, hidden 2048, 32 heads / 4 KV of head_dim 128, 128 experts, 8 active, moe
# intermediate 768, vocab 152064, 65536 positions, mrope [24, 20, 20] interleaved; audio encoder 32 x 1280,
# n_window 50, n_window_infer 800, downsample_hidden_size 480, output_dim 2048; vision 27 x 1152, out 2048).
def full_config(spec: Family, num_layers: int | None) -> dict[str, Any]:
    """The family's real full-size configuration, its text model and encoders ``num_layers`` deep if given."""
    assert spec.full_config is not None
    cfg = spec.full_config()
    if num_layers is not None:
        cfg["text_config"]["num_hidden_layers"] = num_layers
        cfg["audio_config"]["encoder_layers"] = num_layers
        if "vision_config" in cfg:
            vision = cfg["vision_config"]
            vision["depth"] = num_layers
            if "fullatt_block_indexes" in vision:
                vision["fullatt_block_indexes"] = [num_layers - 1]
            if "deepstack_visual_indexes" in vision:
                vision["deepstack_visual_indexes"] = list(range(min(num_layers, 3)))
    return cfg


def with_head_dim(thinker: dict[str, Any], head_dim: int) -> dict[str, Any]:
    """The tiny thinker with attention heads of ``head_dim`` (vLLM's CPU attention takes 64 and up): the
    text model widens to heads x head_dim, M-RoPE sections and the encoders' outputs follow."""
    thinker = copy.deepcopy(thinker)
    text = thinker["text_config"]
    hidden = text["num_attention_heads"] * head_dim
    old_head_dim = text.get("head_dim", text["hidden_size"] // text["num_attention_heads"])
    text.update(hidden_size=hidden, intermediate_size=2 * hidden)
    if "head_dim" in text:
        text["head_dim"] = head_dim
    rope = text.get("rope_parameters") or {}
    if "mrope_section" in rope:
        rope["mrope_section"] = [n * head_dim // old_head_dim for n in rope["mrope_section"]]
    if "output_dim" in thinker["audio_config"]:
        thinker["audio_config"]["output_dim"] = hidden
    if "vision_config" in thinker:
        thinker["vision_config"]["out_hidden_size"] = hidden
    return thinker
