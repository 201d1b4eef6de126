"""The ``hf`` backend (``HFBackend``): requests to answers on a model loaded by ``load``.

Each request's chat is rendered by ``rendering.render_chat`` (the model's own chat template). The families
with the fast path (``reuse.parts.PARTS``: the three Qwen families, Apertus 1.5, Voxtral, Gemma 4) take each
distinct clip through the feature extractor once (``features``), the placeholders expanded as the processor
expands them and checked against the clips, and the reuse path (``reuse.path``); Voxtral's prompts come from
mistral-common (``tokenizes_chat``). Every other family, ``reuse=off`` and sampling run transformers'
``generate`` from scratch (``scratch``), a ``parts`` family on exactly what its own processor makes of a
micro-batch (``processed``). A prompt that does not fit the language model's context
(``max_position_embeddings``) with the new tokens gets an error response. Greedy by default, plain argmax on
every path: the checkpoint's own generation settings (a repetition penalty, top-p, ...) are set aside and
recorded in the backend info. A micro-batch that runs out of GPU memory is halved and retried, down to one
prompt (``memory``); a prompt that still fails (or cannot be rendered or processed) gets an error response.
Options: the kind's declaration (``audioicl.backends.hf.KIND``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from audioicl import audio
from audioicl.errors import AudioICLError
from audioicl.prompts.chat import AudioPart, Chat

from ..base import Backend, GenerationConfig, GenerationStopped, Request, Response, Usage, Workload
from ..families import AudioFamily, family_of
from ..kinds import Settings
from ..rendering import (
    audio_extractor,
    check_clip_count,
    clip_window_seconds,
    decode_answer,
    end_of_turn_token,
    render_chat,
    render_continuation,
    stop_token_ids,
)
from . import KIND
from .features import ClipFeatures, ClipFeaturizer, SideStream, log
from .fp8 import quantize_decoder
from .load import (
    backend_info,
    configure_allocator,
    load_checkpoint,
    reuse_for,
    set_aside_generation_settings,
    torch_device,
)
from .memory import Halving
from .processed import PlaceholderMismatch, Rendered, forward_names
from .reuse.graphs import FastPaths
from .reuse.parts import PARTS
from .reuse.path import ReusePath
from .scratch import FromScratch

FEATURE_CACHE_BYTES = 2048 * 2**20  # clip features, on the CPU


@dataclass
class PromptReady:
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
    prepared: PromptReady | None
    failed: Response | None


GENERATION_TOKEN_FIELDS = ("bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id")


def at_rate(clip: AudioPart, rate: int) -> AudioPart:
    """The clip at the model's sampling ``rate``."""
    if clip.sr == rate:
        return clip
    return AudioPart.of(audio.resample(clip.wave, clip.sr, rate), rate)


def expand_audio_tokens(text: str, clips: Sequence[ClipFeatures], family: AudioFamily, processor: Any) -> str:
    """The prompt text with each clip's audio token repeated as the processor does it."""
    pieces = text.split(family.audio_token)
    if len(pieces) != len(clips) + 1:
        raise PlaceholderMismatch(f"the prompt holds {len(pieces) - 1} audio tokens for {len(clips)} clips")
    out = [pieces[0]]
    for clip, piece in zip(clips, pieces[1:], strict=True):
        out += [family.expansion(processor, clip.tokens), piece]
    return "".join(out)


PROBE_SECONDS = 1.0  # the clip of silence the fast path's expansion is checked on, once a load


