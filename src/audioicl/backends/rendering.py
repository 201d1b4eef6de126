"""One rendering of a typed chat into a model family's prompt text, shared by every model backend.

The original (SPEC §4) writes each clip's audio placeholder inline in the user text
(``[Demo Audio 1] <|audio_bos|><|AUDIO|><|audio_eos|> Label: 7``) and renders the messages, as plain strings,
with the model's own chat template and the generation prompt. String content matters: the templates'
list-of-parts path adds text of its own (Qwen2-Audio's writes ``Audio 1: `` before each clip).

``AudioFamily`` holds what differs between model families: the placeholder, the system-prompt family, the
encoder's window and its audio tokens per second. The ``hf`` and ``vllm`` backends both render through
``render_chat``; only how the text and the waves reach the model differs. What else they share is here too:
loading the processor (whose chat template renders), the stop tokens, the clip window, the config hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat, message_text


@dataclass(frozen=True)
class AudioFamily:
    """``model_types``: the ``config.json`` model types of the family; ``thinker_of``: for a full Omni
    checkpoint, the sub-config holding the text-producing model (SPEC §6); ``system_family``: which
    system prompt it gets (``prompts.sets.DEFAULT_SYSTEM``)."""

    name: str
    model_types: tuple[str, ...]
    model_class: str  # the transformers class that produces text
    system_family: str
    placeholder: str  # the audio placeholder as written in the prompt text
    audio_token: str  # the token the processor repeats once per audio frame
    thinker_of: tuple[str, ...] = ()  # model types whose checkpoint holds the model under ``thinker``
    # True where the audio encoder keeps only the frames its feature mask marks (the Omni thinkers): the
    # processor's padding beyond them is then never seen, and need not be stored or sent.
    encoder_reads_valid_frames: bool = False
    # True where the processor pads every clip to its window, so a clip's features are the same whatever
    # else is in the call, and clips can be extracted many at a time.
    features_independent_of_batch: bool = False


FAMILIES: tuple[AudioFamily, ...] = (
    AudioFamily(
        name="qwen2-audio",
        model_types=("qwen2_audio",),
        model_class="Qwen2AudioForConditionalGeneration",
        system_family="qwen2-audio",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        features_independent_of_batch=True,
    ),
    AudioFamily(
        name="qwen2.5-omni",
        model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
        model_class="Qwen2_5OmniThinkerForConditionalGeneration",
        system_family="qwen2.5-omni",
        placeholder="<|audio_bos|><|AUDIO|><|audio_eos|>",
        audio_token="<|AUDIO|>",
        thinker_of=("qwen2_5_omni",),
        encoder_reads_valid_frames=True,
        features_independent_of_batch=True,
    ),
    AudioFamily(
        name="qwen3-omni",
        model_types=("qwen3_omni_moe", "qwen3_omni_moe_thinker"),
        model_class="Qwen3OmniMoeThinkerForConditionalGeneration",
        system_family="qwen3-omni",
        placeholder="<|audio_start|><|audio_pad|><|audio_end|>",
        audio_token="<|audio_pad|>",
        thinker_of=("qwen3_omni_moe",),
        encoder_reads_valid_frames=True,
    ),
)


def family_of(model_type: str) -> AudioFamily | None:
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def generic_family(model_type: str, processor: Any) -> AudioFamily:
    """The family of an audio chat model we know nothing of, from its processor's audio tokens
    (``audio_bos_token`` + ``audio_token`` + ``audio_eos_token``, as the Qwen processors name them)."""
    token = getattr(processor, "audio_token", None)
    if not isinstance(token, str):
        raise AudioICLError(
            f"model_type {model_type!r}: its processor names no audio token (processor.audio_token), so "
            "audioicl cannot place audio in its prompt; supported: "
            + ", ".join(t for f in FAMILIES for t in f.model_types)
        )
    bos = getattr(processor, "audio_bos_token", None) or ""
    eos = getattr(processor, "audio_eos_token", None) or ""
    return AudioFamily(
        name=model_type,
        model_types=(model_type,),
        model_class="",
        system_family="default",
        placeholder=f"{bos}{token}{eos}",
        audio_token=token,
    )


def chat_messages(chat: Chat, placeholder: str) -> list[dict[str, str]]:
    """The chat as template messages with string content, each audio part written as ``placeholder``."""
    return [{"role": m.role, "content": message_text(m, placeholder)} for m in chat.messages]


TemplateFn = Callable[..., str]


def render_chat(
    chat: Chat, family: AudioFamily, apply_chat_template: TemplateFn
) -> tuple[str, list[AudioPart]]:
    """The prompt text (chat template applied, generation prompt added) and the clips in the order their
    placeholders appear. ``apply_chat_template``: the tokenizer's or processor's own method."""
    text = apply_chat_template(
        chat_messages(chat, family.placeholder), tokenize=False, add_generation_prompt=True
    )
    clips = list(chat.audio_parts())
    found = text.count(family.placeholder)
    if found != len(clips):
        raise AudioICLError(
            f"the chat template wrote {found} audio placeholders for {len(clips)} clips "
            f"({family.placeholder!r}); does the text contain the placeholder, or drop a message?"
        )
    return text, clips


def load_processor(name: str, trust_remote_code: bool = False) -> Any:
    """The checkpoint's processor (transformers ``AutoProcessor``, whose chat template the backends render
    with); refused when it has no feature extractor (a folder whose processor loads as a bare tokenizer would
    silently ignore every clip). Its tokenizer pads on the left, for batched generation."""
    import transformers

    try:
        processor = transformers.AutoProcessor.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, ImportError) as exc:
        raise AudioICLError(f"cannot load the processor of {name}: {exc}") from exc
    if getattr(processor, "feature_extractor", None) is None:
        raise AudioICLError(
            f"{name}: its processor loads as {type(processor).__name__}, with no audio feature extractor; "
            "an audio model's folder needs preprocessor_config.json (and processor_config.json)"
        )
    if getattr(processor, "tokenizer", None) is not None:
        processor.tokenizer.padding_side = "left"
    return processor


def stop_token_ids(tokenizer: Any, configured: int | Sequence[int] | None) -> list[int]:
    """The tokens that end an answer, the same for every backend: the tokenizer's end of sequence, ChatML's
    ``<|im_end|>`` (every family here ends a turn with it) and the generation config's ``eos_token_id``."""
    ids = {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")}
    ids.update(configured if isinstance(configured, list | tuple) else [configured])
    unknown = tokenizer.unk_token_id
    return sorted(i for i in ids if isinstance(i, int) and i != unknown)


def clip_window_seconds(processor: Any) -> float | None:
    """The longest clip the processor's feature extractor takes whole (Qwen2-Audio: 30 s); None: any."""
    extractor = processor.feature_extractor
    window = getattr(extractor, "n_samples", None)
    return window / int(extractor.sampling_rate) if window else None


def config_sha256(name: str, config: Any) -> str:
    """Hash of the checkpoint's ``config.json`` (the file when ``name`` is a folder, else as loaded)."""
    path = Path(name) / "config.json"
    data = path.read_bytes() if path.is_file() else config.to_json_string().encode()
    return hashlib.sha256(data).hexdigest()


def decode_answer(
    tokenizer: Any, tokens: Sequence[int], stop_ids: Sequence[int], stop: Sequence[str]
) -> tuple[str, int]:
    """The answer's text and token count, the same way for every backend: the generated tokens up to the
    first stop token, decoded whole (special tokens skipped), cut at the first of the run's stop strings.

    A last character whose bytes the answer did not finish (U+FFFD at the end) is dropped, as vLLM's
    detokenizer drops it: the original ran vLLM, and its answers (and a ``vllm serve``'s) end that way."""
    tokens = list(tokens)
    ends = [position for position, token in enumerate(tokens) if token in stop_ids]
    if ends:
        tokens = tokens[: ends[0]]
    text = tokenizer.decode(tokens, skip_special_tokens=True).rstrip("\ufffd")
    for marker in stop:
        if marker and marker in text:
            text = text[: text.index(marker)]
    return text, len(tokens)


def prefix_key(text: str, clips: Sequence[AudioPart], placeholder: str) -> list[str]:
    """A rendered prompt as its text pieces and clip digests in order: sorting prompts by it puts those
    that share a prefix (text and audio alike) next to each other, for an engine's prefix cache."""
    key: list[str] = []
    for piece, clip in zip(text.split(placeholder), [*clips, None], strict=True):
        key.append(piece)
        if clip is not None:
            key.append(clip.digest)
    return key


# The parts a server hands a chat template for audio content: vLLM's ``{"type": "audio"}``, the API's own.
_AUDIO_PART_TYPES = ("audio", "input_audio", "audio_url")


def served_chat_template(template: str, family: AudioFamily) -> str:
    """The checkpoint's chat template for an OpenAI-compatible server (``vllm serve --chat-template``),
    rendering a request of the ``openai`` backend exactly as the offline backends render the same chat.

    A server hands the template each message's content as a list of parts (text, audio); the Qwen
    templates render such a list with text of their own (Qwen2-Audio writes ``Audio 1:`` before each
    clip). This template first turns every list into one string, text as is and each audio part as the
    family's placeholder, in order (what ``render_chat`` writes), then renders with the original."""
    audio_types = ", ".join(repr(t) for t in _AUDIO_PART_TYPES)
    prologue = (
        "{%- set ns = namespace(messages=[]) -%}"
        "{%- for message in messages -%}"
        "{%- if message['content'] is string or message['content'] is none -%}"
        "{%- set ns.messages = ns.messages + [message] -%}"
        "{%- else -%}"
        "{%- set text = namespace(value='') -%}"
        "{%- for part in message['content'] -%}"
        "{%- if part['type'] == 'text' -%}{%- set text.value = text.value + part['text'] -%}"
        f"{{%- elif part['type'] in ({audio_types}) -%}}"
        f"{{%- set text.value = text.value + {family.placeholder!r} -%}}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- set ns.messages = ns.messages + [{'role': message['role'], 'content': text.value}] -%}"
        "{%- endif -%}"
        "{%- endfor -%}"
        "{%- set messages = ns.messages -%}"
    )
    return prologue + template
