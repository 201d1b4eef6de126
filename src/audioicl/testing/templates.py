"""The text side of the tiny checkpoints: the families' real chat templates and the tiny tokenizer.

The chat templates are the real checkpoints' ``chat_template.json`` (sources next to each). The tokenizer is a
byte-level BPE (Qwen2's pre-tokenizer) learned from the benchmark's own prompt wording, at most ``VOCAB_SIZE``
tokens, with the family's special tokens added at the real ids or right after the learned ones.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

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


_CHATML = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # the Qwen2 vocabulary's own added tokens


def make_tokenizer(special_tokens: dict[str, int], named_tokens: dict[str, str], *, real_ids: bool):
    """A family's tokenizer: tiny BPE + its special tokens, at the real ids or right after the learned ones.

    ``special_tokens`` and ``named_tokens`` are the family's (``Family.special_tokens``, ``Family.named_tokens``).
    """
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer

    tokens, merges = _bpe()
    vocab = {token: i for i, token in enumerate(tokens)}
    specials = special_tokens if real_ids else {t: len(tokens) + i for i, t in enumerate(special_tokens)}
    vocab.update(specials)
    kwargs: dict[str, Any] = {}
    if named_tokens:
        kwargs["extra_special_tokens"] = dict(named_tokens)
    else:
        kwargs["extra_special_tokens"] = [t for t in special_tokens if t not in _CHATML]
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
