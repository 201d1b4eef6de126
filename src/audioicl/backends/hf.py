"""The ``hf`` backend: audio-language models through Hugging Face transformers (``--model hf:DIR_OR_ID``).

Loads a checkpoint folder (or a hub id, which transformers resolves where there is network) with the class
its family names (``backends.families``; SPEC §6): ``Qwen2AudioForConditionalGeneration``; for Qwen2.5-Omni
and Qwen3-Omni the *Thinker* class, which makes text and needs no speaker file, also from a full Omni
checkpoint (its config's ``thinker_config``, weights under ``thinker.``); for a family without a class, the
config's ``architectures``, then the Auto classes where one takes its config.

Each request's chat is rendered by ``rendering.render_chat`` (the model's own chat template). The three Qwen
families and Apertus 1.5 (``inline``) take the fast path: each distinct clip through the processor once (a
feature cache), the processor's expansion of the placeholders checked against the clips, and the reuse path
below; so does Voxtral, whose prompts mistral-common makes from the chat (``tokenizes_chat``): its ids from
the tokenizer's side of that call, each clip's windows from a call of its own. Every other family
(``parts``), and Voxtral with ``reuse=off`` or sampling, gets exactly what its own processor makes of a
micro-batch (``processed``). A prompt
that does not fit the language model's context (``max_position_embeddings``) with the new tokens gets an error
response. A window of requests is sorted
by length (audio, then text) and run in micro-batches of ``GenerationConfig.batch_size`` with left padding;
responses come back in request order. Greedy by default, plain argmax on every path: the checkpoint's own
generation settings (a repetition penalty, top-p, ...) are set aside and recorded in the backend info. A
micro-batch that runs out of GPU memory is halved and retried, down to one prompt; a prompt that still
fails (or cannot be rendered or processed) gets an error response.

Options (``--backend-option KEY=VALUE``): ``dtype`` auto|bf16|fp16|fp32 (auto: bf16 on a GPU that has it,
else fp32), ``device`` (auto: cuda when there is one, else cpu; or cuda:1, cpu ...), ``attn``
sdpa|flash_attention_2|eager, ``trust_remote_code`` true|false (false unless asked), ``cache`` dynamic|static
(transformers' KV cache of ``reuse=off``: static preallocates instead of growing by concatenation),
``encoder`` valid|window (the reuse path's Qwen2-Audio encoder over each clip's valid frames, the
default, or over the whole 30 s window as its own forward does: the kept outputs are the same either way, the
padding being masked out of attention), ``reuse`` off|audio|prefix (``reuse``'s module: prefix, the default
where the family has it, encodes each clip once and computes the prefix an episode's k prompts share once;
audio only the first; off runs transformers' ``generate`` on every prompt from scratch; sampling always runs
``generate``), ``compile``, ``fused`` and ``cuda_graphs`` auto|on|off (the reuse path's elementwise work fused
by torch.compile or by Triton kernels, and its decode step as a CUDA graph, ``graphs``; auto: the Triton kernels
and graphs on where there is a CUDA device, compile off), ``pack``
on|off (the reuse path packs a batch's rows into fewer rows no longer than its longest, so that the prefill
computes no padding positions between them; off by default: no gain measured on an H100, docs/measurements.md),
``allocator`` auto|expandable|default (the CUDA caching allocator's expandable segments, ``configure_allocator``;
auto: on a CUDA device unless ``PYTORCH_CUDA_ALLOC_CONF`` is set), ``decode_batches`` auto|N (the reuse path
reads its prompts a batch at a time and decodes N batches' prompts together, ``reuse.prefill``: a decode step
reads every weight whatever its batch; auto: ``AUTO_DECODE_BATCHES`` by device, 1 on the CPU), ``encode_ahead``
auto|on|off (the reuse path encodes the next window's clips in the runner's preparing thread, on a stream of
its own, while the model reads this window's prompts; auto: on a CUDA device).
"""

from __future__ import annotations

import gc
import inspect
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import transformers

from audioicl import audio
from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat

from .base import (
    Backend,
    GenerationConfig,
    GenerationStopped,
    Request,
    Response,
    Usage,
    refuse_unknown_options,
    register_backend,
)
from .families import FAMILIES, AudioFamily, family_of
from .graphs import (
    SPEED_MODES,
    FastPaths,
    Fusion,
    compile_decoder,
    compiled_or_eager,
    first_line,
    fuse_decoder,
)
from .processed import PlaceholderMismatch, Rendered, forward_names, model_inputs
from .rendering import (
    audio_extractor,
    check_clip_count,
    clip_window_seconds,
    config_sha256,
    decode_answer,
    end_of_turn_token,
    generic_family,
    load_processor,
    render_chat,
    stop_token_ids,
)
from .reuse import (
    ENCODER_WINDOWS,
    PARTS,
    REUSE_MODES,
    CachesNotJoinable,
    EmbeddingCache,
    ModelParts,
    Row,
    batches,
    cache_positions,
    generate_rows,
    kv_bytes_per_position,
    pack,
    pack_rows,
    runs,
    token_sequence,
)

OPTIONS = (
    "seed",
    "dtype",
    "device",
    "attn",
    "trust_remote_code",
    "cache",
    "reuse",
    "encoder",
    "compile",
    "fused",
    "cuda_graphs",
    "pack",
    "allocator",
    "decode_batches",
    "encode_ahead",
)
log = logging.getLogger("audioicl.backends")
CACHES = ("dynamic", "static")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ATTENTION = ("sdpa", "flash_attention_2", "eager")
# the CUDA caching allocator's segments (``configure_allocator``)
ALLOCATORS = ("auto", "expandable", "default")
PREFETCH_CLIPS = 64  # clips per processor call when extracting ahead
ENCODE_CLIPS = 32  # clips per audio encoder call of the reuse path
# batches of the reuse path decoded together where ``decode_batches`` is auto, by device type, at most: a
# decode step reads every weight (every expert of an MoE) whatever its batch, so more prompts a step is
# nearly free on a GPU; the CPU computes each prompt's step in full, so it gains nothing there
AUTO_DECODE_BATCHES = {"cuda": 4}
# ... and only while their joined KV cache takes at most this share of the GPU memory free once the weights
# are loaded: on an 80 GB card Qwen3-Omni's weights leave too little to join its long batches (measured:
# the batches that ran out of memory cost more than the joined decode saved), Qwen2.5-Omni's leave room for 4
KV_BUDGET_OF_FREE = 0.25
# A trimmed extraction pads a call's clips with this many zero samples past the longest instead of to the
# window (and keeps this many frames past each clip's valid ones): every frame the encoder's kept outputs
# read then comes out as over the whole window (tests/test_reuse.py compares them).
TRIM_MARGIN_SAMPLES = 4000
TRIM_KEEP_FRAMES = 8
GENERIC_AUTO_CLASSES = (
    "AutoModelForMultimodalLM",
    "AutoModelForImageTextToText",
    "AutoModelForSpeechSeq2Seq",
)