def fast_path_departure(processor: Any, family: AudioFamily, model_config: Any) -> str | None:
    """Why this checkpoint departs from what the fast path writes for it (None: it does not), checked once
    at load: its tokenizer must know the audio token as one token, the model's config must name the same id,
    and the processor must expand the fast path's placeholder for a clip exactly as the fast path expands it
    (``family.expansion``). A family that makes its prompts from chats takes ids and counts from its
    processor's own encoder (``clip_inputs``) and is not checked here."""
    if family.tokenizes_chat:
        return None
    tokenizer, token = processor.tokenizer, family.audio_token
    token_id = tokenizer.convert_tokens_to_ids(token)
    if token_id is None or token_id == tokenizer.unk_token_id:
        return f"its tokenizer has no token {token!r}"
    configured = getattr(model_config, "audio_token_id", None)
    if isinstance(configured, int) and configured != token_id:
        return f"its config's audio_token_id is {configured}, its tokenizer's {token!r} is {token_id}"
    rate = int(audio_extractor(processor).sampling_rate)
    silence = np.zeros(int(rate * PROBE_SECONDS), dtype=np.float32)
    try:
        made = processor(
            text=[family.placeholder], audio=[silence], sampling_rate=rate, return_tensors="pt", padding=True
        )
    except Exception as exc:  # noqa: BLE001 (any refusal is the reason the fast path cannot take it)
        return f"its processor refuses the placeholder {family.placeholder!r}: {type(exc).__name__}: {exc}"
    ids = made["input_ids"][0].tolist()
    tokens = ids.count(token_id)
    before, _, after = family.placeholder.partition(token)
    ours = tokenizer(before + family.expansion(processor, tokens) + after, add_special_tokens=False)[
        "input_ids"
    ]
    if tokens < 1 or not _holds(ids, ours):
        return f"its processor expands {family.placeholder!r} otherwise than the fast path does"
    return None


def _holds(ids: Sequence[int], part: Sequence[int]) -> bool:
    """Whether ``part`` is a contiguous run of ``ids`` (a processor may add its tokenizer's special tokens)."""
    return any(list(ids[at : at + len(part)]) == list(part) for at in range(len(ids) - len(part) + 1))


@dataclass(frozen=True)
class Served:
    """What a backend serves: the model, its processor and family, and its device."""

    model: Any
    processor: Any
    family: AudioFamily
    device: torch.device


