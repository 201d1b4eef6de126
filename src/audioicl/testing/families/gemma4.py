"""Gemma 4 with audio (``google/gemma-4-E2B-it``, ``google/gemma-4-E4B-it``): a tiny checkpoint and full size.

Only the two on-device variants carry an ``audio_config`` (transformers' ``convert_gemma4_weights.py``:
``_VARIANTS``; 26B-A4B and 31B are text and vision only). The real checkpoints as that script writes them:
``Gemma4Processor`` with ``Gemma4AudioFeatureExtractor()`` (30 s = 480,000 samples at most),
``Gemma4ImageProcessor`` (280 soft tokens, pooling 3), ``Gemma4VideoProcessor``, a ``GemmaTokenizer`` without
``add_bos_token``, padding on the left, with 18 named special tokens; eos ``[<eos>, <turn|>, <|tool_response>]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import depth, generation_config, save
from .gemma3n import TEXT_VOCAB, TINY_TEXT_VOCAB, gemma_tokenizer, relocate

# The chat template of google/gemma-4-E4B-it (chat_template.jinja; convert_gemma4_weights.py downloads it from the
# hub, so transformers holds no copy). Verbatim as two independent public copies of the checkpoint's template
# print it (llama.cpp's GGUF conversion log of an E4B fine-tune, and a JS port's gemma4JinjaTemplate); the tool
# formatting macros are left out: they render only for ``tools``, which the benchmark never passes. A system
# message's content is written with ``| trim`` (so it must be a string), text parts are trimmed, an audio part
# is ``<|audio|>``, which the processor expands to ``<|audio>`` + one ``<|audio|>`` per 40 ms + ``<audio|>``.
GEMMA4_TEMPLATE = (
    "{%- macro strip_thinking(text) -%}\n"
    "    {%- set ns = namespace(result='') -%}\n"
    "    {%- for part in text.split('<channel|>') -%}\n"
    "        {%- if '<|channel>' in part -%}\n"
    "            {%- set ns.result = ns.result + part.split('<|channel>')[0] -%}\n"
    "        {%- else -%}\n"
    "            {%- set ns.result = ns.result + part -%}\n"
    "        {%- endif -%}\n"
    "    {%- endfor -%}\n"
    "    {{- ns.result | trim -}}\n"
    "{%- endmacro -%}\n"
    "\n"
    "{%- set ns = namespace(prev_message_type=None) -%}\n"
    "{%- set loop_messages = messages -%}\n"
    "{{ bos_token }}\n"
    "{#- Handle System/Tool Definitions Block -#}\n"
    "{%- if (enable_thinking is defined and enable_thinking) or tools or messages[0]['role'] in ['system', "
    "'developer'] -%}\n"
    "    {{- '<|turn>system\\n' -}}\n"
    "\n"
    "    {#- Inject Thinking token at the very top of the FIRST system turn -#}\n"
    "    {%- if enable_thinking is defined and enable_thinking -%}\n"
    "        {{- '<|think|>' -}}\n"
    "        {%- set ns.prev_message_type = 'think' -%}\n"
    "    {%- endif -%}\n"
    "\n"
    "    {%- if messages[0]['role'] in ['system', 'developer'] -%}\n"
    "        {{- messages[0]['content'] | trim -}}\n"
    "        {%- set loop_messages = messages[1:] -%}\n"
    "    {%- endif -%}\n"
    "\n"
    "    {{- '<turn|>\\n' -}}\n"
    "{%- endif %}\n"
    "\n"
    "{#- Loop through messages -#}\n"
    "{%- for message in loop_messages -%}\n"
    "    {%- set ns.prev_message_type = None -%}\n"
    "    {%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "        {{- '<|turn>' + role + '\\n' }}\n"
    "\n"
    "            {%- if message['content'] is string -%}\n"
    "                {%- if role == 'model' -%}\n"
    "                    {{- strip_thinking(message['content']) -}}\n"
    "                {%- else -%}\n"
    "                    {{- message['content'] | trim -}}\n"
    "                {%- endif -%}\n"
    "            {%- elif message['content'] is sequence -%}\n"
    "                {%- for item in message['content'] -%}\n"
    "                    {%- if item['type'] == 'text' -%}\n"
    "                        {%- if role == 'model' -%}\n"
    "                            {{- strip_thinking(item['text']) -}}\n"
    "                        {%- else -%}\n"
    "                            {{- item['text'] | trim -}}\n"
    "                        {%- endif -%}\n"
    "                    {%- elif item['type'] == 'image' -%}\n"
    "                        {{- '\\n\\n<|image|>\\n\\n' -}}\n"
    "                        {%- set ns.prev_message_type = 'image' -%}\n"
    "                    {%- elif item['type'] == 'audio' -%}\n"
    "                        {{- '<|audio|>' -}}\n"
    "                        {%- set ns.prev_message_type = 'audio' -%}\n"
    "                    {%- elif item['type'] == 'video' -%}\n"
    "                        {{- '\\n\\n<|video|>\\n\\n' -}}\n"
    "                        {%- set ns.prev_message_type = 'video' -%}\n"
    "                    {%- endif -%}\n"
    "                {%- endfor -%}\n"
    "            {%- endif -%}\n"
    "\n"
    "        {{- '<turn|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "\n"
    "{%- if add_generation_prompt -%}\n"
    "    {%- if ns.prev_message_type != 'tool_response' -%}\n"
    "        {{- '<|turn>model\\n' -}}\n"
    "    {%- endif -%}\n"
    "{%- endif -%}\n"
)

# convert_gemma4_weights.py: the tokenizer's named tokens.
GEMMA4_NAMED = {
    "image_token": "<|image|>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "audio_token": "<|audio|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
    "sot_token": "<|turn>",
    "eot_token": "<turn|>",
    "soc_token": "<|channel>",
    "eoc_token": "<channel|>",
    "think_token": "<|think|>",
    "escape_token": '<|"|>',
    "str_token": "<|tool_response>",
    "etr_token": "<tool_response|>",
    "stc_token": "<|tool_call>",
    "etc_token": "<tool_call|>",
    "std_token": "<|tool>",
    "etd_token": "<tool|>",
}
# Their ids in the real 262,144-token vocabulary (Gemma4Config defaults for the multimodal ones; the tool and
# turn tokens as tokenizer.json's added_tokens, quoted alike by several public Gemma 4 tool-call parsers).
GEMMA4_IDS = {
    "<|tool>": 46,
    "<tool|>": 47,
    "<|tool_call>": 48,
    "<tool_call|>": 49,
    "<|tool_response>": 50,
    "<tool_response|>": 51,
    '<|"|>': 52,
    "<|think|>": 98,
    "<|channel>": 100,
    "<channel|>": 101,
    "<|turn>": 105,
    "<turn|>": 106,
    "<|image>": 255_999,
    "<|audio>": 256_000,
    "<|image|>": 258_880,
    "<|audio|>": 258_881,
    "<image|>": 258_882,
    "<audio|>": 258_883,
    "<|video|>": 258_884,
}


def _processor(ids: dict[str, int], mel_bins: int = 128):
    from transformers import (
        Gemma4AudioFeatureExtractor,
        Gemma4ImageProcessor,
        Gemma4Processor,
        Gemma4VideoProcessor,
    )

    tokenizer = gemma_tokenizer(ids, GEMMA4_NAMED, add_bos_token=False, padding_side="left")
    images = Gemma4ImageProcessor(
        image_seq_length=280, do_normalize=False, max_soft_tokens=280, pooling_kernel_size=3
    )
    return Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(feature_size=mel_bins),
        image_processor=images,
        video_processor=Gemma4VideoProcessor(),
        tokenizer=tokenizer,
        image_seq_length=280,
        chat_template=GEMMA4_TEMPLATE,
    )


TINY_TEXT = {
    "hidden_size": 64,
    "hidden_size_per_layer_input": 16,
    "intermediate_size": 128,
    "num_hidden_layers": 4,  # the last two reuse the first two's KV, as the real last 20 (E2B) do
    "layer_types": ["sliding_attention", "full_attention"] * 2,
    "num_kv_shared_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "global_head_dim": 64,
    "use_double_wide_mlp": True,
}
# The real subsampling (two stride-2 convolutions: 25 tokens a second) and chunked attention, small widths.
# The projection takes the first convolution's width for the number of mel bins (modeling_gemma4.py
# ``proj_input_dim``), so that width is the mel bins' number: 32 here, not the real 128. With 128, its output is
# 128 channels x half the frames x 64 bins for every clip, and the tiny model's run of every task at k = 1..5 spent
# two thirds of its time (about 70 s of CPU) writing and normalising it; the feature extractor's code is the same.
TINY_MEL_BINS = 32
TINY_AUDIO = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "subsampling_conv_channels": [TINY_MEL_BINS, 4],
    "output_proj_dims": 32,
}
TINY_VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "global_head_dim": 16,
    "default_output_length": 280,
    "pooling_kernel_size": 3,
    "use_clipped_linears": True,
}

# google/gemma-4-E2B-it config.json, as convert_gemma4_weights.py's _VARIANTS["gemma-4-e2b"] builds it: 35 layers
# (4 sliding + 1 full, 7 times), hidden 1536, 8 heads, 1 KV head, the last 20 layers reusing KV, double-wide MLP,
# logits capped at 30, proportional RoPE (theta 1e6, a quarter rotary) on full layers and 1e4 on sliding ones;
# the on-device vision tower (768 wide, 16 layers) and Gemma4AudioConfig defaults (1024-wide 12-layer conformer).
FULL_TEXT = {
    "hidden_size": 1536,
    "hidden_size_per_layer_input": 256,
    "intermediate_size": 4 * 1536,
    "num_hidden_layers": 35,
    "layer_types": (["sliding_attention"] * 4 + ["full_attention"]) * 7,
    "num_attention_heads": 8,
    "num_key_value_heads": 1,
    "num_kv_shared_layers": 20,
    "use_double_wide_mlp": True,
}
ROPE = {
    "full_attention": {"rope_theta": 1_000_000.0, "rope_type": "proportional", "partial_rotary_factor": 0.25},
    "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"},
}
FULL_VISION = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 16,
    "num_attention_heads": 12,
    "num_key_value_heads": 12,
    "head_dim": 64,
    "global_head_dim": 64,
    "default_output_length": 280,
    "pooling_kernel_size": 3,
    "use_clipped_linears": True,
}


def _model_config(ids: dict[str, int], vocab: int, text: dict, audio: dict, vision: dict) -> dict:
    return {
        "model_type": "gemma4",
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": {
            "model_type": "gemma4_text",
            "vocab_size": vocab,
            "vocab_size_per_layer_input": vocab,
            "final_logit_softcapping": 30.0,
            "rope_parameters": ROPE,
            "attention_k_eq_v": False,
            **text,
        },
        "audio_config": {"model_type": "gemma4_audio", **audio},
        "vision_config": {"model_type": "gemma4_vision", **vision},
        "vision_soft_tokens_per_image": 280,
        "boi_token_id": ids["<|image>"],
        "eoi_token_id": ids["<image|>"],
        "image_token_id": ids["<|image|>"],
        "video_token_id": ids["<|video|>"],
        "boa_token_id": ids["<|audio>"],
        "eoa_token_id": ids["<audio|>"],
        "audio_token_id": ids["<|audio|>"],
        "eos_token_id": [1, ids["<turn|>"]],
    }


def _generation(ids: dict[str, int]):
    # convert_gemma4_weights.py: eos = <eos>, <turn|> and <|tool_response>; pad <pad>, bos <bos>; sampling.
    return generation_config(
        [1, ids["<turn|>"], ids["<|tool_response>"]],
        0,
        2,
        do_sample=True,
        temperature=1.0,
        top_k=64,
        top_p=0.95,
    )


def write(out_dir: Path, seed: int) -> Path:
    from transformers import Gemma4ForConditionalGeneration

    ids = relocate(GEMMA4_IDS, TINY_TEXT_VOCAB)
    data = _model_config(ids, TINY_TEXT_VOCAB, TINY_TEXT, TINY_AUDIO, TINY_VISION)
    model = _seeded_model(Gemma4ForConditionalGeneration, _config(data), seed)
    return save(Path(out_dir), model, _processor(ids, TINY_MEL_BINS), _generation(ids))


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import Gemma4ForConditionalGeneration

    text = depth(FULL_TEXT, num_layers)
    if num_layers is not None:  # the real pattern cut to length (the last layer full), a third sharing KV
        types = (["sliding_attention"] * 4 + ["full_attention"]) * 7
        text = {**text, "layer_types": [*types[: num_layers - 1], "full_attention"]}
        text["num_kv_shared_layers"] = num_layers // 3
    audio = {} if num_layers is None else {"num_hidden_layers": num_layers}
    data = _model_config(GEMMA4_IDS, TEXT_VOCAB, text, audio, depth(FULL_VISION, num_layers))
    model = _seeded_model(
        Gemma4ForConditionalGeneration, _config(data), seed, dtype or torch.bfloat16, device
    )
    model.generation_config = _generation(GEMMA4_IDS)
    return model, _processor(GEMMA4_IDS)


register(
    TinyFamily(
        name="gemma4",
        write=write,
        full_size=full_size,
        template_source="google/gemma-4-E4B-it chat_template.jinja as two public copies print it (not in "
        "transformers; the tool-declaration macros, used only with tools, left out)",
    )
)