@dataclass(frozen=True)
class HFSettings:
    dtype: str = "auto"
    device: str = "auto"
    attn: str = "sdpa"
    trust_remote_code: bool = False
    seed: int = 0
    cache: str = "dynamic"
    reuse: str | None = None  # None: prefix where the family has the reuse path, else off
    encoder: str = "valid"
    compile: str = "auto"
    fused: str = "auto"
    cuda_graphs: str = "auto"
    pack: str = "off"
    allocator: str = "auto"
    decode_batches: str = "auto"
    encode_ahead: str = "auto"

    @classmethod
    def parse(cls, options: Mapping[str, object]) -> HFSettings:
        refuse_unknown_options("hf backend takes", options, OPTIONS)
        dtype = str(options.get("dtype", "auto"))
        if dtype not in ("auto", *DTYPES):
            raise AudioICLError(f"backend option dtype must be auto, bf16, fp16 or fp32, got {dtype!r}")
        attn = str(options.get("attn", "sdpa"))
        if attn not in ATTENTION:
            raise AudioICLError(f"backend option attn must be one of {', '.join(ATTENTION)}, got {attn!r}")
        cache = str(options.get("cache", "dynamic"))
        if cache not in CACHES:
            raise AudioICLError(f"backend option cache must be dynamic or static, got {cache!r}")
        reuse = options.get("reuse")
        if reuse is not None and str(reuse) not in REUSE_MODES:
            raise AudioICLError(f"backend option reuse must be off, audio or prefix, got {reuse!r}")
        if reuse not in (None, "off") and attn == "flash_attention_2":
            raise AudioICLError(
                "backend option reuse=audio|prefix needs attn=sdpa or eager (its masks are 4D)"
            )
        if cache != "dynamic" and reuse not in ("off",):
            raise AudioICLError("backend option cache applies to reuse=off (transformers' generate)")
        encoder = str(options.get("encoder", "valid"))
        if encoder not in ENCODER_WINDOWS:
            raise AudioICLError(f"backend option encoder must be valid or window, got {encoder!r}")
        speed = {
            name: str(options.get(name, "auto"))
            for name in ("compile", "fused", "cuda_graphs", "encode_ahead")
        }
        for name, value in speed.items():
            if value not in SPEED_MODES:
                raise AudioICLError(f"backend option {name} must be auto, on or off, got {value!r}")
        pack = str(options.get("pack", "off"))
        if pack not in ("on", "off"):
            raise AudioICLError(f"backend option pack must be on or off, got {pack!r}")
        if pack == "on" and reuse == "off":
            raise AudioICLError(
                "backend option pack=on packs the rows of the reuse path: it needs reuse=audio|prefix"
            )
        allocator = str(options.get("allocator", "auto"))
        if allocator not in ALLOCATORS:
            raise AudioICLError(
                f"backend option allocator must be one of {', '.join(ALLOCATORS)}, got {allocator!r}"
            )
        decode_batches = str(options.get("decode_batches", "auto"))
        if decode_batches != "auto" and not (decode_batches.isdigit() and int(decode_batches) >= 1):
            raise AudioICLError(
                f"backend option decode_batches must be auto or a whole number of batches, at least 1, "
                f"got {decode_batches!r}"
            )
        remote = str(options.get("trust_remote_code", "false")).lower()
        if remote not in ("true", "false", "1", "0", "yes", "no"):
            raise AudioICLError(f"backend option trust_remote_code must be true or false, got {remote!r}")
        return cls(
            dtype=dtype,
            device=str(options.get("device", "auto")),
            attn=attn,
            trust_remote_code=remote in ("true", "1", "yes"),
            seed=int(options.get("seed", 0)),  # type: ignore[call-overload]
            cache=cache,
            reuse=None if reuse is None else str(reuse),
            encoder=encoder,
            pack=pack,
            allocator=allocator,
            decode_batches=decode_batches,
            **speed,
        )

    def reuse_for(self, family: AudioFamily) -> str:
        """The reuse mode this run gets: as asked, else prefix where the family has the path."""
        if self.reuse is not None:
            if self.reuse != "off" and family.name not in PARTS:
                raise AudioICLError(f"backend option reuse={self.reuse}: not available for {family.name}")
            return self.reuse
        default = family.name in PARTS and family.fast_path_by_default
        return "prefix" if default and self.attn != "flash_attention_2" else "off"

    def torch_device(self) -> torch.device:
        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            return torch.device(self.device)
        except RuntimeError as exc:
            raise AudioICLError(f"backend option device: {exc}") from None

    def torch_dtype(self, device: torch.device) -> torch.dtype:
        if self.dtype != "auto":
            return DTYPES[self.dtype]
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32


def configure_allocator(asked: str, device: torch.device) -> dict[str, str]:
    """Set the CUDA caching allocator's segments for the run; what was asked and used, for the record.

    ``expandable`` (what ``auto`` picks on a CUDA device) lets the allocator grow a segment in place instead of
    caching blocks of fixed sizes: a run near the card's memory (Qwen3-Omni's 61 GB of weights on an 80 GB
    card) otherwise fails allocations on fragments it holds, and every attempt that runs out of memory is
    work thrown away (docs/measurements.md). A ``PYTORCH_CUDA_ALLOC_CONF`` the user set is left as it is by
    ``auto``. Answers do not depend on it."""
    made = {"asked": asked, "used": "default"}
    if asked == "default":
        return made
    if device.type != "cuda":
        if asked == "expandable":
            made["fallback"] = f"expandable segments are for CUDA devices, this run is on {device}"
            log.warning("hf backend: allocator=expandable left out: %s", made["fallback"])
        return made
    user = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    if asked == "auto" and user:
        return {**made, "used": f"PYTORCH_CUDA_ALLOC_CONF={user}"}
    setting = getattr(torch._C, "_accelerator_setAllocatorSettings", None)  # torch >= 2.9; before, cuda's
    (setting or torch.cuda.memory._set_allocator_settings)("expandable_segments:True")
    return {**made, "used": "expandable_segments"}


# --------------------------------------------------------------------------- loading a checkpoint


@dataclass
class Loaded:
    model: Any
    processor: Any
    family: AudioFamily
    model_type: str
    config_sha256: str
    adapter: str | None = None  # the speech LoRA loaded, where the family has one


def _model_class(model_type: str, family: AudioFamily | None, config: Any) -> Any:
    """The family's class, else the first of the config's ``architectures`` transformers has, else the Auto
    class that takes the config."""
    names = [family.model_class] if family is not None and family.model_class else []
    names += list(getattr(config, "architectures", None) or [])
    for name in names:
        found = getattr(transformers, name, None)
        if found is not None:
            return found
    for auto_name in GENERIC_AUTO_CLASSES:
        auto = getattr(transformers, auto_name, None)
        if auto is not None and type(config) in auto._model_mapping:
            return auto
    raise AudioICLError(
        f"model_type {model_type!r} is not an audio chat model audioicl can run through transformers "
        f"(supported: {', '.join(_known_types())}; others need a class in one of "
        f"{', '.join(GENERIC_AUTO_CLASSES)})"
    )


def _known_types() -> list[str]:
    return [t for _, f in FAMILIES.items() for t in f.model_types]


def load_checkpoint(name: str, settings: HFSettings, device: torch.device) -> Loaded:
    """Model (eval mode, on ``device``), processor and family of the checkpoint ``name``."""
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=settings.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"cannot load the checkpoint {name}: {exc}") from exc
    model_type = config.model_type
    known = family_of(model_type)
    processor = load_processor(name, settings.trust_remote_code)
    family = known or generic_family(model_type, processor)
    cls = _model_class(model_type, known, config)
    load_kwargs: dict[str, Any] = {
        "dtype": settings.torch_dtype(device),
        "attn_implementation": attention_implementation(family, settings.attn),
        "trust_remote_code": settings.trust_remote_code,
        "device_map": {"": str(device)},
    }
    if known is not None and model_type in known.thinker_of:
        load_kwargs["config"] = config.thinker_config
        load_kwargs["key_mapping"] = {r"^thinker\.": ""}
    verbosity = transformers.logging.get_verbosity()
    if load_kwargs.get("key_mapping"):  # the talker and vocoder weights are left out on purpose: no report
        transformers.logging.set_verbosity_error()
    try:
        model = cls.from_pretrained(name, **load_kwargs)
    except (OSError, ValueError) as exc:
        raise AudioICLError(f"cannot load the weights of {name}: {exc}") from exc
    finally:
        transformers.logging.set_verbosity(verbosity)
    adapter = _load_speech_adapter(model, name, family)
    model.eval()
    return Loaded(model, processor, family, model_type, config_sha256(name, config), adapter)


