"""What differs between audio-language model families, as data, with the few hooks a family may override.

An ``AudioFamily`` says how a backend finds the family's model class, how a chat becomes the messages its chat
template renders, what the processor's output holds, the real limits of the model (seconds per clip, clips per
prompt), its system-prompt rule and the public checkpoints it covers. A new family is one module in this
package that registers one instance (``docs/models.md``); a family that needs code subclasses ``AudioFamily``
and overrides ``template_messages`` or ``process``.

Two renderings exist:

- ``inline`` (the three Qwen families, as the original did it, SPEC §4; Apertus 1.5, whose template writes a
  string's placeholder as it writes an audio part): every message's content is one string, each clip written
  as the family's ``placeholder``. The Qwen list-of-parts template path would add text of its own (Qwen2-Audio
  writes ``Audio 1:`` before each clip), which the original never showed.
- ``parts`` (every other family, as its model card does it): each message's content is a list of
  ``{"type": "text"}`` and ``{"type": "audio"}`` parts, and the chat template writes the family's own
  placeholder and wrapping tokens; the processor expands them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from audioicl.prompts.chat import AudioPart, Chat, Message, TextPart, message_text

Rendering = Literal["inline", "parts"]
SystemRule = Literal["allowed", "merged"]
Verification = Literal["ci", "gpu", "untested"]


@dataclass(frozen=True)
class VllmSupport:
    """How vLLM serves the family: ``architecture`` as vLLM registers it; ``placeholder``: the audio placeholder
    vLLM's processor expects in the prompt text where it differs from what the chat template writes
    (``{i}`` is the clip's number from 1, Phi-4's ``<|audio_{i}|>``); ``max_clips``: clips per prompt vLLM's
    implementation takes (None: what the run needs); ``verified``: ``ci`` where the CPU engine runs a tiny
    checkpoint in the tests, else ``untested``."""

    architecture: str
    placeholder: str | None = None
    max_clips: int | None = None
    verified: Verification = "untested"


@dataclass(frozen=True)
class AudioFamily:
    """One family. ``model_types``: the ``config.json`` model types it covers; ``model_class``: the
    transformers class that makes text (None: the config's ``architectures``, then the Auto classes);
    ``thinker_of``: model types whose checkpoint holds the text model under ``thinker`` (SPEC §6);
    ``system_family``: which system prompt it gets (``prompts.sets.DEFAULT_SYSTEM``); ``system``: ``merged``
    where the template refuses a system message beside audio (its text then opens the first user turn).

    ``max_clip_seconds``: the longest clip the model really takes (None: the processor's window, else any);
    ``max_clips``: clips per prompt (None: any); ``audio_tokens_per_second``: what a second of audio costs in
    the prompt (for ``audioicl models``; None: varies); ``forward_keys``: the processor outputs passed to
    ``generate`` (None: those the model's ``forward`` names); ``attn``: an attention implementation the family
    needs whatever the run asks; ``asr_only``: a speech recogniser, listed as such.

    The fast path (the Qwen families, Apertus 1.5 and Gemma 4; Voxtral through ``prompt_ids`` and
    ``clip_inputs``): ``placeholder`` (what the processor expands for one clip) and ``audio_token`` (what the
    rendered text holds for a clip: the inline placeholder, or the token a parts template writes),
    ``feature_keys`` (the processor outputs holding a clip's features and the mask of its valid frames),
    ``expansion`` (what the processor writes for a clip), ``encoder_reads_valid_frames`` and
    ``features_independent_of_batch`` (what makes the per-clip feature cache exact)."""

    name: str
    model_types: tuple[str, ...]
    display: str = ""
    model_class: str | None = None
    rendering: Rendering = "parts"
    placeholder: str = ""
    audio_token: str = ""
    thinker_of: tuple[str, ...] = ()
    system_family: str = "default"
    system: SystemRule = "allowed"
    max_clip_seconds: float | None = None
    windowed: bool = True  # False: the feature extractor has no window, a clip of any length is taken whole
    max_clips: int | None = None
    audio_tokens_per_second: float | None = None
    forward_keys: tuple[str, ...] | None = None
    attn: str | None = None
    # Sub-configs whose modules transformers loads with eager attention only (it refuses sdpa for them): loaded
    # eager, the text model with the run's ``attn`` (Apertus 1.5's vision and audio tokenizers).
    eager_towers: tuple[str, ...] = ()
    # Processor outputs the model reads in float32 whatever its dtype (they are not cast to it): Apertus 1.5's
    # waveforms, which its fp32 WavTokenizer turns into codes (a bf16-rounded waveform flips codes).
    float32_inputs: tuple[str, ...] = ()
    asr_only: bool = False
    min_transformers: str = "5.17"
    checkpoints: tuple[str, ...] = ()
    verified: Verification = "ci"
    vllm: VllmSupport | None = None
    hf: bool = True  # transformers implements it (False: only vLLM serves it)
    encoder_reads_valid_frames: bool = False
    features_independent_of_batch: bool = False
    feature_keys: tuple[str, str] = ("input_features", "feature_attention_mask")
    # the processor's features are [clips, frames, bins] (Gemma 4's), not [clips, bins, frames]: the fast path
    # keeps every clip's as [bins, frames] and the family's encoder takes them back
    features_frames_first: bool = False
    # The processor call: ``pad_call`` passes ``padding=True`` (False where that would also reach the feature
    # extractor and pad each Whisper window to the call's longest clip instead of to 30 s, as Audio Flamingo's;
    # such processors pad the texts themselves); ``prompts_per_call``: 1 where the processor pads a call's
    # clips together so that a clip's features depend on the other prompts' clips (Gemma 3n): each prompt is
    # then its own call and its own ``generate``, as its model card runs it.
    # The checkpoint's speech LoRA, as a folder inside it (Phi-4-multimodal's ``speech-lora``, Granite Speech's
    # root): loaded with peft and made active, as the model card does, where the folder holds one.
    adapter: str | None = None
    # True where the model's forward gets the clips' features at every decoding step and splices them wherever
    # the audio token is (Phi-4-multimodal's): a generated audio token would fail the whole call, so
    # ``generate`` is told never to emit it. A greedy answer changes only where the call would fail.
    suppress_audio_token: bool = False
    pad_call: bool = True
    prompts_per_call: int | None = None
    # what a clip is written as in a prompt with no chat template (``--layout continuation``), where the
    # processor expands it as it expands what the template writes (None: the inline placeholder, for an
    # inline family; a parts family without one places clips only through its template)
    continuation_placeholder: str | None = None
    # public checkpoints of the family that are pretrained base models (no instruction tuning): run with
    # ``--layout continuation``; a chat layout gives them a chat format they were not trained on
    base_checkpoints: tuple[str, ...] = ()
    # how a family that neither transformers nor vLLM runs is reached (a server of its authors' or another
    # engine's, through the ``openai`` backend), where it is; ``notes`` says what was tried
    served_by: str = ""
    notes: str = ""

    @property
    def label(self) -> str:
        return self.display or self.name

    @property
    def text_placeholder(self) -> str | None:
        """A clip in a prompt with no chat template (``continuation_placeholder``; an inline family's
        placeholder), or None where the family places clips only through its template."""
        if self.continuation_placeholder is not None:
            return self.continuation_placeholder
        return self.placeholder if self.rendering == "inline" and not self.tokenizes_chat else None

    def template_messages(self, chat: Chat) -> list[dict[str, Any]]:
        """The chat as the messages the family's chat template renders (see the module docstring)."""
        messages = list(chat.messages)
        if self.system == "merged":
            messages = merge_system(messages)
        if self.rendering == "inline":
            return [{"role": m.role, "content": message_text(m, self.placeholder)} for m in messages]
        return [{"role": m.role, "content": content_parts(m)} for m in messages]

    def process(self, processor: Any, texts: Sequence[str], waves: Sequence[Any], sampling_rate: int) -> Any:
        """The processor's model inputs for rendered ``texts`` and their clips in order (one call), tokenized
        as ``apply_chat_template(tokenize=True)`` does it: no special tokens added to what the template wrote
        (Gemma's template writes ``<bos>`` itself)."""
        return processor(
            text=list(texts),
            audio=list(waves) if waves else None,
            sampling_rate=sampling_rate,
            return_tensors="pt",
            add_special_tokens=False,
            **({"padding": True} if self.pad_call else {}),
        )

    def input_dtype(self, key: str, model_dtype: Any) -> Any:
        """The dtype the processor output ``key`` reaches the model in: the model's, but float32 for the
        family's ``float32_inputs``."""
        import torch

        return torch.float32 if key in self.float32_inputs else model_dtype

    def expansion(self, processor: Any, tokens: int) -> str:
        """The text the processor puts in the placeholder's place for a clip of ``tokens`` audio tokens (the
        fast path tokenizes prompts itself): the audio token repeated (the Qwen families' placeholders hold
        their wrapping tokens already)."""
        return self.audio_token * tokens

    def for_processor(self, processor: Any) -> AudioFamily:
        """The family with its audio tokens as ``processor`` names them (``audio_token``, and an inline
        placeholder's wrapping ``audio_bos_token`` and ``audio_eos_token``), where they differ from the names
        written here: a checkpoint may rename its special tokens, and the text the fast path writes must hold
        the ones its processor expands. Itself where nothing differs or the family writes no audio token."""
        given = getattr(processor, "audio_token", None)
        if not self.audio_token or not isinstance(given, str) or not given:
            return self
        before, found, after = self.placeholder.partition(self.audio_token)
        bos, eos = (getattr(processor, name, None) for name in ("audio_bos_token", "audio_eos_token"))
        if found and before and after and isinstance(bos, str) and isinstance(eos, str):
            before, after = bos, eos
        placeholder = before + given + after if found else self.placeholder
        continuation = self.continuation_placeholder
        if continuation is not None:
            continuation = continuation.replace(self.audio_token, given)
        if (placeholder, continuation, given) == (
            self.placeholder,
            self.continuation_placeholder,
            self.audio_token,
        ):
            return self
        return replace(
            self, placeholder=placeholder, audio_token=given, continuation_placeholder=continuation
        )

    @property
    def tokenizes_chat(self) -> bool:
        """True where the family makes its inputs straight from chats (``chat_inputs``), not from text."""
        return type(self).chat_inputs is not AudioFamily.chat_inputs

    def chat_inputs(self, processor: Any, chats: Sequence[Chat], sampling_rate: int) -> Any | None:
        """The model inputs of a micro-batch made straight from its chats (one processor call, prompts
        left-padded), for a family whose chat template gives token ids, not text: Voxtral's is mistral-common's
        encoder, which needs each clip's samples to count its audio tokens. None (the default): the family's
        template renders text (``template_messages``) and ``process`` turns texts and clips into inputs. A family
        that overrides it returns inputs for every call; the backend then neither renders text nor calls
        ``process`` for it. ``sampling_rate``: the model's; a clip at another rate is resampled first."""
        return None

    def prompt_ids(self, processor: Any, chat: Chat, sampling_rate: int) -> list[int]:
        """The token ids ``chat_inputs`` gives one chat (its audio tokens included), without extracting its
        clips' features: what the fast path needs of a family that tokenizes chats (``tokenizes_chat``)."""
        raise NotImplementedError(f"{self.label} makes its prompts from text, not from chats")

    def clip_features(
        self, processor: Any, waves: Sequence[Any], sampling_rate: int, **extract: Any
    ) -> tuple[Any, Any, list[int]] | None:
        """The clips' features without the processor's text side, exactly as its call over one placeholder a
        clip makes them: features ([clips, bins, frames]), the mask of valid frames, each clip's audio tokens.
        The fast path extracts clips ahead in a thread beside the model's calls, and the processor's own
        Python (its kwargs merging, the tokenizer) holds the interpreter lock they need
        (``benchmarks/thread_contention.py``). ``extract``: for the feature extractor (``device``). None (the
        default): the backend calls the processor."""
        return None

    def clip_inputs(self, processor: Any, wave: Any, sampling_rate: int) -> tuple[Any, int]:
        """One clip alone as ``chat_inputs`` makes it: its features ([mel bins, frames], float32) and its
        audio tokens, for the fast path of a family that tokenizes chats."""
        raise NotImplementedError(f"{self.label} makes its clips' features from text, not from chats")


def content_parts(message: Message) -> list[dict[str, Any]]:
    """A message's content as template parts, adjacent text joined (a clip is ``{"type": "audio"}``)."""
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, AudioPart):
            parts.append({"type": "audio"})
        elif parts and parts[-1]["type"] == "text":
            parts[-1] = {"type": "text", "text": parts[-1]["text"] + part.text}
        elif part.text:
            parts.append({"type": "text", "text": part.text})
    return parts


def merge_system(messages: Sequence[Message]) -> list[Message]:
    """The system message's text moved to the start of the first user message (a template that takes no
    system message beside audio); the wording is unchanged, the same text reaches the model."""
    if not messages or messages[0].role != "system":
        return list(messages)
    system, rest = messages[0], list(messages[1:])
    text = message_text(system)
    for position, message in enumerate(rest):
        if message.role == "user":
            rest[position] = Message("user", (TextPart(text + "\n\n"), *message.content))
            return rest
    return rest
