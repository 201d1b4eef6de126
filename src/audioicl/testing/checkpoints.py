"""Random-weight checkpoints of the three audio-language families, for tests and GPU performance work.

``tiny_checkpoint(family, out_dir)`` writes, offline and in seconds, a folder that loads exactly like the real
checkpoint: ``AutoProcessor.from_pretrained(dir)`` gives the family's processor class (tokenizer, 128-bin
``WhisperFeatureExtractor`` and, for the Omni families, image and video processors), and the family's model class
loads the weights with ``from_pretrained(dir)``. The model has 2 small layers but keeps the real audio encoder's
downsampling (Qwen2-Audio and Qwen2.5-Omni: 25 audio tokens per second; Qwen3-Omni: 13 per 100-frame second),
the real chat template and the real special tokens, so prompt rendering, placeholder expansion and
generation run through the same transformers code as the real models.

``full_size_model(family)`` builds the real full-size configuration (Qwen2-Audio-7B, the Qwen2.5-Omni-7B
thinker, the Qwen3-Omni-30B-A3B thinker) with random weights directly on the device, plus a processor whose
(tiny) tokenizer gives the special tokens the real ids, for throughput measurements where the weights do not
matter but the shapes and the cost do.

Where the real checkpoints' facts come from is cited next to each constant. Layouts of the real checkpoints:

- ``Qwen/Qwen2-Audio-7B-Instruct``: ``config.json`` of ``model_type`` ``qwen2_audio``
  (``Qwen2AudioForConditionalGeneration``), ``Qwen2AudioProcessor``; chat template in ``chat_template.json``.
- ``Qwen/Qwen2.5-Omni-7B``: ``model_type`` ``qwen2_5_omni`` with ``thinker_config`` (``qwen2_5_omni_thinker``),
  ``talker_config`` and ``token2wav_config`` inside and weights under ``thinker.``, ``talker.``, ``token2wav.``;
  ``Qwen2_5OmniProcessor``. ``Qwen2_5OmniThinkerForConditionalGeneration.from_pretrained`` reads the thinker
  part of such a folder.
- ``Qwen/Qwen3-Omni-30B-A3B-Instruct``: ``model_type`` ``qwen3_omni_moe`` with ``thinker_config``
  (``qwen3_omni_moe_thinker``), ``talker_config``, ``code2wav_config``; ``Qwen3OmniMoeProcessor``.

``thinker_only=False`` (the default for the Omni families) writes that full layout: the full Omni config with a
tiny talker and vocoder and the weights of the whole model, as ``save_pretrained`` of the full class writes them.
``thinker_only=True`` writes a thinker-only folder (``model_type`` ``qwen2_5_omni_thinker`` /
``qwen3_omni_moe_thinker``), the layout of thinker-only exports.

Needs the ``hf`` extra (torch, transformers, torchvision for the Omni processors' video processor).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

FAMILIES: tuple[str, ...] = ("qwen2-audio", "qwen2.5-omni", "qwen3-omni")

SAMPLE_RATE = 16_000
VOCAB_SIZE = 1000  # at most this many learned BPE tokens (the corpus gives 860), then the special tokens


# --------------------------------------------------------------------------- chat templates

# Qwen/Qwen2-Audio-7B-Instruct, chat_template.json. Source: the template transformers' own Qwen2-Audio processor
# test renders against the hub checkpoint (tests/models/qwen2_audio/test_processor_qwen2_audio.py, whose copy adds
# a `message['type'] == 'audio'` test) and lmms-eval's qwen2_audio model, which copies the hub template.
QWEN2_AUDIO_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% for message in messages %}{% if loop.first and "
    "message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "<|im_end|>\n{% else %}{% for content in message['content'] %}{% if 'audio' in content or 'audio_url' in "
    "content %}{% set audio_count.value = audio_count.value + 1 %}Audio {{ audio_count.value }}: "
    "<|audio_bos|><|AUDIO|><|audio_eos|>\n{% elif 'text' in content %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% endif %}"
)

# Qwen/Qwen2.5-Omni-7B, chat_template.json. Source: transformers tests/models/qwen2_5_omni/
# test_processor_qwen2_5_omni.py (prepare_processor_dict, used with the hub processor); the same text is quoted as
# the checkpoint's template, with added_tokens.json ids, in the AVoCaDO (Qwen2.5-Omni fine-tune) notes.
QWEN2_5_OMNI_TEMPLATE = (
    "{% set audio_count = namespace(value=0) %}{% set image_count = namespace(value=0) %}{% set video_count = "
    "namespace(value=0) %}{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n{% else %}{% for content in "
    "message['content'] %}{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}{% if add_vision_id %}Picture {{ image_count.value }}: "
    "{% endif %}<|vision_bos|><|IMAGE|><|vision_eos|>{% elif content['type'] == 'audio' or 'audio' in content "
    "or 'audio_url' in content %}{% set audio_count.value = audio_count.value + 1 %}{% if add_audio_id %}Audio "
    "{{ audio_count.value }}: {% endif %}<|audio_bos|><|AUDIO|><|audio_eos|>{% elif content['type'] == 'video' "
    "or 'video' in content %}{% set video_count.value = video_count.value + 1 %}{% if add_vision_id %}Video "
    "{{ video_count.value }}: {% endif %}<|vision_bos|><|VIDEO|><|vision_eos|>{% elif 'text' in content %}"
    "{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt "
    "%}<|im_start|>assistant\n{% endif %}"
)

# Qwen/Qwen3-Omni-30B-A3B-Instruct, chat_template.json: the Qwen3 (2507 Instruct) template with multimodal parts,
# as shipped with Qwen3-VL-30B-A3B-Instruct plus the audio part <|audio_start|><|audio_pad|><|audio_end|>.
# RECONSTRUCTED, not byte-verified: the hub file was not reachable from here. What the benchmark uses (a system
# message and one user message with string content, the generation prompt) renders as in every Qwen3 template:
# "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n".
QWEN3_OMNI_TEMPLATE = (
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {%- if messages[0].content is string %}\n"
    "            {{- messages[0].content }}\n"
    "        {%- else %}\n"
    "            {%- for content in messages[0].content %}\n"
    "                {%- if 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '\\n\\n' }}\n"
    "    {%- endif %}\n"
    '    {{- "# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided '
    'with function signatures within <tools></tools> XML tags:\\n<tools>" }}\n'
    "    {%- for tool in tools %}\n"
    '        {{- "\\n" }}\n'
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    '    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '
    'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": '
    '<args-json-object>}\\n</tool_call><|im_end|>\\n" }}\n'
    "{%- else %}\n"
    "    {%- if messages[0].role == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' }}\n"
    "        {%- if messages[0].content is string %}\n"
    "            {{- messages[0].content }}\n"
    "        {%- else %}\n"
    "            {%- for content in messages[0].content %}\n"
    "                {%- if 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- set image_count = namespace(value=0) %}\n"
    "{%- set video_count = namespace(value=0) %}\n"
    "{%- set audio_count = namespace(value=0) %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' }}\n"
    "        {%- if message.content is string %}\n"
    "            {{- message.content }}\n"
    "        {%- else %}\n"
    "            {%- for content in message.content %}\n"
    "                {%- if content.type == 'image' or 'image' in content or 'image_url' in content %}\n"
    "                    {%- set image_count.value = image_count.value + 1 %}\n"
    "                    {%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}\n"
    "                    <|vision_start|><|image_pad|><|vision_end|>\n"
    "                {%- elif content.type == 'audio' or 'audio' in content or 'audio_url' in content %}\n"
    "                    {%- set audio_count.value = audio_count.value + 1 %}\n"
    "                    {%- if add_audio_id %}Audio {{ audio_count.value }}: {% endif -%}\n"
    "                    <|audio_start|><|audio_pad|><|audio_end|>\n"
    "                {%- elif content.type == 'video' or 'video' in content %}\n"
    "                    {%- set video_count.value = video_count.value + 1 %}\n"
    "                    {%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}\n"
    "                    <|vision_start|><|video_pad|><|vision_end|>\n"
    "                {%- elif 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' }}\n"
    "        {%- if message.content is string %}\n"
    "            {{- message.content }}\n"
    "        {%- else %}\n"
    "            {%- for content in message.content %}\n"
    "                {%- if 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {%- if message.tool_calls %}\n"
    "            {%- for tool_call in message.tool_calls %}\n"
    "                {%- if (loop.first and message.content) or (not loop.first) %}\n"
    "                    {{- '\\n' }}\n"
    "                {%- endif %}\n"
    "                {%- if tool_call.function %}\n"
    "                    {%- set tool_call = tool_call.function %}\n"
    "                {%- endif %}\n"
    '                {{- \'<tool_call>\\n{"name": "\' }}\n'
    "                {{- tool_call.name }}\n"
    '                {{- \'", "arguments": \' }}\n'
    "                {%- if tool_call.arguments is string %}\n"
    "                    {{- tool_call.arguments }}\n"
    "                {%- else %}\n"
    "                    {{- tool_call.arguments | tojson }}\n"
    "                {%- endif %}\n"
    "                {{- '}\\n</tool_call>' }}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == 'tool' %}\n"
    "        {%- if loop.first or (messages[loop.index0 - 1].role != 'tool') %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {%- if message.content is string %}\n"
    "            {{- message.content }}\n"
    "        {%- else %}\n"
    "            {%- for content in message.content %}\n"
    "                {%- if 'text' in content %}\n"
    "                    {{- content.text }}\n"
    "                {%- endif %}\n"
    "            {%- endfor %}\n"
    "        {%- endif %}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n"
)


# --------------------------------------------------------------------------- the families


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


# Ids: Qwen2 vocabulary's added tokens (<|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645) and each
# checkpoint's audio/vision tokens, as in its added_tokens.json and the config ids below.
QWEN2_AUDIO = Family(
    name="qwen2-audio",
    model_class="Qwen2AudioForConditionalGeneration",
    full_class=None,
    processor_class="Qwen2AudioProcessor",
    chat_template=QWEN2_AUDIO_TEMPLATE,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|AUDIO|>": 151646,
        "<|audio_bos|>": 151647,
        "<|audio_eos|>": 151648,
    },
    audio_placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
    audio_token="<|AUDIO|>",
    chunk_length=30,  # n_samples 480000, nb_max_frames 3000: a 30 s encoder window
)
QWEN2_5_OMNI = Family(
    name="qwen2.5-omni",
    model_class="Qwen2_5OmniThinkerForConditionalGeneration",
    full_class="Qwen2_5OmniForConditionalGeneration",
    processor_class="Qwen2_5OmniProcessor",
    chat_template=QWEN2_5_OMNI_TEMPLATE,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|AUDIO|>": 151646,
        "<|audio_bos|>": 151647,
        "<|audio_eos|>": 151648,
        "<|vision_bos|>": 151652,
        "<|vision_eos|>": 151653,
        "<|vision_pad|>": 151654,
        "<|IMAGE|>": 151655,
        "<|VIDEO|>": 151656,
    },
    named_tokens={
        "image_token": "<|IMAGE|>",
        "audio_token": "<|AUDIO|>",
        "video_token": "<|VIDEO|>",
        "vision_bos_token": "<|vision_bos|>",
        "vision_eos_token": "<|vision_eos|>",
        "audio_bos_token": "<|audio_bos|>",
        "audio_eos_token": "<|audio_eos|>",
    },
    audio_placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
    audio_token="<|AUDIO|>",
    chunk_length=300,  # n_samples 4800000, nb_max_frames 30000
    image_patch_size=14,
)
QWEN3_OMNI = Family(
    name="qwen3-omni",
    model_class="Qwen3OmniMoeThinkerForConditionalGeneration",
    full_class="Qwen3OmniMoeForConditionalGeneration",
    processor_class="Qwen3OmniMoeProcessor",
    chat_template=QWEN3_OMNI_TEMPLATE,
    special_tokens={
        "<|endoftext|>": 151643,
        "<|im_start|>": 151644,
        "<|im_end|>": 151645,
        "<|vision_start|>": 151652,
        "<|vision_end|>": 151653,
        "<|vision_pad|>": 151654,
        "<|image_pad|>": 151655,
        "<|video_pad|>": 151656,
        "<|audio_start|>": 151669,
        "<|audio_end|>": 151670,
        "<|audio_pad|>": 151675,
    },
    named_tokens={
        "image_token": "<|image_pad|>",
        "audio_token": "<|audio_pad|>",
        "video_token": "<|video_pad|>",
        "vision_bos_token": "<|vision_start|>",
        "vision_eos_token": "<|vision_end|>",
        "audio_bos_token": "<|audio_start|>",
        "audio_eos_token": "<|audio_end|>",
    },
    audio_placeholder="<|audio_start|><|audio_pad|><|audio_end|>",
    audio_token="<|audio_pad|>",
    chunk_length=300,
    image_patch_size=16,
)
FAMILY_SPECS: dict[str, Family] = {f.name: f for f in (QWEN2_AUDIO, QWEN2_5_OMNI, QWEN3_OMNI)}


def family(name: str) -> Family:
    try:
        return FAMILY_SPECS[name]
    except KeyError:
        raise ValueError(f"unknown model family {name!r} (known: {', '.join(FAMILIES)})") from None


def audio_tokens(family_name: str, samples: int, longest: int | None = None) -> int:
    """Audio placeholder tokens the family's processor spends on a clip of ``samples`` at 16 kHz.

    The encoders' downsampling, written out from the real models: mel frames are 10 ms (160 samples), a started
    frame counts; Qwen2-Audio and Qwen2.5-Omni pad and cut every clip to their window (30 s, 300 s) and halve
    twice (a stride-2 convolution, then pooling: 25 tokens per second); Qwen3-Omni spends 13 tokens per full
    100-frame chunk and three stride-2 convolutions on the rest. Qwen3-Omni's processor pads only to the longest
    clip of the call (``longest``, default this clip) and drops that clip's last started frame: a clip's count
    can depend on its batch mates unless clip lengths are multiples of 160 samples.
    """
    spec = family(family_name)
    frames = -(-samples // 160)
    if spec.name == "qwen3-omni":
        frames = min(frames, max(samples, longest or 0) // 160)
        rest = frames % 100
        return frames // 100 * 13 + (((rest - 1) // 2 + 1 - 1) // 2 + 1 - 1) // 2 + 1
    frames = min(frames, spec.chunk_length * 100)
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


# --------------------------------------------------------------------------- configurations


def _tiny_configs(spec: Family, ids: dict[str, int], vocab: int, user_id: int) -> dict[str, Any]:
    """config.json content of the tiny model (the thinker's, for the Omni families)."""
    eos, pad = ids["<|im_end|>"], ids["<|endoftext|>"]
    if spec.name == "qwen2-audio":
        return {
            "model_type": "qwen2_audio",
            "architectures": ["Qwen2AudioForConditionalGeneration"],
            "audio_token_index": ids["<|AUDIO|>"],
            # The real encoder's frame rate and window (1500 positions = 30 s) with tiny widths.
            "audio_config": {
                "model_type": "qwen2_audio_encoder",
                "num_mel_bins": 128,
                "encoder_layers": 2,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 64,
                "d_model": 32,
                "max_source_positions": 1500,
            },
            "text_config": {
                "model_type": "qwen2",
                "vocab_size": vocab,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-5,
                "bos_token_id": pad,
                "eos_token_id": eos,
            },
        }
    if spec.name == "qwen2.5-omni":
        return {
            "model_type": "qwen2_5_omni_thinker",
            "architectures": ["Qwen2_5OmniThinkerForConditionalGeneration"],
            "audio_token_index": ids["<|AUDIO|>"],
            "image_token_index": ids["<|IMAGE|>"],
            "video_token_index": ids["<|VIDEO|>"],
            "audio_start_token_id": ids["<|audio_bos|>"],
            "audio_end_token_id": ids["<|audio_eos|>"],
            "vision_start_token_id": ids["<|vision_bos|>"],
            "vision_end_token_id": ids["<|vision_eos|>"],
            "vision_token_id": ids["<|vision_pad|>"],
            "user_token_id": user_id,
            "bos_token_id": ids["<|im_start|>"],
            "eos_token_id": eos,
            "pad_token_id": pad,
            "position_id_per_seconds": 25,
            "seconds_per_chunk": 2,
            "audio_config": {
                "model_type": "qwen2_5_omni_audio_encoder",
                "num_mel_bins": 128,
                "encoder_layers": 2,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 64,
                "d_model": 32,
                "max_source_positions": 1500,
                "n_window": 100,
                "output_dim": 64,
            },
            "vision_config": {
                "model_type": "qwen2_5_omni_vision_encoder",
                "depth": 2,
                "hidden_size": 32,
                "intermediate_size": 64,
                "num_heads": 2,
                "out_hidden_size": 64,
                "patch_size": spec.image_patch_size,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "window_size": 112,
                "fullatt_block_indexes": [1],
            },
            "text_config": {
                "model_type": "qwen2_5_omni_text",
                "vocab_size": vocab,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-6,
                # head_dim 16: the three M-RoPE sections (time, height, width) must add up to head_dim / 2.
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 1000000.0,
                    "mrope_section": [2, 3, 3],
                },
                "tie_word_embeddings": False,
            },
        }
    return {
        "model_type": "qwen3_omni_moe_thinker",
        "architectures": ["Qwen3OmniMoeThinkerForConditionalGeneration"],
        "audio_token_id": ids["<|audio_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "audio_start_token_id": ids["<|audio_start|>"],
        "audio_end_token_id": ids["<|audio_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "user_token_id": user_id,
        "position_id_per_seconds": 13,
        "seconds_per_chunk": 2,
        "audio_config": {
            "model_type": "qwen3_omni_moe_audio_encoder",
            "num_mel_bins": 128,
            "encoder_layers": 2,
            "encoder_attention_heads": 2,
            "encoder_ffn_dim": 64,
            "d_model": 32,
            "max_source_positions": 1500,
            # The real chunking (100 frames → 13 tokens), attention window and conv chunk size.
            "n_window": 50,
            "n_window_infer": 800,
            "conv_chunksize": 500,
            "downsample_hidden_size": 16,
            "output_dim": 64,
        },
        "vision_config": {
            "model_type": "qwen3_omni_moe_vision_encoder",
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
            "patch_size": spec.image_patch_size,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": [1],
        },
        "text_config": {
            "model_type": "qwen3_omni_moe_text",
            "vocab_size": vocab,
            "hidden_size": 64,
            "intermediate_size": 64,
            "moe_intermediate_size": 32,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [4, 2, 2],
                "interleaved": True,
            },
            "tie_word_embeddings": False,
        },
    }


def _tiny_full_omni(spec: Family, thinker: dict[str, Any], ids: dict[str, int]) -> dict[str, Any]:
    """The full Omni config.json around a tiny thinker: tiny talker and vocoder, real-layout keys."""
    thinker = copy.deepcopy(thinker)
    hidden = thinker["text_config"]["hidden_size"]
    if spec.name == "qwen2.5-omni":
        talker = {
            "model_type": "qwen2_5_omni_talker",
            "audio_token_index": ids["<|AUDIO|>"],
            "image_token_index": ids["<|IMAGE|>"],
            "video_token_index": ids["<|VIDEO|>"],
            "vision_start_token_id": ids["<|vision_bos|>"],
            "vision_end_token_id": ids["<|vision_eos|>"],
            "audio_start_token_id": ids["<|audio_bos|>"],
            "audio_end_token_id": ids["<|audio_eos|>"],
            "embedding_size": hidden,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 8448,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
        }
        token2wav = {
            "model_type": "qwen2_5_omni_token2wav",
            "dit_config": {
                "hidden_size": 32,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "head_dim": 16,
                "ff_mult": 2,
                "emb_dim": 16,
                "look_ahead_layers": [1],
                "look_backward_layers": [0],
                "enc_emb_dim": 16,
                "enc_dim": 16,
                "enc_channels": [16, 16, 16, 16, 48],
                "enc_attention_channels": 16,
                "enc_se_channels": 16,
            },
            "bigvgan_config": {"upsample_initial_channel": 32},
        }
        return {
            "model_type": "qwen2_5_omni",
            "architectures": ["Qwen2_5OmniForConditionalGeneration"],
            "thinker_config": thinker,
            "talker_config": talker,
            "token2wav_config": token2wav,
            "enable_audio_output": True,
        }
    talker = {
        "thinker_hidden_size": hidden,
        "accept_hidden_layer": 1,
        "num_code_groups": 4,
        "audio_token_id": ids["<|audio_pad|>"],
        "image_token_id": ids["<|image_pad|>"],
        "video_token_id": ids["<|video_pad|>"],
        "audio_start_token_id": ids["<|audio_start|>"],
        "audio_end_token_id": ids["<|audio_end|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "position_id_per_seconds": 13,
        "seconds_per_chunk": 2,
        "spatial_merge_size": 2,
        "speaker_id": {"chelsie": 2301, "ethan": 2302, "aiden": 2303},
        "text_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "moe_intermediate_size": 16,
            "shared_expert_intermediate_size": 32,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 3072,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [4, 2, 2],
                "interleaved": True,
            },
        },
        "code_predictor_config": {
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "vocab_size": 2048,
            "num_code_groups": 4,
        },
    }
    code2wav = {
        "codebook_size": 2048,
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "num_quantizers": 4,
        "decoder_dim": 32,
        "upsample_rates": [2, 2, 2, 2],
        "upsampling_ratios": [2, 2],
    }
    return {
        "model_type": "qwen3_omni_moe",
        "architectures": ["Qwen3OmniMoeForConditionalGeneration"],
        "thinker_config": thinker,
        "talker_config": talker,
        "code2wav_config": code2wav,
        "enable_audio_output": True,
        "im_start_token_id": ids["<|im_start|>"],
        "im_end_token_id": ids["<|im_end|>"],
        "user_token_id": thinker["user_token_id"],
    }


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
def _full_configs(spec: Family, num_layers: int | None) -> dict[str, Any]:
    if spec.name == "qwen2-audio":
        cfg = {
            "model_type": "qwen2_audio",
            "architectures": ["Qwen2AudioForConditionalGeneration"],
            "audio_token_index": 151646,
            "audio_config": {
                "model_type": "qwen2_audio_encoder",
                "num_mel_bins": 128,
                "encoder_layers": 32,
                "encoder_attention_heads": 20,
                "encoder_ffn_dim": 5120,
                "d_model": 1280,
                "max_source_positions": 1500,
            },
            "text_config": {
                "model_type": "qwen2",
                "vocab_size": 156032,
                "hidden_size": 4096,
                "intermediate_size": 11008,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 32,
                "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-5,
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
                "bos_token_id": 151643,
                "eos_token_id": 151645,
            },
        }
    elif spec.name == "qwen2.5-omni":
        cfg = {
            "model_type": "qwen2_5_omni_thinker",
            "architectures": ["Qwen2_5OmniThinkerForConditionalGeneration"],
            "audio_token_index": 151646,
            "image_token_index": 151655,
            "video_token_index": 151656,
            "audio_start_token_id": 151647,
            "audio_end_token_id": 151648,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "vision_token_id": 151654,
            "user_token_id": 872,
            "bos_token_id": 151644,
            "eos_token_id": 151645,
            "pad_token_id": 151643,
            "position_id_per_seconds": 25,
            "seconds_per_chunk": 2,
            "audio_config": {
                "model_type": "qwen2_5_omni_audio_encoder",
                "num_mel_bins": 128,
                "encoder_layers": 32,
                "encoder_attention_heads": 20,
                "encoder_ffn_dim": 5120,
                "d_model": 1280,
                "max_source_positions": 1500,
                "n_window": 100,
                "output_dim": 3584,
            },
            "vision_config": {
                "model_type": "qwen2_5_omni_vision_encoder",
                "depth": 32,
                "hidden_size": 1280,
                "intermediate_size": 3420,
                "num_heads": 16,
                "out_hidden_size": 3584,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "window_size": 112,
                "fullatt_block_indexes": [7, 15, 23, 31],
            },
            "text_config": {
                "model_type": "qwen2_5_omni_text",
                "vocab_size": 152064,
                "hidden_size": 3584,
                "intermediate_size": 18944,
                "num_hidden_layers": 28,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-6,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 1000000.0,
                    "mrope_section": [16, 24, 24],
                },
                "tie_word_embeddings": False,
            },
        }
    else:
        cfg = {
            "model_type": "qwen3_omni_moe_thinker",
            "architectures": ["Qwen3OmniMoeThinkerForConditionalGeneration"],
            "audio_token_id": 151675,
            "image_token_id": 151655,
            "video_token_id": 151656,
            "audio_start_token_id": 151669,
            "audio_end_token_id": 151670,
            "vision_start_token_id": 151652,
            "vision_end_token_id": 151653,
            "user_token_id": 872,
            "position_id_per_seconds": 13,
            "seconds_per_chunk": 2,
            "audio_config": {
                "model_type": "qwen3_omni_moe_audio_encoder",
                "num_mel_bins": 128,
                "encoder_layers": 32,
                "encoder_attention_heads": 20,
                "encoder_ffn_dim": 5120,
                "d_model": 1280,
                "max_source_positions": 1500,
                "n_window": 50,
                "n_window_infer": 800,
                "conv_chunksize": 500,
                "downsample_hidden_size": 480,
                "output_dim": 2048,
            },
            "vision_config": {
                "model_type": "qwen3_omni_moe_vision_encoder",
                "depth": 27,
                "hidden_size": 1152,
                "intermediate_size": 4304,
                "num_heads": 16,
                "out_hidden_size": 2048,
                "patch_size": 16,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
                "num_position_embeddings": 2304,
                "deepstack_visual_indexes": [8, 16, 24],
            },
            "text_config": {
                "model_type": "qwen3_omni_moe_text",
                "vocab_size": 152064,
                "hidden_size": 2048,
                "intermediate_size": 768,
                "moe_intermediate_size": 768,
                "num_experts": 128,
                "num_experts_per_tok": 8,
                "norm_topk_prob": True,
                "num_hidden_layers": 48,
                "num_attention_heads": 32,
                "num_key_value_heads": 4,
                "head_dim": 128,
                "max_position_embeddings": 65536,
                "rms_norm_eps": 1e-6,
                "rope_parameters": {
                    "rope_type": "default",
                    "rope_theta": 1000000.0,
                    "mrope_section": [24, 20, 20],
                    "interleaved": True,
                },
                "tie_word_embeddings": False,
            },
        }
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