def attention_implementation(family: AudioFamily, asked: str) -> str | dict[str, str]:
    """What ``from_pretrained`` gets for ``attn_implementation``: the family's own where it needs one, else the
    run's, per sub-config where some of the family's towers take eager attention only."""
    if family.attn is not None:
        return family.attn
    if family.eager_towers:
        return {"text_config": asked, **dict.fromkeys(family.eager_towers, "eager")}
    return asked


def _load_speech_adapter(model: Any, name: str, family: AudioFamily) -> str | None:
    """The family's speech LoRA loaded into ``model`` and made active, where the checkpoint folder holds one
    (the model card does the same; without it the model runs without its speech training): its folder."""
    if family.adapter is None:
        return None
    folder = Path(name).expanduser() / family.adapter
    if not (folder / "adapter_config.json").is_file():
        return None
    try:
        import peft  # noqa: F401  (transformers' load_adapter needs it)
    except ModuleNotFoundError:
        raise AudioICLError(
            f"{name}: the checkpoint ships a speech LoRA ({folder / 'adapter_config.json'}) that {family.label} "
            "needs to hear; install peft (pip install peft) to load it"
        ) from None
    model.load_adapter(str(folder), adapter_name="speech")
    model.set_adapter("speech")
    return str(folder)


# --------------------------------------------------------------------------- the backend


@dataclass(frozen=True)
class ClipFeatures:
    """One clip as the processor makes it: ``features`` [mel bins, frames] (float32, on the CPU), ``valid``
    frames of them real audio (the rest the processor's padding, kept where the encoder sees it), and the
    number of audio tokens its placeholder becomes."""

    features: torch.Tensor
    valid: int
    tokens: int

    @property
    def nbytes(self) -> int:
        return self.features.numel() * self.features.element_size()


class FeatureCache:
    """Clip features by content digest, least recently used dropped beyond ``max_bytes``: each distinct clip
    goes through the feature extractor once while it is in use (an episode's k prompts share their clips)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, ClipFeatures] = OrderedDict()
        self._bytes = 0
        self.misses = 0

    def __contains__(self, digest: str) -> bool:
        return digest in self._items

    def get(self, clip: AudioPart, compute: Callable[[AudioPart], ClipFeatures]) -> ClipFeatures:
        found = self._items.get(clip.digest)
        if found is not None:
            self._items.move_to_end(clip.digest)
            return found
        made = compute(clip)
        self.put(clip.digest, made)
        return made

    def clear(self) -> None:
        """Empty, the miss count included."""
        self._items.clear()
        self._bytes = 0
        self.misses = 0

    def put(self, digest: str, features: ClipFeatures) -> None:
        self.misses += 1
        self._items[digest] = features
        self._bytes += features.nbytes
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.nbytes


@dataclass
class _Prepared:
    """A request ready for the model: its text with the audio tokens expanded, its clips' features and
    content digests, and the group (episode) whose prompts may share a prefix."""

    index: int
    text: str
    clips: list[ClipFeatures]
    digests: list[str]
    group: str
    ids: list[int]  # the text's token ids
    chat: Chat | None = None  # a family that tokenizes chats: its inputs from scratch (sampling) come from it

    @property
    def length(self) -> tuple[int, int]:
        """What sorting a window by length compares: its audio frames, then its token ids (a family that
        tokenizes chats has no text here)."""
        return sum(c.valid for c in self.clips), len(self.ids)


@dataclass(frozen=True)
class _Ahead:
    """What ``prefetch`` made of one request: the request itself, and its prepared prompt or its failure."""

    request: Request
    prepared: _Prepared | None
    failed: Response | None


GENERATION_TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def set_aside_generation_settings(model: Any) -> dict[str, Any]:
    """Leave the model's generation config only its token ids; return the settings set aside.

    A checkpoint's ``generation_config.json`` may carry sampling and penalty settings (a repetition penalty,
    top-p, ...) that transformers' ``generate`` applies to every call, even greedy ones with arguments left
    unset; the reuse path and vLLM take plain argmax. The protocol is plain greedy (SPEC §4), so every
    path gets the same answers only without them."""
    current = getattr(model, "generation_config", None)
    if current is None:
        return {}
    diff = current.to_diff_dict()
    set_aside = {
        key: value
        for key, value in diff.items()
        if key not in GENERATION_TOKEN_FIELDS and key != "transformers_version"
    }
    kept = {key: diff[key] for key in GENERATION_TOKEN_FIELDS if diff.get(key) is not None}
    model.generation_config = transformers.GenerationConfig(**kept)
    return set_aside


def _differs(made: tuple[Any, Any, list[int]], reference: tuple[Any, Any, list[int]]) -> str:
    """Why ``made`` (features, mask, tokens) is not ``reference``; empty where they are equal."""
    for name, ours, theirs in zip(("features", "valid frames"), made[:2], reference[:2], strict=True):
        if ours.shape != theirs.shape or not torch.equal(ours, theirs.to(ours.dtype)):
            return f"its clip_features' {name} differ from the processor's call"
    if list(made[2]) != list(reference[2]):
        return f"its clip_features count {list(made[2])} audio tokens, the processor {list(reference[2])}"
    return ""


def _positions(rows: Sequence[Row]) -> int:
    """What a batch of the reuse path's rows costs the prefill: rows times the longest."""
    return len(rows) * max(row.length for row in rows)


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


