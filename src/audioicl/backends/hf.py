"""The ``hf`` backend: audio-language models through Hugging Face transformers (``--model hf:DIR_OR_ID``).

Loads a checkpoint folder (or a hub id, which transformers resolves where there is network) with the class
its ``model_type`` needs (SPEC §6): ``Qwen2AudioForConditionalGeneration``; for Qwen2.5-Omni and
Qwen3-Omni the *Thinker* class, which makes text and needs no speaker file, also from a full Omni checkpoint
(its config's ``thinker_config``, weights under ``thinker.``); any other model with an audio processor
through the Auto classes where one takes its config.

Each request's chat is rendered by ``rendering.render_chat`` (the family's placeholders and the model's own
chat template), the clips go to the processor at its sampling rate, and the processor's expansion of the
placeholders is checked against the clips. A window of requests is sorted by length (audio, then text) and
run in micro-batches of ``GenerationConfig.batch_size`` with left padding; responses come back in request
order. Greedy by default. A micro-batch that runs out of GPU memory is halved and retried, down to one
prompt; a prompt that still fails (or cannot be rendered or processed) gets an error response.

Options (``--backend-option KEY=VALUE``): ``dtype`` auto|bf16|fp16|fp32 (auto: bf16 on a GPU that has it,
else fp32), ``device`` (auto: cuda when there is one, else cpu; or cuda:1, cpu ...), ``attn``
sdpa|flash_attention_2|eager, ``trust_remote_code`` true|false (false unless asked), ``cache`` dynamic|static
(transformers' KV cache: static preallocates instead of growing by concatenation).
"""

from __future__ import annotations

import gc
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import transformers

from .. import audio
from ..errors import AudioICLError
from ..prompts import AudioPart
from .base import (
    Backend,
    GenerationConfig,
    Request,
    Response,
    Usage,
    refuse_unknown_options,
    register_backend,
)
from .rendering import (
    FAMILIES,
    AudioFamily,
    clip_window_seconds,
    config_sha256,
    decode_answer,
    family_of,
    generic_family,
    load_processor,
    render_chat,
    stop_token_ids,
)

OPTIONS = ("seed", "dtype", "device", "attn", "trust_remote_code", "cache")
CACHES = ("dynamic", "static")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
ATTENTION = ("sdpa", "flash_attention_2", "eager")
PREFETCH_CLIPS = 64  # clips per processor call when extracting ahead
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
        )

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


# --------------------------------------------------------------------------- loading a checkpoint


@dataclass
class Loaded:
    model: Any
    processor: Any
    family: AudioFamily
    model_type: str
    config_sha256: str


def _model_class(model_type: str, family: AudioFamily | None, config: Any) -> Any:
    if family is not None:
        return getattr(transformers, family.model_class)
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
    return [t for f in FAMILIES for t in f.model_types]


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
        "attn_implementation": settings.attn,
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
    model.eval()
    return Loaded(model, processor, family, model_type, config_sha256(name, config))


# --------------------------------------------------------------------------- the backend


class PlaceholderMismatch(AudioICLError):
    """The processor did not turn a clip into features and audio tokens."""


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

    def put(self, digest: str, features: ClipFeatures) -> None:
        self.misses += 1
        self._items[digest] = features
        self._bytes += features.nbytes
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.nbytes