class HFBackend:
    """A loaded model and processor serving ``generate``; see the module docstring. ``settings``: the kind's
    parsed options (``KIND.parse``); ``reuse``: the mode they give this family (``load.reuse_for``)."""

    def __init__(self, name: str, served: Served, settings: Settings, info: Mapping[str, Any] | None = None):
        self.name, self.settings = name, settings
        self.model, self.processor, self.device = served.model, served.processor, served.device
        self.model_family = served.family.for_processor(served.processor)
        self._info = dict(info or {})
        if self.model_family is not served.family:  # the checkpoint renames its audio tokens: recorded
            self._info["audio_tokens"] = {
                "placeholder": self.model_family.placeholder,
                "audio_token": self.model_family.audio_token,
            }
        self.reuse = reuse_for(settings, served.family)
        if self.reuse != "off":
            self._fall_back_where_the_checkpoint_departs()
        self.max_clip_seconds = clip_window_seconds(self.processor, self.model_family)
        parts_family = self.model_family.rendering == "parts"
        # the family's own processor per micro-batch; a parts family with the fast path (``reuse``) takes it
        # from its template's text (Gemma 4) or, where it tokenizes chats, its token ids (Voxtral), and each
        # clip's features alone
        self.processed = parts_family and self.reuse == "off"
        self.forward_names = forward_names(self.model, self.model_family) if parts_family else frozenset()
        self.context_tokens: int | None = getattr(
            self.model.config.get_text_config(), "max_position_embeddings", None
        )
        tokenizer = self.processor.tokenizer
        audio_token = self.model_family.audio_token or getattr(self.processor, "audio_token", None)
        self.audio_token_id: int | None = (
            tokenizer.convert_tokens_to_ids(audio_token) if isinstance(audio_token, str) else None
        )
        self.pad_token_id = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        configured = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        end_of_turn = end_of_turn_token(self.processor, self.model_family)
        self.stop_ids = stop_token_ids(tokenizer, configured, end_of_turn)
        set_aside = set_aside_generation_settings(self.model)
        if set_aside:
            self._info["generation_config_set_aside"] = set_aside
        if self.suppresses_audio_token:  # recorded: the answer can never hold it
            self._info["suppressed_tokens"] = [audio_token]
        tokenizer.padding_side = "left"
        # where the time went (``lost``: in attempts that ran out of memory, ``memory.Halving``; ``decode_setup``:
        # of ``decode``, the reuse path's first two steps of each decode, the eager one and the CUDA graph's
        # capture); the work done, for benchmarks: clips and their audio tokens through the encoder, positions
        # through the language model (prompt tokens read without padding, tokens generated, and the padding
        # positions the reuse path's prefill computed besides, and those a read's rows shared and read once),
        # the reuse path's decodes and their steps, attempts out of memory
        phases = ("features", "encode", "encode_ahead", "generate", "prefill", "decode", "decode_setup")
        self.seconds = dict.fromkeys((*phases, "lost"), 0.0)
        counted = (
            "encoded_clips",
            "encoded_audio_tokens",
            "lm_tokens",
            "lm_padding",
            "lm_read_once",
            "decodes",
            "decode_steps",
            "out_of_memory",
            "halved_untried",
        )
        self.work = dict.fromkeys((*counted, "encode_ahead_stopped"), 0)
        self.halving = Halving(self.device, self.seconds, self.work)
        self.clips = ClipFeaturizer(
            name,
            self.processor,
            self.model_family,
            self.device,
            self.audio_token_id,
            self.seconds,
            FEATURE_CACHE_BYTES,
        )
        self.sampling_rate = self.clips.sampling_rate
        self.scratch = FromScratch(self, settings.cache)
        self.path: ReusePath | None = None
        if self.reuse != "off":
            ids = (self.audio_token_id, self.pad_token_id, self.stop_ids)
            parts = PARTS[self.model_family.name](self.model, settings.encoder)
            self.path = ReusePath(
                parts,
                self.model,
                self.model_family,
                settings,
                self.reuse,
                self.device,
                ids,
                self.respond,
                (self.seconds, self.work),
            )
        # without the reuse path, the paths asked for are recorded as not used, resolved (and any fallback said)
        # once here: ``info`` is read again on every record update
        self._unused_paths: dict[str, Any] = {}
        if self.path is None:
            paths = FastPaths.resolve(settings.compile, settings.cuda_graphs, self.device, settings.fused)
            paths.compile = paths.cuda_graphs = paths.fused = False  # transformers' generate: no path applies
            self._unused_paths = paths.info()
        encodes_ahead = self.path is not None and self.path.encodes_ahead
        stream = SideStream(self.device, self.clips.on_device or encodes_ahead)
        self.clips.stream = stream
        if self.path is not None:
            self.path.stream = stream
        self.clips.trim(
            self.model_family.encoder_reads_valid_frames
            or (self.path is not None and settings.encoder == "valid")
        )
        self._ahead: dict[str, _Ahead] = {}  # prepared by ``prefetch``, by request key
        self.halted = False  # stop() was called: generate returns after the batch in hand

    def _fall_back_where_the_checkpoint_departs(self) -> None:
        """The fast path off where this checkpoint departs from what it writes (``fast_path_departure``):
        by default to ``generate``, said once and recorded (``reuse: off (why)``), rather than an error line
        for each prompt that ``generate`` answers; where ``-o reuse`` asked for it, an error."""
        why = fast_path_departure(self.processor, self.model_family, self.model.config)
        if why is None:
            return
        if self.settings.reuse is not None:
            raise AudioICLError(f"backend option reuse={self.settings.reuse}: {self.name}: {why}")
        log.warning("hf backend: %s: the fast path is off: %s; answering with generate", self.name, why)
        self.reuse = "off"
        self._info["reuse"] = f"off ({why})"

    @classmethod
    def around(cls, name: str, model: Any, processor: Any, **options: Any) -> HFBackend:
        """The backend around a model already in memory (the benchmarks build full-size ones with random
        weights on the GPU): its family from its config, its device from its weights; ``options`` as ``-o``."""
        family = family_of(model.config.model_type)
        return cls(name, Served(model, processor, family, model.device), KIND.parse(options))

    def with_options(self, **values: Any) -> HFBackend:
        """Another backend around the same model with some options set otherwise (parsed values, as
        ``KIND.parse`` makes them): the benchmarks and tests compare paths on one loaded model."""
        settings = self.settings.replace(**values)
        info = (
            {**self._info, "reuse": reuse_for(settings, self.model_family)}
            if "reuse" in self._info
            else self._info
        )
        return HFBackend(
            self.name, Served(self.model, self.processor, self.model_family, self.device), settings, info
        )

    @property
    def family(self) -> str:
        """The system-prompt family (``prompts.sets.DEFAULT_SYSTEM``)."""
        return self.model_family.system_family

    @property
    def info(self) -> dict[str, Any]:
        """Facts for the run record, the fast paths' as they stand (a path that fell back says why), and on a
        GPU the most memory this process's tensors have held so far (``peak_memory_gib``)."""
        made = {**self._info, **(self.path.info() if self.path is not None else self._unused_paths)}
        if self.device.type == "cuda":
            made["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(self.device) / 2**30, 2)
        return made

    @property
    def suppresses_audio_token(self) -> bool:
        return self.model_family.suppress_audio_token and self.audio_token_id is not None

    # ----------------------------------------------------------------- the protocol

    def stop(self) -> None:
        """Make ``generate`` return after the batch in hand, raising ``GenerationStopped`` with the answers
        it has (called from a signal handler: it only sets a flag)."""
        self.halted = True

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]:
        if self.halted:
            raise GenerationStopped({})
        prepared, responses = self.prepare(requests)
        prepared, too_long = self._within_context(prepared, config.max_new_tokens)
        responses.update(too_long)
        try:
            if self.path is not None and config.temperature <= 0:
                responses.update(self.path.answer(prepared, config, self.halving, lambda: self.halted))
            else:
                responses.update(self.scratch.answer(prepared, config))
        except GenerationStopped as stopped:
            raise GenerationStopped({**responses, **stopped.answered}) from None
        return [responses.get(index) or Response.failed("no response") for index in range(len(requests))]

    def prefetch(self, requests: Sequence[Request], config: GenerationConfig | None = None) -> None:
        """Prepare ``requests`` ahead of their ``generate`` (rendered, features extracted, tokenized; for a
        greedy ``config`` on the reuse path, where it encodes ahead, their clips encoded): the runner calls
        this for the windows ahead while this one is answered."""
        prepared, failed = self._prepare_now(requests)
        ahead = {requests[item.index].key: _Ahead(requests[item.index], item, None) for item in prepared}
        ahead.update({requests[i].key: _Ahead(requests[i], None, response) for i, response in failed.items()})
        with self.clips.lock:
            self._ahead.update(ahead)
        path = self.path
        if (
            path is not None
            and path.encodes_ahead
            and config is not None
            and config.temperature <= 0
            and prepared
        ):
            path.encode_ahead_of(prepared)

    def prepare(self, requests: Sequence[Request]) -> tuple[list[PromptReady], dict[int, Response]]:
        """The requests rendered, their clips' features extracted; those that cannot be, as error
        responses by request index. What ``prefetch`` prepared for the same request object is taken from
        there (a key alone is not enough: a later run on this backend may ask it with another chat)."""
        with self.clips.lock:
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

    def _prepare_now(self, requests: Sequence[Request]) -> tuple[list[PromptReady], dict[int, Response]]:
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
        self.clips.prefetch([part for _, parts in rendered.values() for part in parts])
        prepared: list[PromptReady] = []
        for index, (text, parts) in rendered.items():
            try:
                request = requests[index]
                prepared.append(self._prepare_text(index, text, parts, request.episode_id, request.chat))
            except (AudioICLError, RuntimeError, ValueError) as exc:  # the processor refused this prompt
                responses[index] = Response.failed(f"cannot prepare the prompt: {exc}")
        return prepared, responses

    def _render(self, request: Request) -> tuple[str, list[AudioPart]]:
        """The request's text and clips at the model's rate: a continuation's text with no template, else the
        chat template's; a family that makes its inputs from the chat itself (``tokenizes_chat``) has no text
        here, only its clips counted against its limit."""
        family = self.model_family
        if request.chat.continuation:
            text, parts = render_continuation(request.chat, family, self.processor.tokenizer)
        elif family.tokenizes_chat:
            text, parts = "", list(request.chat.audio_parts())
            check_clip_count(len(parts), family, family.max_clips)
        else:
            text, parts = render_chat(request.chat, family, self.processor.apply_chat_template)
        return text, [at_rate(part, self.sampling_rate) for part in parts]

    def _within_context(
        self, prepared: list[PromptReady], new_tokens: int
    ) -> tuple[list[PromptReady], dict[int, Response]]:
        """The prompts that fit the language model's context with ``new_tokens`` more, and an error response
        for each that does not: past ``max_position_embeddings`` a model reads positions it never learned."""
        if self.context_tokens is None or self.processed:  # a parts family's: checked on its batch's inputs
            return prepared, {}
        fits: list[PromptReady] = []
        refused: dict[int, Response] = {}
        for item in prepared:
            if len(item.ids) + new_tokens <= self.context_tokens:
                fits.append(item)
            else:
                refused[item.index] = self.context_error(len(item.ids), new_tokens)
        return fits, refused

    def context_error(self, prompt_tokens: int, new_tokens: int) -> Response:
        return Response.failed(
            f"{prompt_tokens} prompt tokens and {new_tokens} new ones do not fit the model's context "
            f"of {self.context_tokens} tokens (max_position_embeddings)"
        )

    def _prepare_text(
        self, index: int, text: str, parts: Sequence[AudioPart], group: str = "", chat: Chat | None = None
    ) -> PromptReady:
        """A rendered prompt (one placeholder per clip, at the model's rate) with its clips' features,
        tokens expanded; for a family that tokenizes chats, ``chat``'s token ids as its ``chat_inputs``
        makes them (``text`` is empty)."""
        clips = [self.clips.of(part) for part in parts]
        digests = [part.digest for part in parts]
        if self.model_family.tokenizes_chat:
            if chat is None:
                raise ValueError(f"{self.model_family.label} makes its prompts from chats; none was given")
            ids = self.model_family.prompt_ids(self.processor, chat, self.sampling_rate)
            return PromptReady(index, "", clips, digests, group, ids, chat)
        expanded = expand_audio_tokens(text, clips, self.model_family, self.processor)
        # as ``AudioFamily.process`` tokenizes: nothing added to what the template wrote (Gemma's writes <bos>)
        ids = self.processor.tokenizer(expanded, add_special_tokens=False)["input_ids"]
        return PromptReady(index, expanded, clips, digests, group, ids)

    def respond(self, tokens: Sequence[int], n_in: int, n_audio: int, config: GenerationConfig) -> Response:
        """The prompt's answer; one its tokenizer cannot decode (an id it does not know: mistral-common's raises
        KeyError) is the prompt's error line, not the end of the run."""
        try:
            text, n_out = decode_answer(self.processor.tokenizer, tokens, self.stop_ids, config.stop)
        except (KeyError, ValueError, IndexError, OverflowError) as exc:
            error = f"cannot decode the answer: {type(exc).__name__}: {exc}"
            return Response(None, error, Usage(n_in, len(tokens), n_audio))  # what it cost, for the counts
        return Response(text, usage=Usage(n_in, n_out, n_audio))

    def reset_counters(self) -> None:
        """``seconds`` and ``work`` back to zero, in place (the fast path and the halving count into them)."""
        self.seconds.update(dict.fromkeys(self.seconds, 0.0))
        self.work.update(dict.fromkeys(self.work, 0))

    def clear_caches(self) -> None:
        """Empty the feature and audio-embedding caches: what follows runs as from a cold start."""
        self.clips.features.clear()
        if self.path is not None:
            self.path.embeddings.clear()

    def close(self) -> None:
        self.model = None
        self.path = None
        self._ahead.clear()
        self.halving.free_cache()


def make_hf(name: str, settings: Settings, workload: Workload | None = None) -> Backend:
    device = torch_device(settings)
    allocator = configure_allocator(settings.allocator, device)  # before the weights take their memory
    loaded = load_checkpoint(name, settings, device, chats=workload is None or workload.chats)
    precision = {"precision": settings.precision}
    if settings.precision == "fp8":  # before the fast path fuses the decoder's MLPs around its projections
        precision = quantize_decoder(loaded.model, loaded.family, settings.encoder, device).info()
    info = {
        **backend_info(loaded, settings, device),
        **precision,
        "allocator": allocator,
        "reuse": reuse_for(settings, loaded.family),
        "encoder": settings.encoder,
        "pack": settings.pack,
    }
    return HFBackend(
        f"hf:{name}", Served(loaded.model, loaded.processor, loaded.family, device), settings, info
    )