@dataclass
class HFBackend:
    """A loaded model and processor serving ``generate``; see the module docstring."""

    name: str
    model: Any
    processor: Any
    model_family: AudioFamily
    device: torch.device
    info: Mapping[str, Any] = field(default_factory=dict)
    feature_cache_mb: int = 2048
    kv_cache: str = "dynamic"  # transformers' cache_implementation: dynamic grows by concatenation
    reuse: str = "off"  # reuse.REUSE_MODES
    encoder: str = "valid"  # reuse.ENCODER_WINDOWS: Qwen2-Audio's encoder over the valid frames or the window
    audio_cache_mb: int = 4096  # audio embeddings of the reuse path, on the model's device
    compile: str = "auto"  # graphs.SPEED_MODES: the reuse path's decoder norms and MLPs compiled
    fused: str = "auto"  # SPEED_MODES: ... or run through Triton kernels (``graphs.fuse_decoder``)
    cuda_graphs: str = "auto"  # graphs.SPEED_MODES: the reuse path's decode step as a CUDA graph
    packed: bool = False  # -o pack=on: a batch's rows of the reuse path packed (``reuse.pack_rows``)
    decode_batches: str = "auto"  # batches of the reuse path read one by one and decoded together
    encode_ahead: str = "auto"  # SPEED_MODES: the next window's clips through the encoder in ``prefetch``

    def __post_init__(self) -> None:
        self.extractor = audio_extractor(self.processor)
        self.sampling_rate = int(self.extractor.sampling_rate)
        # the feature extractor computes on the model's GPU where it takes a ``device`` (Whisper's does)
        self._features_on_device = (
            self.device.type == "cuda" and "device" in inspect.signature(self.extractor.__call__).parameters
        )
        # the next window's clips through the audio encoder in the runner's preparing thread (``prefetch``),
        # while this window's prompts are read: a CUDA device's (auto), where the reuse path runs
        self.encodes_ahead = self.reuse != "off" and (
            self.encode_ahead == "on" or (self.encode_ahead == "auto" and self.device.type == "cuda")
        )
        # the preparing thread's GPU work on a stream of its own: the extractor's copy back to the host, and
        # the encoder ahead, would otherwise wait behind every kernel the model's calls queued on the default
        # stream (the runner prepares while the model runs)
        self._side_stream = (
            torch.cuda.Stream(self.device)
            if self.device.type == "cuda" and (self._features_on_device or self.encodes_ahead)
            else None
        )
        self._encode_lock = threading.Lock()  # one encoder call at a time (``_embeddings``)
        self.max_clip_seconds = clip_window_seconds(self.processor, self.model_family)
        parts_family = self.model_family.rendering == "parts"
        # the family's own processor per micro-batch; a parts family with the fast path (``reuse``) takes it
        # from its template's text (Gemma 4) or, where it tokenizes chats, its token ids (Voxtral), and each
        # clip's features alone
        self.processed = parts_family and self.reuse == "off"
        self.forward_names = forward_names(self.model, self.model_family) if parts_family else frozenset()
        text_config = self.model.config.get_text_config()
        self.context_tokens: int | None = getattr(text_config, "max_position_embeddings", None)
        tokenizer = self.processor.tokenizer
        audio_token = self.model_family.audio_token or getattr(self.processor, "audio_token", None)
        self.audio_token_id: int | None = (
            tokenizer.convert_tokens_to_ids(audio_token) if isinstance(audio_token, str) else None
        )
        self.pad_token_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        self.stop_ids = self._stop_ids()
        set_aside = set_aside_generation_settings(self.model)
        self.info = {**self.info, "generation_config_set_aside": set_aside} if set_aside else self.info
        if self._suppresses_audio_token:  # recorded: the answer can never hold it
            self.info = {**self.info, "suppressed_tokens": [audio_token]}
        self.features = FeatureCache(self.feature_cache_mb * 2**20)
        self._feature_lock = threading.Lock()  # ``prefetch`` runs in the runner's preparing thread
        self._ahead: dict[str, _Ahead] = {}  # prepared by ``prefetch``, by request key
        # where the time went; the reuse path splits ``generate`` into ``prefill`` and ``decode``
        # (``lost``: in attempts that ran out of memory, ``_halving``)
        self.seconds = dict.fromkeys(
            ("features", "encode", "encode_ahead", "generate", "prefill", "decode", "lost"), 0.0
        )
        # the work done, for benchmarks: clips and their audio tokens through the encoder, and positions
        # through the language model (prompt tokens read, without padding, and tokens generated; and the
        # padding positions the reuse path's prefill computed besides), and attempts out of memory
        self.work = dict.fromkeys(
            (
                "encoded_clips",
                "encoded_audio_tokens",
                "lm_tokens",
                "lm_padding",
                "out_of_memory",
                "encode_ahead_stopped",
            ),
            0,
        )
        self._failed_footprints: dict[Callable, int] = {}  # the smallest that ran out of memory, by measure
        self._direct_features: bool | None = None  # the family's clip_features in use (None: not checked yet)
        tokenizer.padding_side = "left"
        self.parts: ModelParts | None = None
        if self.reuse != "off":
            self.parts = PARTS[self.model_family.name](self.model, self.encoder)
        self.embeddings = EmbeddingCache(self.audio_cache_mb * 2**20)
        self.paths = FastPaths.resolve(self.compile, self.cuda_graphs, self.device, self.fused)
        self._fusion: Fusion | None = None  # the Triton kernels' forwards (``graphs.fuse_decoder``)
        self.decoded_together = (
            AUTO_DECODE_BATCHES.get(self.device.type, 1)
            if self.decode_batches == "auto"
            else int(self.decode_batches)
        )
        self._decode_batches_fallback = ""  # why decoded_together fell back to 1 (``_join_refused``)
        self._kv_budget: int | None = None  # bytes a joined decode's KV cache may take (auto on a GPU)
        self._kv_bytes = 0  # of a position of the reuse path's static cache
        if self.parts is not None:
            self._kv_bytes = kv_bytes_per_position(self.parts.decoder, self.model.dtype)
            if self.decode_batches == "auto" and self.device.type == "cuda":
                self._kv_budget = int(torch.cuda.mem_get_info(self.device)[0] * KV_BUDGET_OF_FREE)
        if self.parts is None:  # transformers' generate: no path applies
            self.paths.compile = self.paths.cuda_graphs = self.paths.fused = False
        elif self.paths.compile:
            compile_decoder(self.parts.decoder)
        elif self.paths.fused:
            self._fuse(self.parts.decoder)
        self.info = {**self.info, **self._paths_info()}
        self._halted = False  # stop() was called: generate returns after the batch in hand
        window = getattr(self.extractor, "n_samples", None)
        reads_valid = self.model_family.encoder_reads_valid_frames or (
            self.parts is not None and self.encoder == "valid"
        )
        # the processor pads every clip to its window (30 s, Qwen2.5-Omni's 300 s): where the encoder
        # reads only valid frames, a shorter padding gives the same frames for far less work
        self.trim_to: int | None = (
            window if reads_valid and self.model_family.features_independent_of_batch else None
        )

    @classmethod
    def around(cls, name: str, model: Any, processor: Any, **options: Any) -> HFBackend:
        """The backend around a model already in memory (the benchmarks build full-size ones with random
        weights on the GPU): its family from its config, its device from its weights."""
        family = family_of(model.config.model_type)
        return cls(
            name=name, model=model, processor=processor, model_family=family, device=model.device, **options
        )

    @property
    def family(self) -> str:
        """The system-prompt family (``prompts.sets.DEFAULT_SYSTEM``)."""
        return self.model_family.system_family

    def _stop_ids(self) -> list[int]:
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        end_of_turn = end_of_turn_token(self.processor, self.model_family)
        return stop_token_ids(self.processor.tokenizer, configured, end_of_turn)

    # ----------------------------------------------------------------- requests → prompts

    def _prepare_text(
        self, index: int, text: str, parts: Sequence[AudioPart], group: str = "", chat: Chat | None = None
    ) -> _Prepared:
        """A rendered prompt (one placeholder per clip, at the model's rate) with its clips' features,
        tokens expanded; for a family that tokenizes chats, ``chat``'s token ids as its ``chat_inputs``
        makes them (``text`` is empty)."""
        with self._feature_lock:
            clips = [self.features.get(part, self._clip_features) for part in parts]
        digests = [part.digest for part in parts]
        if self.model_family.tokenizes_chat:
            if chat is None:
                raise ValueError(f"{self.model_family.label} makes its prompts from chats; none was given")
            ids = self.model_family.prompt_ids(self.processor, chat, self.sampling_rate)
            return _Prepared(index, "", clips, digests, group, ids, chat)
        expanded = self._expand(text, clips)
        # as ``AudioFamily.process`` tokenizes: nothing added to what the template wrote (Gemma's writes <bos>)
        ids = self.processor.tokenizer(expanded, add_special_tokens=False)["input_ids"]
        return _Prepared(index, expanded, clips, digests, group, ids)

    def _at_model_rate(self, clip: AudioPart) -> AudioPart:
        if clip.sr == self.sampling_rate:
            return clip
        return AudioPart.of(audio.resample(clip.wave, clip.sr, self.sampling_rate), self.sampling_rate)

    def _clip_features(self, clip: AudioPart) -> ClipFeatures:
        """The processor's own output for the clip alone: its feature row and how many audio tokens its
        placeholder became. Alone, so a clip's features never depend on its batch mates (Qwen3-Omni's
        processor pads a call to its longest clip, and a clip's token count then depends on the others)."""
        if self.model_family.tokenizes_chat:
            started = time.perf_counter()
            features, tokens = self.model_family.clip_inputs(self.processor, clip.wave, self.sampling_rate)
            self.seconds["features"] += time.perf_counter() - started
            return ClipFeatures(features, features.shape[-1], tokens)
        return self._extract([clip])[0]

    def _extract(self, clips: Sequence[AudioPart]) -> list[ClipFeatures]:
        """One processor call over ``clips``, each with its own one-placeholder text (or the family's
        ``clip_features``, the same features without the text)."""
        started = time.perf_counter()
        with self._on_side_stream():
            features, mask, tokens = self._features_of(clips)
        made = []
        for row, count in enumerate(tokens):
            if count < 1:
                raise PlaceholderMismatch(f"the processor of {self.name} made no audio tokens for a clip")
            valid = int(mask[row].sum())
            kept = features[row].to(torch.float32)
            if self.model_family.features_frames_first:
                kept = kept.T  # [bins, frames], as every family's
            if self.model_family.encoder_reads_valid_frames:
                kept = kept[:, :valid]
            elif self.trim_to is not None:
                kept = kept[:, : valid + TRIM_KEEP_FRAMES]
            made.append(ClipFeatures(kept.clone(), valid, count))
        self.seconds["features"] += time.perf_counter() - started
        return made

    def _features_of(self, clips: Sequence[AudioPart]) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """The clips' features (one row each), the masks of their valid frames and their audio tokens: the
        family's ``clip_features`` where it has them and they proved equal to the processor's own call on
        the first clips asked (``_direct_features``), else that call."""
        on_device = {"device": str(self.device)} if self._features_on_device else {}  # mel on the GPU
        waves = [clip.wave for clip in clips]
        if self.trim_to is None and self._direct_features is not False:
            made = self._direct(waves, on_device)
            if made is not None:
                return made
        return self._processor_features(waves, on_device)

    def _direct(self, waves: list[Any], on_device: dict[str, str]) -> Any:
        """The family's ``clip_features`` of ``waves``, checked once against the processor's call: a
        transformers release whose processor makes them otherwise (other kwargs, another token count) or
        cannot make them so turns them off for the run, said once in the log."""
        if self._direct_features:
            return self.model_family.clip_features(self.processor, waves, self.sampling_rate, **on_device)
        try:  # the errors caught: another transformers release, another helper or signature
            made = self.model_family.clip_features(self.processor, waves, self.sampling_rate, **on_device)
        except (ImportError, AttributeError, TypeError) as exc:
            made, why = None, f"{type(exc).__name__}: {exc}"
        else:
            why = "" if made is None else _differs(made, self._processor_features(waves, on_device))
        self._direct_features = made is not None and not why
        if why:
            log.warning("hf backend: %s features through its processor's call: %s", self.name, why)
        return made if self._direct_features else None

    def _processor_features(
        self, waves: list[Any], on_device: dict[str, str]
    ) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """One processor call over ``waves``, each with its own one-placeholder text."""
        trim = {}
        if self.trim_to is not None:
            longest = max(len(wave) for wave in waves)
            trim = {"audio_kwargs": {"max_length": min(self.trim_to, longest + TRIM_MARGIN_SAMPLES)}}
        out = self.processor(
            text=[self.model_family.placeholder] * len(waves),
            audio=waves,
            sampling_rate=self.sampling_rate,
            return_tensors="pt",
            padding=True,
            **on_device,
            **trim,
        )
        features_key, mask_key = self.model_family.feature_keys
        if out.get(mask_key) is None or features_key not in out:
            raise PlaceholderMismatch(f"the processor of {self.name} returned no audio features for a clip")
        tokens = (out["input_ids"] == self.audio_token_id).sum(dim=1).tolist()
        return out[features_key], out[mask_key], tokens

    def _prefetch(self, clips: Sequence[AudioPart]) -> None:
        """Extract the uncached ``clips`` together where a call's clips cannot change each other's features:
        all of them where the family's processor pads every clip to the window, else those of one length (a
        processor that pads a call to its longest clip, Qwen3-Omni's, then pads none of them; the others are
        extracted alone when their prompt is prepared). A failed call leaves its clips to be extracted one by
        one, so that a bad clip fails only its own prompt."""
        if self.model_family.tokenizes_chat:  # each clip through a call of its own (``clip_inputs``)
            return
        todo = list({clip.digest: clip for clip in clips if clip.digest not in self.features}.values())
        if self.model_family.features_independent_of_batch:
            groups = [todo]
        else:
            by_length: dict[int, list[AudioPart]] = {}
            for clip in todo:
                by_length.setdefault(len(clip.wave), []).append(clip)
            groups = [group for group in by_length.values() if len(group) > 1]
        for group in groups:
            for start in range(0, len(group), PREFETCH_CLIPS):
                chunk = group[start : start + PREFETCH_CLIPS]
                try:
                    made = self._extract(chunk)
                except (AudioICLError, RuntimeError, ValueError):
                    continue
                with self._feature_lock:
                    for clip, features in zip(chunk, made, strict=True):
                        self.features.put(clip.digest, features)

    def _expand(self, text: str, clips: Sequence[ClipFeatures]) -> str:
        """The prompt text with each clip's audio token repeated as the processor does it."""
        token = self.model_family.audio_token
        pieces = text.split(token)
        if len(pieces) != len(clips) + 1:
            raise PlaceholderMismatch(
                f"the prompt holds {len(pieces) - 1} audio tokens for {len(clips)} clips"
            )
        out = [pieces[0]]
        for clip, piece in zip(clips, pieces[1:], strict=True):
            out += [self.model_family.expansion(self.processor, clip.tokens), piece]
        return "".join(out)

    def _inputs(self, batch: Sequence[_Prepared] | Sequence[Rendered]) -> dict[str, Any]:
        """Model inputs for a micro-batch: tokens left-padded; the fast path's clips as one feature row each,
        padded with zeros to the longest row, and the feature mask marking the valid frames; a parts
        family's, the processor's own call over the batch (a family that tokenizes chats: over their chats,
        ``_Prepared.chat``)."""
        if self.processed or self.model_family.tokenizes_chat:
            return self.model_inputs(batch)  # type: ignore[arg-type]
        inputs = dict(
            self.processor.tokenizer([item.text for item in batch], return_tensors="pt", padding=True)
        )
        clips = [clip for item in batch for clip in item.clips]
        if clips:
            features, mask = self._feature_batch(clips)
            inputs.update(zip(self.model_family.feature_keys, (features, mask), strict=True))
        return {key: value.to(self.device) for key, value in inputs.items()}

    def _feature_batch(self, clips: Sequence[ClipFeatures]) -> tuple[torch.Tensor, torch.Tensor]:
        """The clips' features as one tensor padded with zeros to the longest (model dtype, but float32 where
        the family reads them so), and the mask of their valid frames."""
        bins = clips[0].features.shape[0]
        frames = max(clip.features.shape[1] for clip in clips)
        dtype = self.model_family.input_dtype(self.model_family.feature_keys[0], self.model.dtype)
        features = torch.zeros(len(clips), bins, frames, dtype=dtype)
        mask = torch.zeros(len(clips), frames, dtype=torch.int32)
        for row, clip in enumerate(clips):
            features[row, :, : clip.features.shape[1]] = clip.features
            mask[row, : clip.valid] = 1
        return features, mask

    # ----------------------------------------------------------------- running a micro-batch

    def model_inputs(self, batch: Sequence[Rendered]) -> dict[str, Any]:
        """What ``generate`` gets for rendered prompts of a parts family (``processed.model_inputs``)."""
        started = time.perf_counter()
        inputs = model_inputs(
            self.processor,
            self.model_family,
            batch,
            sampling_rate=self.sampling_rate,
            names=self.forward_names,
            audio_token_id=self.audio_token_id,
            device=self.device,
            dtype=self.model.dtype,
        )
        self.seconds["features"] += time.perf_counter() - started
        return inputs

    def _generate_batch(
        self, batch: Sequence[_Prepared] | Sequence[Rendered], config: GenerationConfig
    ) -> dict[int, Response]:
        """transformers' ``generate`` over the batch, every prompt from scratch (``reuse=off``, sampling, and
        every parts family). A prompt whose tokens do not fit the context gets an error response; the rest of
        the batch runs without it."""
        inputs = self._inputs(batch)
        too_long = self._over_context(batch, inputs, config.max_new_tokens)
        if too_long:
            kept = [item for item in batch if item.index not in too_long]
            return {**too_long, **(self._generate_batch(kept, config) if kept else {})}
        sampling = config.temperature > 0
        if sampling:
            torch.manual_seed(config.seed)
        started = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(**inputs, **self._generation_kwargs(config))
        sequences = out if isinstance(out, torch.Tensor) else out.sequences
        self.seconds["generate"] += time.perf_counter() - started
        prompt_length = inputs["input_ids"].shape[1]
        new_tokens = sequences[:, prompt_length:].tolist()
        input_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        audio_tokens = (
            (inputs["input_ids"] == self.audio_token_id).sum(dim=1).tolist()
            if self.audio_token_id is not None
            else [0] * len(batch)
        )
        responses = {}
        for item, tokens, n_in, n_audio in zip(batch, new_tokens, input_tokens, audio_tokens, strict=True):
            responses[item.index] = self._response(tokens, int(n_in), int(n_audio), config)
            self.work["lm_tokens"] += int(n_in) + responses[item.index].usage.output_tokens
        self.work["encoded_clips"] += sum(len(item.clips) for item in batch)
        self.work["encoded_audio_tokens"] += sum(audio_tokens)
        return responses

    def _generation_kwargs(self, config: GenerationConfig) -> dict[str, Any]:
        """``generate``'s settings: greedy (no sampling flag: transformers warns of one on every greedy call),
        or plain temperature sampling as vLLM's (no top-k, no top-p; an argument left None would take
        transformers' default top-k of 50)."""
        sampling = config.temperature > 0
        return {
            "max_new_tokens": config.max_new_tokens,
            "do_sample": sampling,
            **({"temperature": config.temperature, "top_p": 1.0, "top_k": 0} if sampling else {}),
            "num_beams": 1,
            "eos_token_id": self.stop_ids,
            "pad_token_id": self.pad_token_id,
            **({"suppress_tokens": [self.audio_token_id]} if self._suppresses_audio_token else {}),
            **({"cache_implementation": self.kv_cache} if self.kv_cache != "dynamic" else {}),
        }

    @property
    def _suppresses_audio_token(self) -> bool:
        return self.model_family.suppress_audio_token and self.audio_token_id is not None

    def _response(self, tokens: Sequence[int], n_in: int, n_audio: int, config: GenerationConfig) -> Response:
        """The prompt's answer; one its tokenizer cannot decode (an id it does not know: mistral-common's raises
        KeyError) is the prompt's error line, not the end of the run."""
        try:
            text, n_out = decode_answer(self.processor.tokenizer, tokens, self.stop_ids, config.stop)
        except (KeyError, ValueError, IndexError, OverflowError) as exc:
            error = f"cannot decode the answer: {type(exc).__name__}: {exc}"
            return Response(None, error, Usage(n_in, len(tokens), n_audio))  # what it cost, for the counts
        return Response(text, usage=Usage(n_in, n_out, n_audio))

    def _generate_rows(
        self, rows: Sequence[Row], clips: dict[str, ClipFeatures], config: GenerationConfig
    ) -> dict[int, Response]:
        """Greedy answers of the prompts in ``rows`` (the reuse path): read ``config.batch_size`` prompts
        at a time (each read's rows packed with ``-o pack=on``), all decoded together (``_decode_groups``)."""
        assert self.parts is not None
        parts = self.parts
        reads = [pack_rows(run) if self.packed else run for run in runs(rows, max(config.batch_size, 1))]
        with torch.inference_mode():
            audio = self._embeddings(clips)
            started = time.perf_counter()

            def read_and_decode() -> dict[int, list[int]]:
                with self._fused_kernels():
                    return generate_rows(
                        parts,
                        reads,
                        audio,
                        config.max_new_tokens,
                        self.stop_ids,
                        self.pad_token_id,
                        self.model.dtype,
                        self.device,
                        self.seconds,
                        self.paths,
                    )

            try:
                tokens = compiled_or_eager(read_and_decode, parts.decoder, self.paths)
            except CachesNotJoinable as exc:
                return self._join_refused(rows, clips, config, str(exc))
        self.seconds["generate"] += time.perf_counter() - started
        if self.paths.why_not:  # a path fell back during this batch: the record says so
            self.info = {**self.info, **self._paths_info()}
        responses = {
            member.sequence.index: self._response(
                tokens[member.sequence.index], len(member.sequence), member.sequence.audio_tokens, config
            )
            for row in rows
            for member in row.members
        }
        self.work["lm_tokens"] += sum(row.length for row in rows)
        for run in reads:  # each read padded to its own longest
            self.work["lm_padding"] += len(run) * max(row.length for row in run) - sum(r.length for r in run)
        self.work["lm_tokens"] += sum(r.usage.output_tokens for r in responses.values())
        return responses

    def _decode_groups(self, reads: Sequence[list[Row]], steps: int) -> list[list[Row]]:
        """The rows of consecutive ``reads`` (batches) joined into one decode: up to ``decoded_together``
        reads, and where ``decode_batches`` is auto on a GPU, only while the joined KV cache fits its budget
        (``KV_BUDGET_OF_FREE``; a read alone always)."""
        groups: list[list[Row]] = []
        joined = 0
        for read in reads:
            if groups and joined < self.decoded_together and self._kv_fits([*groups[-1], *read], steps):
                groups[-1] += read
                joined += 1
            else:
                groups.append(list(read))
                joined = 1
        return groups

    def _kv_fits(self, rows: Sequence[Row], steps: int) -> bool:
        """Whether a decode of ``rows`` keeps its KV cache within the budget (none: always)."""
        return self._kv_budget is None or cache_positions(rows, steps) * self._kv_bytes <= self._kv_budget

    def _join_refused(
        self, rows: Sequence[Row], clips: dict[str, ClipFeatures], config: GenerationConfig, why: str
    ) -> dict[int, Response]:
        """Decode each batch alone from now on (``decode_batches`` 1), said once and recorded; ``rows``
        again, one batch at a time (nothing of the refused attempt is kept: it stopped before decoding)."""
        if not self._decode_batches_fallback:  # the call's later groups were formed before: said once
            log.warning("hf backend: decode_batches 1, each batch decoded alone: %s", why)
        self.decoded_together = 1
        self._decode_batches_fallback = why
        self.info = {**self.info, **self._paths_info()}
        answered: dict[int, Response] = {}
        for run in runs(rows, max(config.batch_size, 1)):
            answered.update(self._generate_rows(run, self._clips_of(run, clips), config))
        return answered

    def _fuse(self, decoder: Any) -> None:
        """The decoder's norms and MLPs through the Triton kernels; where none can be (no Triton, a kernel
        that does not compile here, no module of a shape they take), said once and recorded."""
        try:
            self._fusion = fuse_decoder(decoder)
        except Exception as exc:  # any failure of Triton's leaves the eager kernels
            self.paths.give_up(
                "fused", f"the fused kernels cannot run: {type(exc).__name__}: {first_line(exc)}"
            )
            return
        if not self._fusion.forwards:
            self.paths.give_up("fused", "no norm or MLP of this decoder computes what the fused kernels do")

    def _fused_kernels(self) -> AbstractContextManager:
        """The fused kernels in force where they run (``graphs.Fusion.applied``)."""
        return self._fusion.applied() if self.paths.fused and self._fusion else nullcontext()

    def _paths_info(self) -> dict[str, Any]:
        """The fast paths (``graphs.FastPaths.info``), the reuse path's attention and the MoE experts
        implementation, for the record."""
        config = self.model.config.get_text_config()
        experts = getattr(config, "_experts_implementation", None) if hasattr(config, "num_experts") else None
        made = {**self.paths.info(), **({"experts": experts} if experts else {})}
        if self.paths.fused and self._fusion:
            made["fused"]["modules"] = self._fusion.counts()
        if self.parts is None:
            return made
        decode: dict[str, Any] = {"asked": self.decode_batches, "used": self.decoded_together}
        if self._kv_budget is not None:
            decode["kv_budget_gib"] = round(self._kv_budget / 2**30, 2)
        if self._decode_batches_fallback:
            decode["fallback"] = self._decode_batches_fallback
        ahead = {"asked": self.encode_ahead, "used": self.encodes_ahead}
        return {**made, "attention": self.parts.attention(), "decode_batches": decode, "encode_ahead": ahead}

    def _embeddings(self, clips: dict[str, ClipFeatures], ahead: bool = False) -> dict[str, torch.Tensor]:
        """Each clip's audio embedding, from the cache or through the encoder (longest first, in chunks).
        ``ahead``: called from the runner's preparing thread (``prefetch``): on the side stream, each chunk
        finished before it is cached, its seconds ``encode_ahead`` (they overlap the model's calls). The
        two threads take turns at the encoder (``_encode_lock``): its attention swap is the tower's config."""
        with self._encode_lock:
            found = self._cached(clips)
        missing = sorted((d for d in clips if d not in found), key=lambda d: clips[d].valid, reverse=True)
        started = time.perf_counter()
        encoded = False
        for begin in range(0, len(missing), ENCODE_CLIPS):
            chunk = missing[begin : begin + ENCODE_CLIPS]
            # the side stream's block ends (synchronized) before the lock is let go: the other thread reads
            # the cache under the lock, so it never finds an embedding still being made
            with self._encode_lock, self._on_side_stream() if ahead else nullcontext():
                meanwhile = self._cached(chunk)  # encoded by the other thread since
                found.update(meanwhile)
                todo = {digest: clips[digest] for digest in chunk if digest not in meanwhile}
                if todo:
                    found.update(self._encode(todo))
                    encoded = True
        if encoded and self.device.type == "cuda" and not ahead:
            torch.cuda.synchronize(self.device)  # the encoder's seconds, not the prefill's
        self.seconds["encode_ahead" if ahead else "encode"] += time.perf_counter() - started
        return found

    def _cached(self, digests: Iterable[str]) -> dict[str, torch.Tensor]:
        """The embeddings of ``digests`` the cache holds (the caller holds ``_encode_lock``)."""
        found = {digest: self.embeddings.get(digest) for digest in digests}
        return {digest: embedding for digest, embedding in found.items() if embedding is not None}

    def _encode(self, clips: dict[str, ClipFeatures]) -> dict[str, torch.Tensor]:
        """``clips`` through the encoder in one call, cached (the caller holds ``_encode_lock``)."""
        assert self.parts is not None
        made = list(clips.values())
        features, mask = self._feature_batch(made)
        valid = mask.sum(dim=1).to(self.device)
        encoded = self.parts.encode(features.to(self.device), valid, [clip.tokens for clip in made])
        by_digest = dict(zip(clips, encoded, strict=True))
        for digest, embedding in by_digest.items():
            self.embeddings.put(digest, embedding)
        self.work["encoded_clips"] += len(made)
        self.work["encoded_audio_tokens"] += sum(clip.tokens for clip in made)
        return by_digest

    @contextmanager
    def _on_side_stream(self) -> Iterator[None]:
        """The block's GPU work on the side stream where there is one, finished when the block ends (what
        the preparing thread leaves on the GPU is done before another stream reads it)."""
        if self._side_stream is None:
            yield
            return
        with torch.cuda.stream(self._side_stream):
            yield
        self._side_stream.synchronize()

    def _halving(
        self, batch: Sequence[Any], attempt: Callable, prompts: Callable, footprint: Callable = len
    ) -> dict[int, Response]:
        """``attempt(batch)``; out of memory halves the batch (down to one item, whose ``prompts(item)``
        then get error responses). A batch whose ``footprint`` (prompts, or the reuse path's positions) is
        at least that of one that ran out of memory before is halved without being tried: each failed
        attempt costs what it ran before it failed (``seconds["lost"]``, counted in ``work``).

        The retry happens after the ``except`` block: inside it, the exception's traceback still holds the
        failed attempt's activations, and the retry would run out of memory too."""
        size, failed = footprint(batch), self._failed_footprints.get(footprint)
        if len(batch) == 1 or failed is None or size < failed:
            started = time.perf_counter()
            try:
                return attempt(batch)
            except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
                if not _is_out_of_memory(exc):
                    raise
                error = f"out of memory on the smallest batch ({self.device}): {exc}"
            self._free_cache()
            self.seconds["lost"] += time.perf_counter() - started
            self.work["out_of_memory"] += 1
            self._failed_footprints[footprint] = min(size, failed or size)
            log.warning(
                "hf backend: out of memory on %d prompts (%s %d); halving it, and any batch as large "
                "from now on",
                sum(len(prompts(item)) for item in batch),
                footprint.__name__.strip("_"),
                size,
            )
            if len(batch) == 1:
                return {index: Response.failed(error) for index in prompts(batch[0])}
        half = len(batch) // 2
        return {
            **self._halving(batch[:half], attempt, prompts, footprint),
            **self._halving(batch[half:], attempt, prompts, footprint),
        }

    def _free_cache(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # ----------------------------------------------------------------- the protocol

    def stop(self) -> None:
        """Make ``generate`` return after the batch in hand, raising ``GenerationStopped`` with the answers
        it has (called from a signal handler: it only sets a flag)."""
        self._halted = True

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]:
        if self._halted:
            raise GenerationStopped({})
        prepared, responses = self.prepare(requests)
        prepared, too_long = self._within_context(prepared, config.max_new_tokens)
        responses.update(too_long)
        if self.parts is not None and config.temperature <= 0:
            rows, clips, failed = self.pack(prepared)
            responses.update(failed)
            reads = batches(rows, max(config.batch_size, 1))
            for batch in self._decode_groups(reads, config.max_new_tokens - 1):
                if self._halted:
                    raise GenerationStopped(responses)
                responses.update(
                    self._halving(
                        batch,
                        lambda b: self._generate_rows(b, self._clips_of(b, clips), config),
                        lambda row: [member.sequence.index for member in row.members],
                        _positions,
                    )
                )
        else:
            try:
                responses.update(self._from_scratch(prepared, config))
            except GenerationStopped as stopped:
                raise GenerationStopped({**responses, **stopped.answered}) from None
        return [responses.get(index) or Response.failed("no response") for index in range(len(requests))]

    def prefetch(self, requests: Sequence[Request], config: GenerationConfig | None = None) -> None:
        """Prepare ``requests`` ahead of their ``generate`` (rendered, features extracted, tokenized; for a
        greedy ``config`` on the reuse path, where ``encodes_ahead``, their clips encoded): the runner calls
        this for the windows ahead while this one is answered."""
        prepared, failed = self._prepare_now(requests)
        ahead = {requests[item.index].key: _Ahead(requests[item.index], item, None) for item in prepared}
        ahead.update({requests[i].key: _Ahead(requests[i], None, response) for i, response in failed.items()})
        with self._feature_lock:
            self._ahead.update(ahead)
        if self.encodes_ahead and config is not None and config.temperature <= 0 and prepared:
            clips = {d: c for item in prepared for d, c in zip(item.digests, item.clips, strict=True)}
            try:
                with torch.inference_mode():
                    self._embeddings(clips, ahead=True)
            except (RuntimeError, ValueError) as exc:  # out of memory, a clip the encoder refuses
                said = log.debug if self.work["encode_ahead_stopped"] else log.warning
                said(
                    "hf backend: encoding ahead stopped, generate encodes the rest: %s",
                    first_line(exc),
                )
                self.work["encode_ahead_stopped"] += 1

    def prepare(self, requests: Sequence[Request]) -> tuple[list[_Prepared], dict[int, Response]]:
        """The requests rendered, their clips' features extracted; those that cannot be, as error
        responses by request index. What ``prefetch`` prepared for the same request object is taken from
        there (a key alone is not enough: a later run on this backend may ask it with another chat)."""
        with self._feature_lock:
            popped = {index: self._ahead.pop(r.key, None) for index, r in enumerate(requests)}
        found = {
            index: entry
            for index, entry in popped.items()
            if entry is not None and entry.request is requests[index]
        }
        rest = [index for index in range(len(requests)) if index not in found]
        prepared, responses = self._prepare_now([requests[index] for index in rest])
        prepared = [replace(item, index=rest[item.index]) for item in prepared]
        responses = {rest[index]: response for index, response in responses.items()}
        for index, entry in found.items():
            if entry.prepared is not None:
                prepared.append(replace(entry.prepared, index=index))
            else:
                assert entry.failed is not None
                responses[index] = entry.failed
        return prepared, responses

    def _prepare_now(self, requests: Sequence[Request]) -> tuple[list[_Prepared], dict[int, Response]]:
        responses: dict[int, Response] = {}
        rendered: dict[int, tuple[str, list[AudioPart]]] = {}
        for index, request in enumerate(requests):
            try:
                rendered[index] = self._render(request)
            except AudioICLError as exc:
                responses[index] = Response.failed(f"cannot prepare the prompt: {exc}")
        if self.processed:
            chats = self.model_family.tokenizes_chat
            made = [
                Rendered(i, text, parts, requests[i].episode_id, requests[i].chat if chats else None)
                for i, (text, parts) in rendered.items()
            ]
            return made, responses  # type: ignore[return-value]
        self._prefetch([part for _, parts in rendered.values() for part in parts])
        prepared: list[_Prepared] = []
        for index, (text, parts) in rendered.items():
            try:
                request = requests[index]
                prepared.append(self._prepare_text(index, text, parts, request.episode_id, request.chat))
            except (AudioICLError, RuntimeError, ValueError) as exc:  # the processor refused this prompt
                responses[index] = Response.failed(f"cannot prepare the prompt: {exc}")
        return prepared, responses

    def _render(self, request: Request) -> tuple[str, list[AudioPart]]:
        """The request's text and clips at the model's rate; a family that makes its inputs from the chat
        itself (``tokenizes_chat``) has no text here, only its clips counted against its limit."""
        family = self.model_family
        if family.tokenizes_chat:
            parts = list(request.chat.audio_parts())
            check_clip_count(len(parts), family, family.max_clips)
            return "", [self._at_model_rate(part) for part in parts]
        text, parts = render_chat(request.chat, family, self.processor.apply_chat_template)
        return text, [self._at_model_rate(part) for part in parts]

    def _within_context(
        self, prepared: list[_Prepared], new_tokens: int
    ) -> tuple[list[_Prepared], dict[int, Response]]:
        """The prompts that fit the language model's context with ``new_tokens`` more, and an error response
        for each that does not: past ``max_position_embeddings`` a model reads positions it never learned."""
        if self.context_tokens is None or self.processed:  # a parts family's: checked on its batch's inputs
            return prepared, {}
        fits: list[_Prepared] = []
        refused: dict[int, Response] = {}
        for item in prepared:
            if len(item.ids) + new_tokens <= self.context_tokens:
                fits.append(item)
            else:
                refused[item.index] = self._context_error(len(item.ids), new_tokens)
        return fits, refused

    def _context_error(self, prompt_tokens: int, new_tokens: int) -> Response:
        return Response.failed(
            f"{prompt_tokens} prompt tokens and {new_tokens} new ones do not fit the model's context "
            f"of {self.context_tokens} tokens (max_position_embeddings)"
        )

    def _over_context(
        self, batch: Sequence[_Prepared] | Sequence[Rendered], inputs: Mapping[str, Any], new_tokens: int
    ) -> dict[int, Response]:
        """Error responses for the prompts of ``batch`` whose inputs do not fit the context."""
        if self.context_tokens is None:
            return {}
        lengths = inputs["attention_mask"].sum(dim=1).tolist()
        return {
            item.index: self._context_error(int(length), new_tokens)
            for item, length in zip(batch, lengths, strict=True)
            if int(length) + new_tokens > self.context_tokens
        }

    def _from_scratch(self, prepared: list[_Prepared], config: GenerationConfig) -> dict[int, Response]:
        prepared = sorted(prepared, key=lambda item: item.length, reverse=True)  # similar lengths together
        size = max(config.batch_size, 1)
        if self.processed and self.model_family.prompts_per_call is not None:
            size = min(size, self.model_family.prompts_per_call)  # its processor pads prompts together
        responses: dict[int, Response] = {}
        for start in range(0, len(prepared), size):
            if self._halted:
                raise GenerationStopped(responses)
            batch = prepared[start : start + size]
            responses.update(
                self._halving(batch, lambda b: self._generate_batch(b, config), lambda item: [item.index])
            )
        return responses

    def pack(
        self, prepared: Sequence[_Prepared]
    ) -> tuple[list[Row], dict[str, ClipFeatures], dict[int, Response]]:
        """The prepared prompts as rows of the reuse path (``reuse.pack``), their clips by digest, and the
        prompts whose tokens do not match their clips as error responses."""
        clips: dict[str, ClipFeatures] = {}
        sequences = []
        responses: dict[int, Response] = {}
        for item in prepared:
            try:
                sequences.append(
                    token_sequence(
                        item.index,
                        item.group,
                        item.ids,
                        self.audio_token_id,
                        [(d, c.tokens) for d, c in zip(item.digests, item.clips, strict=True)],
                    )
                )
            except ValueError as exc:
                responses[item.index] = Response.failed(f"cannot prepare the prompt: {exc}")
                continue
            clips.update(zip(item.digests, item.clips, strict=True))
        return pack(sequences, share=self.reuse == "prefix"), clips, responses

    @staticmethod
    def _clips_of(rows: Sequence[Row], clips: dict[str, ClipFeatures]) -> dict[str, ClipFeatures]:
        return {
            span.digest: clips[span.digest]
            for row in rows
            for member in row.members
            for span in member.sequence.clips
        }

    def clear_caches(self) -> None:
        """Empty the feature and audio-embedding caches: what follows runs as from a cold start."""
        self.features.clear()
        self.embeddings.clear()

    def close(self) -> None:
        self.model = None
        self.parts = None
        self.embeddings.clear()
        self._ahead.clear()
        self._free_cache()


