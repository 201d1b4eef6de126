"""The reuse path as the ``hf`` backend runs it (``-o reuse=audio|prefix``): each clip through the audio encoder
once (embeddings cached by content digest, encoded ahead in the runner's preparing thread where asked), an
episode's prompts packed into rows that share their prefix (``rows``), read a batch at a time and decoded
several batches together within a KV budget (``decode``), with the decoder's norms and MLPs fused or compiled
and its decode step captured as a CUDA graph (``graphs``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from audioicl.lru import BoundedLRU

from ...base import GenerationConfig, GenerationStopped, Response
from ..features import ClipFeatures, SideStream, feature_batch
from ..memory import Halving
from .decode import CachesNotJoinable, generate_rows
from .graphs import FastPaths, Fusion, compile_decoder, compiled_or_eager, first_line, fuse_decoder
from .parts import ModelParts
from .plan import JoinBudget, decode_reads
from .rows import Row, batches, kv_bytes_per_position, pack, pack_rows, runs, token_sequence

log = logging.getLogger("audioicl.backends")
ENCODE_CLIPS = 32  # clips per audio encoder call of the reuse path
# batches of the reuse path decoded together where ``decode_batches`` is auto, by device type, at most: a
# decode step reads every weight (every expert of an MoE) whatever its batch, so more prompts a step is
# nearly free on a GPU; the CPU computes each prompt's step in full, so it gains nothing there
AUTO_DECODE_BATCHES = {"cuda": 4}
# ... and only while their joined KV cache takes at most this share of the GPU memory free once the weights
# are loaded: on an 80 GB card Qwen3-Omni's weights leave too little to join its long batches (measured:
# the batches that ran out of memory cost more than the joined decode saved), Qwen2.5-Omni's leave room for 4
KV_BUDGET_OF_FREE = 0.25
AUDIO_CACHE_BYTES = 4096 * 2**20  # audio embeddings of the reuse path, on the model's device


def free_memory(device: torch.device) -> int:
    """Bytes this process can still allocate on ``device``: what the device reports free, and what the caching
    allocator holds but no tensor uses (weights replaced at load, as ``precision=fp8`` replaces the decoder's,
    stay there until reused)."""
    cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
    return torch.cuda.mem_get_info(device)[0] + cached


class ReusePath:
    """The reuse path over a loaded model's ``parts``: ``answer`` gives the greedy answers of prepared prompts.
    ``respond(tokens, n_in, n_audio, config)`` turns a prompt's new tokens into its response (the backend's);
    ``seconds`` and ``work`` are the backend's counters."""

    def __init__(
        self,
        parts: ModelParts,
        model: Any,
        family: Any,
        settings: Any,
        mode: str,
        device: torch.device,
        ids: tuple[int | None, int, list[int]],
        respond: Callable[..., Response],
        counters: tuple[dict[str, float], dict[str, int]],
    ):
        self.parts, self.model, self.device, self.reuse = parts, model, device, mode
        self.family = family
        self.audio_token_id, self.pad_token_id, self.stop_ids = ids
        self._response = respond
        self.seconds, self.work = counters
        self.packed = settings.pack == "on"
        self.decode_batches, self.encode_ahead = settings.decode_batches, settings.encode_ahead
        self.embeddings: BoundedLRU[str, torch.Tensor] = BoundedLRU(
            AUDIO_CACHE_BYTES, lambda made: made.numel() * made.element_size()
        )
        self._encode_lock = threading.Lock()  # one encoder call at a time (``_embeddings``)
        self._cache_lock = threading.Lock()  # ``embeddings``, read and written by both threads
        # the next window's clips through the audio encoder in the runner's preparing thread (``prefetch``),
        # while this window's prompts are read: a CUDA device's (auto)
        self.encodes_ahead = settings.encode_ahead == "on" or (
            settings.encode_ahead == "auto" and device.type == "cuda"
        )
        self.stream = SideStream(device, False)  # the backend's, shared with its clip features
        self.paths = FastPaths.resolve(settings.compile, settings.cuda_graphs, device, settings.fused)
        self._fusion: Fusion | None = None  # the Triton kernels' forwards (``graphs.fuse_decoder``)
        auto = AUTO_DECODE_BATCHES.get(device.type, 1)
        self.decoded_together = auto if self.decode_batches == "auto" else int(self.decode_batches)
        self._decode_batches_fallback = ""  # why decoded_together fell back to 1 (``_join_refused``)
        # the bytes a joined decode's KV cache may take (where decode_batches is auto on a GPU)
        auto_budget = self.decode_batches == "auto" and device.type == "cuda"
        self.join_budget = JoinBudget(
            int(free_memory(device) * KV_BUDGET_OF_FREE) if auto_budget else None,
            kv_bytes_per_position(parts.decoder, model.dtype),
        )
        if self.paths.compile:
            compile_decoder(parts.decoder)
        elif self.paths.fused:
            self._fuse(parts.decoder)

    def answer(
        self, prepared: Sequence[Any], config: GenerationConfig, halving: Halving, halted: Callable[[], bool]
    ) -> dict[int, Response]:
        """Greedy answers of ``prepared`` prompts (``backend.PromptReady``): packed into rows, read ``batch_size``
        prompts at a time, decoded in groups (``plan.decode_reads``: a joined group that runs out of memory
        decoded read by read, a read that does halved by ``halving``). Once ``halted()``, raises
        ``GenerationStopped`` with the answers so far."""
        rows, clips, refused = self.pack(prepared)
        try:
            return refused | decode_reads(
                batches(rows, max(config.batch_size, 1)),
                self.decoded_together,
                self.join_budget,
                config.max_new_tokens - 1,
                lambda b: self._generate_rows(b, self._clips_of(b, clips), config),
                halving,
                halted,
            )
        except GenerationStopped as stopped:  # the prompts refused at packing are answered too
            raise GenerationStopped(refused | stopped.answered) from None

    def encode_ahead_of(self, prepared: Sequence[Any]) -> None:
        """The clips of ``prepared`` through the encoder now (the runner's preparing thread), on the side
        stream; a failure is said once and left to ``answer``, which encodes the rest."""
        clips = {d: c for item in prepared for d, c in zip(item.digests, item.clips, strict=True)}
        try:
            with torch.inference_mode():
                self._embeddings(clips, ahead=True)
        except (RuntimeError, ValueError) as exc:  # out of memory, a clip the encoder refuses
            said = log.debug if self.work["encode_ahead_stopped"] else log.warning
            said("hf backend: encoding ahead stopped, generate encodes the rest: %s", first_line(exc))
            self.work["encode_ahead_stopped"] += 1

    def _generate_rows(
        self, rows: Sequence[Row], clips: dict[str, ClipFeatures], config: GenerationConfig
    ) -> dict[int, Response]:
        """Greedy answers of the prompts in ``rows`` (the reuse path): read ``config.batch_size`` prompts
        at a time (each read's rows packed with ``-o pack=on``), all decoded together (``plan.decode_groups``)."""
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
                        self.work,
                    )

            try:
                tokens = compiled_or_eager(read_and_decode, parts.decoder, self.paths)
            except CachesNotJoinable as exc:
                return self._join_refused(rows, clips, config, str(exc))
        self.seconds["generate"] += time.perf_counter() - started
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

    def _join_refused(
        self, rows: Sequence[Row], clips: dict[str, ClipFeatures], config: GenerationConfig, why: str
    ) -> dict[int, Response]:
        """Decode each batch alone from now on (``decode_batches`` 1), said once and recorded; ``rows``
        again, one batch at a time (nothing of the refused attempt is kept: it stopped before decoding)."""
        if not self._decode_batches_fallback:  # the call's later groups were formed before: said once
            log.warning("hf backend: decode_batches 1, each batch decoded alone: %s", why)
        self.decoded_together = 1
        self._decode_batches_fallback = why
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

    def info(self) -> dict[str, Any]:
        """The fast paths (``graphs.FastPaths.info``), the reuse path's attention and the MoE experts
        implementation, for the record."""
        config = self.model.config.get_text_config()
        experts = getattr(config, "_experts_implementation", None) if hasattr(config, "num_experts") else None
        made = {**self.paths.info(), **({"experts": experts} if experts else {})}
        if self.paths.fused and self._fusion:
            made["fused"]["modules"] = self._fusion.counts()
        decode: dict[str, Any] = {"asked": self.decode_batches, "used": self.decoded_together}
        if self.join_budget.limit is not None:
            decode["kv_budget_gib"] = round(self.join_budget.limit / 2**30, 2)
        if self.join_budget.lowered:
            decode["joins_out_of_memory"] = self.join_budget.lowered
        if self._decode_batches_fallback:
            decode["fallback"] = self._decode_batches_fallback
        ahead = {"asked": self.encode_ahead, "used": self.encodes_ahead}
        return {**made, "attention": self.parts.attention(), "decode_batches": decode, "encode_ahead": ahead}

    def _embeddings(self, clips: dict[str, ClipFeatures], ahead: bool = False) -> dict[str, torch.Tensor]:
        """Each clip's audio embedding, from the cache or through the encoder (longest first, in chunks).
        ``ahead``: called from the runner's preparing thread (``prefetch``): on the side stream, each chunk
        finished before it is cached, its seconds ``encode_ahead`` (they overlap the model's calls). The
        two threads take turns at the encoder (``_encode_lock``: its attention swap is the tower's config),
        and read the cache without waiting for it (``_cache_lock``): what the model's thread finds there is
        finished, since an embedding made on the side stream is cached only once its stream has finished it."""
        with self._cache_lock:
            found = self._cached(clips)
        missing = sorted((d for d in clips if d not in found), key=lambda d: clips[d].valid, reverse=True)
        started = time.perf_counter()
        encoded = False
        for begin in range(0, len(missing), ENCODE_CLIPS):
            chunk = missing[begin : begin + ENCODE_CLIPS]
            with self._encode_lock:
                with self._cache_lock:
                    meanwhile = self._cached(chunk)  # encoded by the other thread since
                found.update(meanwhile)
                todo = {digest: clips[digest] for digest in chunk if digest not in meanwhile}
                if todo:
                    with self.stream.on() if ahead else nullcontext():  # synchronized at its end
                        made = self._encode(todo)
                    with self._cache_lock:
                        for digest, embedding in made.items():
                            self.embeddings.put(digest, embedding)
                    found.update(made)
                    encoded = True
        if encoded and self.device.type == "cuda" and not ahead:
            torch.cuda.synchronize(self.device)  # the encoder's seconds, not the prefill's
        self.seconds["encode_ahead" if ahead else "encode"] += time.perf_counter() - started
        return found

    def _cached(self, digests: Iterable[str]) -> dict[str, torch.Tensor]:
        """The embeddings of ``digests`` the cache holds (the caller holds ``_cache_lock``)."""
        found = {digest: self.embeddings.get(digest) for digest in digests}
        return {digest: embedding for digest, embedding in found.items() if embedding is not None}

    def _encode(self, clips: dict[str, ClipFeatures]) -> dict[str, torch.Tensor]:
        """``clips`` through the encoder in one call (the caller holds ``_encode_lock``, and caches them)."""
        made = list(clips.values())
        features, mask = feature_batch(made, self.family, self.model.dtype)
        valid = mask.sum(dim=1).to(self.device)
        encoded = self.parts.encode(features.to(self.device), valid, [clip.tokens for clip in made])
        by_digest = dict(zip(clips, encoded, strict=True))
        self.work["encoded_clips"] += len(made)
        self.work["encoded_audio_tokens"] += sum(clip.tokens for clip in made)
        return by_digest

    def pack(self, prepared: Sequence[Any]) -> tuple[list[Row], dict[str, ClipFeatures], dict[int, Response]]:
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