# --------------------------------------------------------------------------- tokenizer


def _corpus() -> list[str]:
    """English text with digits for the tiny tokenizer: the benchmark's own prompt wording and more."""
    from audioicl.prompts.clips import MORSE_LETTERS
    from audioicl.prompts.sets import DEFAULT_SYSTEM, GENERAL_INSTRUCTION
    from audioicl.tasks import TASKS

    lines = [*sorted(set(DEFAULT_SYSTEM.values())), GENERAL_INSTRUCTION]
    lines += [TASKS.get(name).instruction for name in TASKS.names()]
    lines += [f"{role}\n" for role in ("system", "user", "assistant")] * 50
    lines += [f"[Demo Audio {i}] Label: {i * 7 % 23}" for i in range(1, 40)]
    lines += [f"[Query Audio] Label: {n}" for n in range(100)]
    lines += [f"[Letter {c}] Label: {c}" for c in MORSE_LETTERS]
    lines += [
        "The quick brown fox jumps over the lazy dog. Count the events, measure how long the sound lasts, "
        "and say whether the machine sounds normal or anomalous. Numbers such as 3, 14, 159, 2653 and 58979 "
        "appear in answers. A clip of 1.5 seconds, 20 beats, 7 clicks; the answer is 12. Hello world!",
        "Listen to each recording carefully. Kick drums, snares, hi-hats, claps, cowbells and toms play short "
        "patterns; rain, wind, traffic, birds, a crowd and a cafe make the background. Fans, pumps, valves, "
        "sliders, gearboxes, bearings and toy cars may rattle, hum, squeal or knock when something is wrong.",
        "Please answer with one word only. What is the total? It was 0, then 1, 2, 4, 8, 16, 32, 64, 128, 256, "
        "512 and 1024. Which letters do you hear: A, B or C? Spell the word in Morse code: dots and dashes.",
    ] * 5
    return lines