def backend_info(loaded: Loaded, settings: HFSettings, device: torch.device) -> dict[str, Any]:
    return {
        "model_type": loaded.model_type,
        "class": type(loaded.model).__name__,
        "config_sha256": loaded.config_sha256,
        "dtype": str(loaded.model.dtype).removeprefix("torch."),
        "device": str(device),
        "attn": attention_implementation(loaded.family, settings.attn),
        "adapter": loaded.adapter,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }


@register_backend("hf")
def make_hf(name: str, **options: object) -> Backend:
    settings = HFSettings.parse(options)
    device = settings.torch_device()
    allocator = configure_allocator(settings.allocator, device)  # before the weights take their memory
    loaded = load_checkpoint(name, settings, device)
    return HFBackend(
        name=f"hf:{name}",
        model=loaded.model,
        processor=loaded.processor,
        model_family=loaded.family,
        device=device,
        info={
            **backend_info(loaded, settings, device),
            "allocator": allocator,
            "reuse": settings.reuse_for(loaded.family),
            "encoder": settings.encoder,
            "pack": settings.pack,
        },
        kv_cache=settings.cache,
        reuse=settings.reuse_for(loaded.family),
        encoder=settings.encoder,
        compile=settings.compile,
        fused=settings.fused,
        cuda_graphs=settings.cuda_graphs,
        packed=settings.pack == "on",
        decode_batches=settings.decode_batches,
        encode_ahead=settings.encode_ahead,
    )