@dataclass
class _Prepared:
    """A request ready for the model: its text with the audio tokens expanded, and its clips' features."""

    index: int
    text: str
    clips: list[ClipFeatures]

    @property
    def length(self) -> tuple[int, int]:
        return sum(c.valid for c in self.clips), len(self.text)


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

    def __post_init__(self) -> None:
        self.sampling_rate = int(self.processor.feature_extractor.sampling_rate)
        self.max_clip_seconds = clip_window_seconds(self.processor)
        tokenizer = self.processor.tokenizer
        self.audio_token_id = tokenizer.convert_tokens_to_ids(self.model_family.audio_token)
        self.pad_token_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        self.stop_ids = self._stop_ids()
        self.features = FeatureCache(self.feature_cache_mb * 2**20)
        self.seconds = {"features": 0.0, "generate": 0.0}  # where the time went, for benchmarks
        tokenizer.padding_side = "left"

    @property
    def family(self) -> str:
        """The system-prompt family (``prompts.DEFAULT_SYSTEM``)."""
        return self.model_family.system_family

    def _stop_ids(self) -> list[int]:
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        return stop_token_ids(self.processor.tokenizer, configured)

    # ----------------------------------------------------------------- requests → prompts

    def _prepare_text(self, index: int, text: str, parts: Sequence[AudioPart]) -> _Prepared:
        """A rendered prompt (one placeholder per clip, at the model's rate) with its clips' features,
        tokens expanded."""
        clips = [self.features.get(part, self._clip_features) for part in parts]
        return _Prepared(index, self._expand(text, clips), clips)

    def _at_model_rate(self, clip: AudioPart) -> AudioPart:
        if clip.sr == self.sampling_rate:
            return clip
        return AudioPart.of(audio.resample(clip.wave, clip.sr, self.sampling_rate), self.sampling_rate)

    def _clip_features(self, clip: AudioPart) -> ClipFeatures:
        """The processor's own output for the clip alone: its feature row and how many audio tokens its
        placeholder became. Alone, so a clip's features never depend on its batch mates (Qwen3-Omni's
        processor pads a call to its longest clip, and a clip's token count then depends on the others)."""
        return self._extract([clip])[0]

    def _extract(self, clips: Sequence[AudioPart]) -> list[ClipFeatures]:
        """One processor call over ``clips``, each with its own one-placeholder text."""
        on_device = {"device": str(self.device)} if self.device.type == "cuda" else {}  # mel on the GPU
        started = time.perf_counter()
        out = self.processor(
            text=[self.model_family.placeholder] * len(clips),
            audio=[clip.wave for clip in clips],
            sampling_rate=self.sampling_rate,
            return_tensors="pt",
            padding=True,
            **on_device,
        )
        mask = out.get("feature_attention_mask")
        if mask is None or "input_features" not in out:
            raise PlaceholderMismatch(f"the processor of {self.name} returned no audio features for a clip")
        made = []
        for row in range(len(clips)):
            tokens = int((out["input_ids"][row] == self.audio_token_id).sum())
            if tokens < 1:
                raise PlaceholderMismatch(f"the processor of {self.name} made no audio tokens for a clip")
            valid = int(mask[row].sum())
            features = out["input_features"][row].to(torch.float32)
            if self.model_family.encoder_reads_valid_frames:
                features = features[:, :valid]
            made.append(ClipFeatures(features.clone(), valid, tokens))
        self.seconds["features"] += time.perf_counter() - started
        return made

    def _prefetch(self, clips: Sequence[AudioPart]) -> None:
        """Extract the uncached ``clips`` together, where the family's processor makes each clip's features
        whatever its batch mates are (it pads every clip to the window); a failed call leaves them to be
        extracted one by one, so that a bad clip fails only its own prompt."""
        if not self.model_family.features_independent_of_batch:
            return
        todo = list({clip.digest: clip for clip in clips if clip.digest not in self.features}.values())
        for start in range(0, len(todo), PREFETCH_CLIPS):
            chunk = todo[start : start + PREFETCH_CLIPS]
            try:
                made = self._extract(chunk)
            except (AudioICLError, RuntimeError, ValueError):
                continue
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
            out += [token * clip.tokens, piece]
        return "".join(out)

    def _inputs(self, batch: Sequence[_Prepared]) -> dict[str, torch.Tensor]:
        """Model inputs for a micro-batch: tokens left-padded, every clip's features as one row padded with
        zeros to the longest row, and the feature mask marking the valid frames."""
        inputs = dict(
            self.processor.tokenizer([item.text for item in batch], return_tensors="pt", padding=True)
        )
        clips = [clip for item in batch for clip in item.clips]
        if clips:
            bins = clips[0].features.shape[0]
            frames = max(clip.features.shape[1] for clip in clips)
            features = torch.zeros(len(clips), bins, frames, dtype=self.model.dtype)
            mask = torch.zeros(len(clips), frames, dtype=torch.int32)
            for row, clip in enumerate(clips):
                features[row, :, : clip.features.shape[1]] = clip.features
                mask[row, : clip.valid] = 1
            inputs.update(input_features=features, feature_attention_mask=mask)
        return {key: value.to(self.device) for key, value in inputs.items()}

    # ----------------------------------------------------------------- running a micro-batch

    def _generate_batch(self, batch: Sequence[_Prepared], config: GenerationConfig) -> list[Response]:
        inputs = self._inputs(batch)
        sampling = config.temperature > 0
        if sampling:
            torch.manual_seed(config.seed)
        started = time.perf_counter()
        with torch.inference_mode():
            out = self.model.generate(
                **inputs,
                max_new_tokens=config.max_new_tokens,
                do_sample=sampling,
                temperature=config.temperature if sampling else None,
                top_p=None,
                top_k=None,
                num_beams=1,
                eos_token_id=self.stop_ids,
                pad_token_id=self.pad_token_id,
                **({"cache_implementation": self.kv_cache} if self.kv_cache != "dynamic" else {}),
            )
        sequences = out if isinstance(out, torch.Tensor) else out.sequences
        self.seconds["generate"] += time.perf_counter() - started
        prompt_length = inputs["input_ids"].shape[1]
        new_tokens = sequences[:, prompt_length:].tolist()
        input_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        audio_tokens = (inputs["input_ids"] == self.audio_token_id).sum(dim=1).tolist()
        responses = []
        for tokens, n_in, n_audio in zip(new_tokens, input_tokens, audio_tokens, strict=True):
            text, n_out = decode_answer(self.processor.tokenizer, tokens, self.stop_ids, config.stop)
            responses.append(Response(text, usage=Usage(int(n_in), n_out, int(n_audio))))
        return responses

    def _run(self, batch: Sequence[_Prepared], config: GenerationConfig) -> list[Response]:
        """``batch``'s responses; out of memory halves it (down to one prompt, then an error response).

        The retry happens after the ``except`` block: inside it, the exception's traceback still holds the
        failed attempt's activations, and the retry would run out of memory too."""
        try:
            return self._generate_batch(batch, config)
        except (RuntimeError, torch.cuda.OutOfMemoryError) as exc:
            if not _is_out_of_memory(exc):
                raise
            error = f"out of memory on one prompt ({self.device}): {exc}"
        self._free_cache()
        if len(batch) == 1:
            return [Response.failed(error)]
        half = len(batch) // 2
        return self._run(batch[:half], config) + self._run(batch[half:], config)

    def _free_cache(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    # ----------------------------------------------------------------- the protocol

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]:
        responses: list[Response | None] = [None] * len(requests)
        rendered: dict[int, tuple[str, list[AudioPart]]] = {}
        for index, request in enumerate(requests):
            try:
                text, parts = render_chat(request.chat, self.model_family, self.processor.apply_chat_template)
                rendered[index] = text, [self._at_model_rate(part) for part in parts]
            except AudioICLError as exc:
                responses[index] = Response.failed(f"cannot prepare the prompt: {exc}")
        self._prefetch([part for _, parts in rendered.values() for part in parts])
        prepared: list[_Prepared] = []
        for index, (text, parts) in rendered.items():
            try:
                prepared.append(self._prepare_text(index, text, parts))
            except (AudioICLError, RuntimeError, ValueError) as exc:  # the processor refused this prompt
                responses[index] = Response.failed(f"cannot prepare the prompt: {exc}")
        prepared.sort(key=lambda item: item.length, reverse=True)  # similar lengths together, longest first
        size = max(config.batch_size, 1)
        for start in range(0, len(prepared), size):
            batch = prepared[start : start + size]
            for item, response in zip(batch, self._run(batch, config), strict=True):
                responses[item.index] = response
        return [r if r is not None else Response.failed("no response") for r in responses]

    def close(self) -> None:
        self.model = None
        self._free_cache()


def backend_info(loaded: Loaded, settings: HFSettings, device: torch.device) -> dict[str, Any]:
    return {
        "model_type": loaded.model_type,
        "class": type(loaded.model).__name__,
        "config_sha256": loaded.config_sha256,
        "dtype": str(loaded.model.dtype).removeprefix("torch."),
        "device": str(device),
        "attn": settings.attn,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }


@register_backend("hf")
def make_hf(name: str, **options: object) -> Backend:
    settings = HFSettings.parse(options)
    device = settings.torch_device()
    loaded = load_checkpoint(name, settings, device)
    return HFBackend(
        name=f"hf:{name}",
        model=loaded.model,
        processor=loaded.processor,
        model_family=loaded.family,
        device=device,
        info=backend_info(loaded, settings, device),
        kv_cache=settings.cache,
    )
