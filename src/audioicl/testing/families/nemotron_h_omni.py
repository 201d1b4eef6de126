"""Nemotron-H Omni (``nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16``): a tiny checkpoint.

The real checkpoint as transformers 5.25 reads it: ``NemotronH_Omni_Reasoning_V3Processor`` with a
``ParakeetFeatureExtractor`` (128 mel bins, the Parakeet-TDT-0.6B encoder's), the image and video processors of
the family, a ChatML tokenizer with ``<so_embedding>`` (expanded to ``<so_start>`` + one per 80 ms +
``<so_end>``), ``<image>``, ``<img>``/``</img>`` and ``<think>``/``</think>``; a RADIO vision tower, a Parakeet
encoder (8x subsampling) and the hybrid Mamba/MoE/attention ``nemotron_h`` text model. The tokenizer here is
the tiny Qwen2 BPE with those tokens (the real one is Nemotron's 131,072-token BPE; its ids were not found).
The full-size builder takes its numbers from the BF16 checkpoint's config.json as a public transcription of it
prints them (``llm_config``, ``sound_config``, ``vision_config``: C-RADIOv4-H, a ViT-H/16); its tokenizer stays the
tiny one, so the special tokens are not at the real ids (unknown here), which changes no shape or cost.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from audioicl.testing.weights import config_from as _config
from audioicl.testing.weights import seeded_model as _seeded_model

from . import TinyFamily, register
from .audioflamingo3 import CHATML_IDS, chatml_tokenizer, depth, generation_config, save

# The chat template of the text model, NVIDIA-Nemotron-3-Nano-30B-A3B (as public copies of its tokenizer_config
# print it: the system turn always written, assistant turns of earlier exchanges given an empty
# ``<think></think>``, the generation prompt opening ``<think>\n`` unless ``enable_thinking`` is false), without
# its tool macros (rendered only for ``tools``). That template writes a list content with ``| string`` (NVIDIA's
# Megatron-Bridge ``nemotron_omni_collate_fn`` says the Omni checkpoint's does so too, and writes ``<so_embedding>``
# into string content itself); the Omni checkpoint's own file was not found, so this one adds what a parts
# conversation needs: a list content is its text parts, each audio part ``<so_embedding>``, each image ``<image>``.
NEMOTRON_TEMPLATE = (
    "{%- macro content_text(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- elif part['type'] == 'audio' -%}{{- '<so_embedding>' -}}"
    "{%- elif part['type'] == 'image' -%}{{- '<image>' -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}\n"
    "{%- set enable_thinking = enable_thinking if enable_thinking is defined else True %}\n"
    "{%- set truncate_history_thinking = truncate_history_thinking if truncate_history_thinking is defined "
    "else True %}\n"
    '{%- if messages[0]["role"] == "system" %}\n'
    '    {%- set system_message = content_text(messages[0]["content"]) %}\n'
    "    {%- set loop_messages = messages[1:] %}\n"
    "{%- else %}\n"
    '    {%- set system_message = "" %}\n'
    "    {%- set loop_messages = messages %}\n"
    "{%- endif %}\n"
    "{%- set ns = namespace(last_user_idx = -1) %}\n"
    "{%- for m in loop_messages %}\n"
    '  {%- if m["role"] == "user" %}\n'
    "    {%- set ns.last_user_idx = loop.index0 %}\n"
    "  {%- endif %}\n"
    "{%- endfor %}\n"
    '{{- "<|im_start|>system\\n" + system_message }}\n'
    "{{- '<|im_end|>\\n' }}\n"
    "{%- for message in loop_messages %}\n"
    '    {%- if message.role == "assistant" %}\n'
    "        {%- set content = content_text(message.content | default('', true)) %}\n"
    "        {%- if '<think>' not in content and '</think>' not in content -%}\n"
    '            {%- set content = "<think></think>" ~ content -%}\n'
    "        {%- endif -%}\n"
    "        {%- if not (truncate_history_thinking and loop.index0 < ns.last_user_idx) %}\n"
    "            {{- '<|im_start|>assistant\\n' ~ (content | trim) ~ '<|im_end|>\\n' }}\n"
    "        {%- else %}\n"
    "            {%- set c = content %}\n"
    "            {%- if '<think>' in c and '</think>' in c %}\n"
    "                {%- set c = \"<think></think>\" ~ c.split('</think>')[-1] %}\n"
    "            {%- endif %}\n"
    "            {%- set c = c | trim %}\n"
    "            {%- if c | length > 0 %}\n"
    "                {{- '<|im_start|>assistant\\n' ~ c ~ '<|im_end|>\\n' }}\n"
    "            {%- else %}\n"
    "                {{- '<|im_start|>assistant\\n<|im_end|>\\n' }}\n"
    "            {%- endif %}\n"
    "        {%- endif %}\n"
    '    {%- elif message.role == "user" or message.role == "system" %}\n'
    "        {{- '<|im_start|>' + message.role + '\\n' }}\n"
    "        {{- content_text(message.content) }}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {%- if enable_thinking %}\n"
    "        {{- '<|im_start|>assistant\\n<think>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>assistant\\n<think></think>' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}"
)

TOKENS = [
    *CHATML_IDS,
    "<image>",
    "<img>",
    "</img>",
    "<video>",
    "<so_embedding>",
    "<so_start>",
    "<so_end>",
    "<think>",
    "</think>",
]
NAMED = {"image_token": "<image>", "video_token": "<video>", "audio_token": "<so_embedding>"}

TINY_TEXT = {
    "hidden_size": 64,
    "layers_block_type": ["linear_attention", "moe", "full_attention"],  # Mamba-2, MoE, attention
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "intermediate_size": 128,
    "mamba_num_heads": 4,
    "mamba_head_dim": 16,
    "ssm_state_size": 16,
    "n_groups": 2,
    "chunk_size": 16,
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "moe_shared_expert_intermediate_size": 32,
}
# The Parakeet encoder with its real subsampling (factor 8, three stride-2 convolutions) and 128 mel bins.
TINY_AUDIO = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "subsampling_conv_channels": 8,
    "num_mel_bins": 128,
    "subsampling_factor": 8,
    "projection_hidden_size": 64,
    "projection_bias": False,
}
# The checkpoint's llm_config: 52 layers, 23 Mamba-2 (M), 23 MoE (E), 6 attention (*).
FULL_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
FULL_TEXT = {
    "vocab_size": 131072,
    "hidden_size": 2688,
    "hybrid_override_pattern": FULL_PATTERN,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "intermediate_size": 1856,
    "mlp_hidden_act": "relu2",
    "mamba_num_heads": 64,
    "mamba_head_dim": 64,
    "n_groups": 8,
    "ssm_state_size": 128,
    "conv_kernel": 4,
    "expand": 2,
    "chunk_size": 128,
    "n_routed_experts": 128,
    "num_experts_per_tok": 6,
    "moe_intermediate_size": 1856,
    "n_shared_experts": 1,
    "moe_shared_expert_intermediate_size": 3712,
    "norm_topk_prob": True,
    "routed_scaling_factor": 2.5,
    "layer_norm_epsilon": 1e-05,
    "tie_word_embeddings": False,
}
FULL_AUDIO = {
    "hidden_size": 1024,
    "num_hidden_layers": 24,
    "num_attention_heads": 8,
    "intermediate_size": 4096,
    "conv_kernel_size": 9,
    "convolution_bias": False,
    "subsampling_conv_channels": 256,
    "subsampling_conv_kernel_size": 3,
    "subsampling_conv_stride": 2,
    "subsampling_factor": 8,
    "num_mel_bins": 128,
    "projection_hidden_size": 4096,
    "projection_bias": False,
}
FULL_VISION = {  # vit_huge_patch16: 32 layers, 1280 wide, 16 heads; 4 teachers' CLS tokens and 6 registers
    "hidden_size": 1280,
    "num_hidden_layers": 32,
    "num_attention_heads": 16,
    "patch_size": 16,
    "image_size": 768,
    "num_cls_tokens": 4,
    "num_registers": 6,
    "video_temporal_patch_size": 2,
}
FULL_PROJECTOR = 20480

TINY_VISION = {
    "hidden_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 64,
    "video_temporal_patch_size": 2,
}


def _processor():
    from transformers import (
        NemotronH_Omni_Reasoning_V3ImageProcessor,
        NemotronH_Omni_Reasoning_V3Processor,
        NemotronH_Omni_Reasoning_V3VideoProcessor,
        ParakeetFeatureExtractor,
    )

    tokenizer = chatml_tokenizer(dict.fromkeys(TOKENS, 0), NAMED, real_ids=False)
    return NemotronH_Omni_Reasoning_V3Processor(
        image_processor=NemotronH_Omni_Reasoning_V3ImageProcessor(),
        video_processor=NemotronH_Omni_Reasoning_V3VideoProcessor(),
        tokenizer=tokenizer,
        feature_extractor=ParakeetFeatureExtractor(feature_size=128),
        chat_template=NEMOTRON_TEMPLATE,
    )


def _model_config(tokenizer, text=None, audio=None, vision=None, projector: int = 64) -> dict:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in TOKENS}
    text, audio, vision = text or TINY_TEXT, audio or TINY_AUDIO, vision or TINY_VISION
    return {
        "model_type": "nemotron_h_omni",
        "architectures": ["NemotronH_Omni_Reasoning_V3"],
        "text_config": {
            "model_type": "nemotron_h",
            "vocab_size": len(tokenizer),
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            **text,
        },
        "audio_config": {"model_type": "parakeet_encoder", **audio},
        "vision_config": {"model_type": "radio", **vision},
        "vision_hidden_size": vision["hidden_size"],
        "projector_hidden_size": projector,
        "image_token_id": ids["<image>"],
        "video_token_id": ids["<video>"],
        "audio_token_id": ids["<so_embedding>"],
    }


def write(out_dir: Path, seed: int) -> Path:
    from transformers import NemotronH_Omni_Reasoning_V3

    processor = _processor()
    tokenizer = processor.tokenizer
    model = _seeded_model(NemotronH_Omni_Reasoning_V3, _config(_model_config(tokenizer)), seed)
    # The turn ends with <|im_end|> (the template's), padding with the tokenizer's pad token.
    return save(Path(out_dir), model, processor, _generation(tokenizer))


def _generation(tokenizer):
    return generation_config(
        tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.convert_tokens_to_ids("<|endoftext|>")
    )


def full_size(device: Any, dtype: Any = None, num_layers: int | None = None, seed: int = 0):
    import torch
    from transformers import NemotronH_Omni_Reasoning_V3

    processor = _processor()
    text = FULL_TEXT
    if num_layers is not None:  # the real pattern cut to length
        text = {**FULL_TEXT, "hybrid_override_pattern": FULL_PATTERN[:num_layers]}
    audio = depth(FULL_AUDIO, num_layers)
    vision = depth(FULL_VISION, num_layers)
    data = _model_config(processor.tokenizer, text, audio, vision, FULL_PROJECTOR)
    data["text_config"]["vocab_size"] = FULL_TEXT["vocab_size"]
    model = _seeded_model(NemotronH_Omni_Reasoning_V3, _config(data), seed, dtype or torch.bfloat16, device)
    model.generation_config = _generation(processor.tokenizer)
    return model, processor


register(
    TinyFamily(
        name="nemotron_h_omni",
        write=write,
        full_size=full_size,
        template_source="not the checkpoint's (not found): NVIDIA-Nemotron-3-Nano-30B-A3B's chat template as public "
        "copies print it, tool macros left out, with text/audio/image parts written as text, <so_embedding>, <image>",
    )
)