@lru_cache(maxsize=1)
def _bpe() -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Learned tokens and merges of the tiny byte-level BPE (Qwen2's pre-tokenizer), trained once per process."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_corpus(), trainer)
    model = json.loads(tok.to_str())["model"]
    tokens = tuple(sorted(model["vocab"], key=model["vocab"].get))
    merges = tuple(tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"])
    return tokens, merges  # type: ignore[return-value]


def _tokenizer(spec: Family, real_ids: bool):
    """The family's tokenizer: tiny BPE + the special tokens, at the real ids or right after the learned ones."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    tokens, merges = _bpe()
    vocab = {token: i for i, token in enumerate(tokens)}
    specials = (
        spec.special_tokens if real_ids else {t: len(tokens) + i for i, t in enumerate(spec.special_tokens)}
    )
    vocab.update(specials)
    kwargs: dict[str, Any] = {}
    if spec.named_tokens:
        kwargs["extra_special_tokens"] = dict(spec.named_tokens)
    else:
        kwargs["extra_special_tokens"] = [t for t in spec.special_tokens if t not in _CHATML]
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=list(merges),
        unk_token=None,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=32768,
        **kwargs,
    )
    # Every family token is special (never split, skipped when decoding), as in the real tokenizer_config.json.
    tokenizer.add_tokens(
        [AddedToken(t, special=True, normalized=False) for t in specials], special_tokens=True
    )
    missing = {t: i for t, i in specials.items() if tokenizer.convert_tokens_to_ids(t) != i}
    if missing:
        raise RuntimeError(f"special tokens did not get their ids: {missing}")
    return tokenizer


_CHATML = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


# --------------------------------------------------------------------------- processor


def _processor(spec: Family, real_ids: bool):
    """The family's processor class around the tiny tokenizer, with the real feature extractor settings."""
    import transformers

    feature_extractor = transformers.WhisperFeatureExtractor(
        feature_size=128,
        sampling_rate=SAMPLE_RATE,
        hop_length=160,
        chunk_length=spec.chunk_length,
        n_fft=400,
        padding_value=0.0,
        return_attention_mask=True,
    )
    parts: dict[str, Any] = {"feature_extractor": feature_extractor, "tokenizer": _tokenizer(spec, real_ids)}
    if spec.named_tokens:
        # The Omni processors hold image and video processors even for audio-only use (the video processor
        # needs torchvision). Patch sizes as the real preprocessor_config.json: 14 (Qwen2.5-Omni), 16 (Qwen3-Omni).
        vision = {"patch_size": spec.image_patch_size, "temporal_patch_size": 2, "merge_size": 2}
        parts["image_processor"] = transformers.Qwen2VLImageProcessor(**vision)
        parts["video_processor"] = transformers.Qwen2VLVideoProcessor(**vision)
    return getattr(transformers, spec.processor_class)(chat_template=spec.chat_template, **parts)


# --------------------------------------------------------------------------- models


def _config(data: dict[str, Any]):
    """A transformers config object from config.json content (its ``model_type`` picks the class)."""
    from transformers import AutoConfig

    data = copy.deepcopy(data)
    return AutoConfig.for_model(data.pop("model_type"), **data)


def _model_class(name: str):
    import transformers

    return getattr(transformers, name)


def _seeded_model(cls, config, seed: int, dtype: Any = None, device: Any = None):
    """``cls(config)`` with weights drawn from torch's generator seeded with ``seed``; the global state is kept.

    Parameters that transformers' own initialisation leaves as allocated memory (transformers 5.24 does so for
    the Qwen3-Omni talker's experts) would make the weights differ from run to run: they are allocated as NaN
    (torch's deterministic mode) and then drawn from N(0, 0.02) like the rest.
    """
    import torch

    deterministic = torch.are_deterministic_algorithms_enabled()
    with torch.random.fork_rng(devices=[]), torch.device(device or "cpu"):
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            model = cls._from_config(config, dtype=dtype or torch.float32)
        finally:
            torch.use_deterministic_algorithms(deterministic)
        if device != "meta":
            with torch.no_grad():
                for tensor in (*model.parameters(), *model.buffers()):
                    if tensor.is_floating_point() and bool(tensor.isnan().any()):
                        tensor.normal_(0.0, 0.02)
    return model.eval()


def _user_token_id(tokenizer) -> int:
    (user,) = tokenizer("user", add_special_tokens=False).input_ids
    return user


def _with_head_dim(thinker: dict[str, Any], head_dim: int) -> dict[str, Any]:
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


def tiny_checkpoint(
    family_name: str,
    out_dir: str | Path,
    seed: int = 0,
    *,
    thinker_only: bool = False,
    head_dim: int | None = None,
) -> Path:
    """Write a tiny random-weight checkpoint of ``family_name`` to ``out_dir`` and return the folder.

    Loads with ``AutoProcessor.from_pretrained(out_dir)`` and ``<Family.model_class>.from_pretrained(out_dir)``.
    The same ``seed`` writes the same weights. ``thinker_only`` (Omni families) writes a thinker-only folder
    instead of the full Omni layout of the real checkpoints. ``head_dim`` (default: 16, the tiny width) sets
    the text model's attention head size; vLLM's CPU attention needs 64.
    """
    spec = family(family_name)
    if thinker_only and spec.full_class is None:
        raise ValueError(f"{family_name} has no thinker: thinker_only applies to the Omni families")
    out = Path(out_dir)
    processor = _processor(spec, real_ids=False)
    tokenizer = processor.tokenizer
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in spec.special_tokens}
    thinker = _tiny_configs(spec, ids, vocab=len(tokenizer), user_id=_user_token_id(tokenizer))
    if head_dim is not None:
        thinker = _with_head_dim(thinker, head_dim)
    model = _seeded_model(_model_class(spec.model_class), _config(thinker), seed)
    if spec.full_class is not None and not thinker_only:
        # The same thinker weights in both layouts: a test of one layout holds for the other.
        full = _seeded_model(
            _model_class(spec.full_class), _config(_tiny_full_omni(spec, thinker, ids)), seed
        )
        full.thinker.load_state_dict(model.state_dict())
        model = full
    model.generation_config = _generation_config(ids)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _generation_config(ids: dict[str, int]):
    """Stop at <|im_end|> or <|endoftext|>, pad with <|endoftext|>, as the real generation_config.json."""
    from transformers import GenerationConfig

    return GenerationConfig(
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
    )


def full_size_config(family_name: str, *, num_layers: int | None = None):
    """The real full-size configuration (the thinker's, for the Omni families) as a transformers config.

    ``num_layers`` overrides the depth of the text model and of the audio and vision encoders (for tests).
    """
    return _config(_full_configs(family(family_name), num_layers))


def full_size_model(
    family_name: str,
    device: Any = "cuda",
    dtype: Any = None,
    *,
    num_layers: int | None = None,
    seed: int = 0,
):
    """``(model, processor)``: the full-size model with random weights made on ``device``, and its processor.

    The weights are created on the device directly (no CPU copy of 30 B parameters), in ``dtype`` (default
    bfloat16). The processor's tokenizer is the tiny one, with the special tokens at the real ids, so prompts
    rendered by it are valid input for the full-size model (their ordinary text uses only the first ids of the
    vocabulary). ``device="meta"`` builds the structure without memory.
    """
    import torch

    spec = family(family_name)
    config = full_size_config(family_name, num_layers=num_layers)
    model = _seeded_model(_model_class(spec.model_class), config, seed, dtype or torch.bfloat16, device)
    model.generation_config = _generation_config(spec.special_tokens)
    return model, _processor(spec, real_ids=True)
