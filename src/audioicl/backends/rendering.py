"""One rendering of a typed chat into a model family's prompt text, shared by every model backend.

The original (SPEC §4) writes each clip's audio placeholder inline in the user text
(``[Demo Audio 1] <|audio_bos|><|AUDIO|><|audio_eos|> Label: 7``) and renders the messages, as plain strings,
with the model's own chat template and the generation prompt: the three Qwen families keep that (``inline``), and
so does Apertus 1.5, whose template renders such a string as it renders audio parts.
Every other family is rendered as its model card does it, content parts through its own template
(``parts``); ``backends.families`` says which family is which and holds what else differs between them.
The ``hf`` and ``vllm`` backends both render through ``render_chat``; only how the text and the waves reach
the model differs. What else they share is here too: loading the processor (whose chat template renders), the
stop tokens (with the template's end of turn), the clip limit, the config hash.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat, message_text

from .base import last_component
from .families import FAMILIES, AudioFamily

log = logging.getLogger("audioicl.backends")


def generic_family(model_type: str, processor: Any) -> AudioFamily:
    """The family of an audio chat model no module here describes: rendered as its model card does it (content
    parts through its own chat template), its audio token the processor's ``audio_token``."""
    token = getattr(processor, "audio_token", None)
    if not isinstance(token, str):
        raise AudioICLError(
            f"model_type {model_type!r}: its processor names no audio token (processor.audio_token), so "
            "audioicl cannot place audio in its prompt; supported: "
            + ", ".join(t for _, f in FAMILIES.items() for t in f.model_types)
        )
    return AudioFamily(name=model_type, model_types=(model_type,), audio_token=token, verified="untested")


TemplateFn = Callable[..., str]


class TooManyClips(AudioICLError):
    """A prompt holds more clips than the model takes in one prompt."""


def check_clip_count(clips: int, family: AudioFamily, limit: int | None) -> None:
    """Refuse a prompt of more than ``limit`` clips (None: any), naming the family's limit."""
    if limit is not None and clips > limit:
        raise TooManyClips(
            f"the prompt holds {clips} clips; {family.label} takes at most {limit} per prompt "
            "(the single-clip layout joins them: run --layout single-clip)"
        )


def render_chat(
    chat: Chat, family: AudioFamily, apply_chat_template: TemplateFn, max_clips: int | None = None
) -> tuple[str, list[AudioPart]]:
    """The prompt text (chat template applied, generation prompt added) and the clips in the order the model
    hears them. ``apply_chat_template``: the tokenizer's or processor's own method. An inline family's text
    must hold one placeholder per clip; a parts family's template writes its own (the processor checks).
    ``max_clips``: the clips one prompt may hold (default: the family's ``max_clips``)."""
    clips = list(chat.audio_parts())
    check_clip_count(len(clips), family, family.max_clips if max_clips is None else max_clips)
    text = apply_chat_template(family.template_messages(chat), tokenize=False, add_generation_prompt=True)
    if not isinstance(text, str):
        raise AudioICLError(
            f"the chat template of {family.label} returned {type(text).__name__}, not text: its family needs "
            "its own rendering (backends/families)"
        )
    if family.rendering == "inline":
        found = text.count(family.placeholder)
        if found != len(clips):
            raise AudioICLError(
                f"the chat template wrote {found} audio placeholders for {len(clips)} clips "
                f"({family.placeholder!r}); does the text contain the placeholder, or drop a message?"
            )
    return text, clips


CLIP_MARK = "\x00clip\x00"  # stands for a clip while a text is rendered for a placeholder of another form


def render_continuation(
    chat: Chat,
    family: AudioFamily,
    tokenizer: Any,
    placeholder: str | None = None,
    max_clips: int | None = None,
) -> tuple[str, list[AudioPart]]:
    """A ``--layout continuation`` chat as the model reads it with no chat template: the tokenizer's
    beginning-of-text token where it adds one, then the chat's text with each clip as ``placeholder``
    (default: the family's ``text_placeholder``, what its processor expands; ``{i}`` numbers the clips from
    1, as vLLM's placeholders for some families do); and the clips in order."""
    placeholder = placeholder or family.text_placeholder
    if placeholder is None:
        raise AudioICLError(
            f"--layout continuation: {family.label} places clips only through its chat template (no text "
            "placeholder its processor expands)"
        )
    clips = list(chat.audio_parts())
    check_clip_count(len(clips), family, family.max_clips if max_clips is None else max_clips)
    bos = tokenizer.bos_token if getattr(tokenizer, "add_bos_token", False) and tokenizer.bos_token else ""
    pieces = "".join(message_text(message, CLIP_MARK) for message in chat.messages).split(CLIP_MARK)
    return bos + numbered(pieces, placeholder), clips


def numbered(pieces: Sequence[str], placeholder: str) -> str:
    """``pieces`` (a rendered text split where its clips are) joined by ``placeholder``, ``{i}`` in it
    numbering the clips from 1 (vLLM's placeholders for some families are numbered)."""
    marks = [placeholder.format(i=number) for number in range(1, len(pieces))]
    return "".join(piece + mark for piece, mark in zip(pieces, [*marks, ""], strict=True))


def has_chat_template(processor: Any) -> bool:
    """Whether the processor or its tokenizer has a chat template (a base checkpoint may have none)."""
    tokenizer = getattr(processor, "tokenizer", None)
    return bool(getattr(processor, "chat_template", None) or getattr(tokenizer, "chat_template", None))


def known_base(name: str, family: AudioFamily) -> str | None:
    """The public base checkpoint ``name`` is (a hub id, or a folder named as its last component), if any."""
    last = last_component(name)
    return next((base for base in family.base_checkpoints if last == last_component(base)), None)


def check_chat_layout(name: str, family: AudioFamily, processor: Any) -> None:
    """A chat layout for ``name``: refused where neither its processor nor its tokenizer has a chat template (a
    base checkpoint); said where the checkpoint is a known base model whose processor class supplies a
    template of its own (transformers' Qwen2AudioProcessor does), which would give it the instruct format."""
    if not family.tokenizes_chat and not has_chat_template(processor):  # Voxtral's is mistral-common's
        raise AudioICLError(
            f"{name} has no chat template (a pretrained base model?): run it with --layout continuation"
        )
    base = known_base(name, family)
    if base is not None:
        log.warning(
            "%s is %s, a base model: the chat template its processor supplies gives it a chat "
            "format it was not trained on; --layout continuation runs it as pretrained",
            name,
            base,
        )


def audio_extractor(processor: Any) -> Any:
    """The processor's audio feature extractor (``feature_extractor``; Phi-4-multimodal's ``audio_processor``),
    or None."""
    for attribute in ("feature_extractor", "audio_processor"):
        found = getattr(processor, attribute, None)
        if found is not None and hasattr(found, "sampling_rate"):
            return found
    return None


def load_processor(name: str, trust_remote_code: bool = False) -> Any:
    """The checkpoint's processor (transformers ``AutoProcessor``, whose chat template the backends render
    with); refused when it has no audio feature extractor (a folder whose processor loads as a bare tokenizer
    would silently ignore every clip). Its tokenizer pads on the left, for batched generation."""
    import transformers

    try:
        processor = transformers.AutoProcessor.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, ImportError) as exc:
        raise AudioICLError(f"cannot load the processor of {name}: {exc}") from exc
    if audio_extractor(processor) is None:
        raise AudioICLError(
            f"{name}: its processor loads as {type(processor).__name__}, with no audio feature extractor; "
            "an audio model's folder needs preprocessor_config.json (and processor_config.json)"
        )
    tokenizer = getattr(processor, "tokenizer", None)
    if tokenizer is not None:
        tokenizer.padding_side = "left"
        if getattr(processor, "chat_template", None) is None and getattr(tokenizer, "chat_template", None):
            # transformers 5.25 drops the template of a processor whose __init__ does not name it
            # (Phi-4-multimodal's): the checkpoint's tokenizer holds the same one
            processor.chat_template = tokenizer.chat_template
    return processor


def end_of_turn_token(processor: Any, family: AudioFamily) -> str | None:
    """The special token the chat template writes right after an assistant's text (ChatML's ``<|im_end|>``,
    Gemma's ``<end_of_turn>``, GLM's next ``<|user|>``): an answer ends there. None where it writes none."""
    marker = "Zq9xMarker"
    # a user turn after the assistant's: a template that closes no turn (GLM's) opens the next with its token
    plain = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": marker},
        {"role": "user", "content": "hi"},
    ]
    parts = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in plain]
    text = None
    for messages in (parts, plain) if family.rendering == "parts" else (plain,):  # string-only templates too
        try:
            text = processor.apply_chat_template(messages, tokenize=False)
        except Exception:  # a template that takes no such conversation (Jinja raises its own errors)
            continue
        if isinstance(text, str) and marker in text:
            break
    if not isinstance(text, str) or marker not in text:
        return None
    tokenizer = processor.tokenizer
    after = tokenizer(text[text.rindex(marker) + len(marker) :], add_special_tokens=False)["input_ids"]
    special = set(tokenizer.all_special_ids) | {
        i for i, t in tokenizer.added_tokens_decoder.items() if getattr(t, "special", False)
    }
    first = next((i for i in after if i in special), None)
    return None if first is None else tokenizer.convert_ids_to_tokens(first)


def stop_token_ids(
    tokenizer: Any, configured: int | Sequence[int] | None, end_of_turn: str | None = None
) -> list[int]:
    """The tokens that end an answer, the same for every backend: the tokenizer's end of sequence, the chat
    template's end of turn (``end_of_turn_token``) and the generation config's ``eos_token_id``. An end of turn
    the vocabulary lacks (it converts to the unknown token) adds nothing; the unknown token itself is kept
    where it is the end of sequence (Granite's ``<|end_of_text|>`` is its bos, eos, pad and unk alike)."""
    ids = {tokenizer.eos_token_id}
    if end_of_turn is not None:
        turn = tokenizer.convert_tokens_to_ids(end_of_turn)
        if turn != tokenizer.unk_token_id or end_of_turn == tokenizer.unk_token:
            ids.add(turn)
    ids.update(configured if isinstance(configured, list | tuple) else [configured])
    return sorted(i for i in ids if isinstance(i, int))


def clip_window_seconds(processor: Any, family: AudioFamily | None = None) -> float | None:
    """The longest clip the model takes whole: the family's own limit where it states one, else the feature
    extractor's window (Qwen2-Audio: 30 s); None: any."""
    if family is not None and family.max_clip_seconds is not None:
        return family.max_clip_seconds
    extractor = audio_extractor(processor)
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
    if not placeholder:  # a parts family: the template wrote placeholders of its own
        return [text, *(clip.digest for clip in clips)]
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
