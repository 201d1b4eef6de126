"""The reuse path's prefill and decode: a batch's rows read into a static KV cache of their own, several
batches' caches joined and decoded as one (a decode step reads every weight whatever its batch), one token per
prompt per step, as a CUDA graph where ``graphs`` allows."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import transformers
from transformers import cache_utils

from .attention import reuse_attention_in
from .graphs import FastPaths, replayed
from .parts import ModelParts
from .rows import Layout, Member, Row, common_prefix, layout


def cache_keyword(decoder: Any) -> str:
    """The name the decoder's ``forward`` takes its KV cache under (``cache`` from transformers 5.24)."""
    import inspect

    return "cache" if "cache" in inspect.signature(decoder.forward).parameters else "past_key_values"


@dataclass
class Prefilled:
    """A batch after its prompts were read: the layout, the filled KV cache, and every member's logits
    for its first generated token ([rows, width, vocab])."""

    plan: Layout
    cache: Any
    logits: torch.Tensor


def _read(
    parts: ModelParts, cache: Any, keyword: str, masks: dict[str, torch.Tensor], **inputs: Any
) -> torch.Tensor:
    """The decoder's last hidden states over ``inputs`` (tokens or embeddings, position ids, cache positions)
    under ``masks`` (``ModelParts.masks``: one mask, or one by layer type where the decoder has several),
    filling ``cache`` (passed under ``keyword``: ``cache_keyword``), under the reuse path's attention
    (``attention.reuse_attention``)."""
    mask = masks if len(masks) > 1 else masks["full_attention"]
    with reuse_attention_in(parts.text_config):
        return parts.decoder(
            **inputs, attention_mask=mask, use_cache=True, **{keyword: cache}
        ).last_hidden_state


def prefill(
    parts: ModelParts,
    reads: Sequence[Sequence[Row]],
    audio: dict[str, torch.Tensor],
    steps: int,
    pad_id: int,
    dtype: torch.dtype,
    device: torch.device,
    work: dict[str, int] | None = None,
) -> Prefilled:
    """Read every prompt of ``reads`` (each shared prefix once) with room for ``steps`` more tokens per
    member, for one decode of them all. ``audio``: each clip's embedding by digest. Each read (rows) is
    padded to its own longest row and read into a cache of its own, and the caches are joined
    (``join_caches``): a decode of many prompts for the memory of a prefill of fewer. What every row of a read
    begins with (``rows.common_prefix``: the system prompt, a task's instruction and Morse letter bank) is
    read once, for one row, and copied into every row's cache (``work["lm_read_once"]`` counts the positions
    this saved)."""
    plan = layout([row for run in reads for row in run], steps, pad_id, device)
    keyword = cache_keyword(parts.decoder)
    caches, logits = [], []
    first = 0
    for run in reads:
        taken = slice(first, first + len(run))
        length = max(row.length for row in run)
        cache = parts.cache(plan.total)
        shared = _read_common_prefix(parts, run, audio, cache, keyword, pad_id, dtype, device)
        if work is not None:
            work["lm_read_once"] = work.get("lm_read_once", 0) + shared * (len(run) - 1)
        hidden = _read_span(parts, plan, run, taken, slice(shared, length), audio, cache, keyword, dtype)
        rows_index = torch.arange(len(run), device=device)[:, None]
        last = (plan.last[taken] - shared).clamp(min=0)  # a row's unused member slots (last 0) read anything
        logits.append(parts.head(hidden[rows_index, last]))
        caches.append(cache)
        first += len(run)
        del hidden
    return Prefilled(plan, join_caches(caches, plan.prefill), torch.cat(logits))


def _read_span(
    parts: ModelParts,
    plan: Layout,
    rows: Sequence[Row],
    taken: slice,
    span: slice,
    audio: dict[str, torch.Tensor],
    cache: Any,
    keyword: str,
    dtype: torch.dtype,
) -> torch.Tensor:
    """The decoder's last hidden states over positions ``span`` of ``rows`` (``plan``'s rows ``taken``), their
    clips' embeddings in place, read into ``cache`` after what it holds (the positions before ``span``)."""
    ids = plan.ids[taken, span]
    embeds = parts.decoder.get_input_embeddings()(ids)
    _place_audio(embeds, rows, audio, span.start)
    return _read(
        parts,
        cache,
        keyword,
        parts.masks(plan, span, taken, dtype, prefill=True),
        inputs_embeds=embeds,
        position_ids=plan.positions[taken, span],
        cache_position=torch.arange(span.start, span.stop, device=ids.device),
        **(parts.read_inputs(ids) if parts.read_inputs is not None else {}),
    )


def _read_common_prefix(
    parts: ModelParts,
    rows: Sequence[Row],
    audio: dict[str, torch.Tensor],
    cache: Any,
    keyword: str,
    pad_id: int,
    dtype: torch.dtype,
    device: torch.device,
) -> int:
    """The positions every row of ``rows`` begins with (``common_prefix``), read once into a cache of one
    row and copied into ``cache``'s rows, whose next writes then start after them; their count (0 where too
    few to be worth a call of their own, or where the cache is not laid out as ``fill_rows`` writes it)."""
    prefix = common_prefix(rows)
    if prefix is None or not _fillable(cache):
        return 0
    row = [Row((Member(prefix, 0, 0),))]
    alone = layout(row, 0, pad_id, device)
    once = parts.cache(alone.total)
    _read_span(parts, alone, row, slice(None), slice(0, len(prefix)), audio, once, keyword, dtype)
    fill_rows(cache, once, len(rows), len(prefix))
    return len(prefix)


def _fillable(cache: Any) -> bool:
    """Whether ``cache``'s layers are transformers' static layers as ``fill_rows`` writes them."""
    return all(
        isinstance(layer, _KEEPS_NOTHING)
        or all(hasattr(layer, name) for name in ("lazy_initialization", "cumulative_length"))
        for layer in cache.layers
    )


def fill_rows(cache: Any, prefix: Any, rows: int, length: int) -> None:
    """``cache`` (empty, ``rows`` rows) given the first ``length`` positions of ``prefix`` (a cache of one
    row) in every row, its next writes after them (transformers' ``StaticLayer``: ``keys``/``values``
    [rows, heads, max length, dim], the next write at ``cumulative_length``)."""
    for layer, made in zip(cache.layers, prefix.layers, strict=True):
        if isinstance(layer, _KEEPS_NOTHING) or getattr(made, "keys", None) is None:
            continue
        keys, values = made.keys[:, :, :length], made.values[:, :, :length]
        layer.lazy_initialization(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1))
        layer.keys[:, :, :length] = keys
        layer.values[:, :, :length] = values
        layer.cumulative_length.fill_(length)


def _place_audio(
    embeds: torch.Tensor, rows: Sequence[Row], audio: dict[str, torch.Tensor], offset: int = 0
) -> None:
    """Each clip's embedding in place of its audio tokens, where a member reads it itself (a clip inside the
    shared prefix is the trunk's); ``embeds`` holds the rows' positions from ``offset`` on (a clip before it
    is in the cache already, one that straddles it is placed from there)."""
    width = embeds.shape[1]
    for r, row in enumerate(rows):
        for member in row.members:
            for clip in member.sequence.clips:
                begin = max(clip.start, member.shared, offset + member.shared - member.start)
                end = min(clip.start + clip.tokens, member.shared + width + offset - member.start)
                if begin >= end:
                    continue  # in the shared prefix (the trunk's), or before ``offset``
                at = member.start + begin - member.shared - offset
                embeds[r, at : at + end - begin] = audio[clip.digest][begin - clip.start : end - clip.start]


_KEEPS_NOTHING = getattr(cache_utils, "DummyLayer", ())  # transformers 5.2x: a layer with no cache


class CachesNotJoinable(RuntimeError):
    """transformers' static cache is not laid out as ``join_caches`` reads it (another release)."""


def join_caches(caches: Sequence[Any], filled: int) -> Any:
    """One static cache holding the rows of ``caches`` one after another, its next write at position
    ``filled`` (where the decode's first slot is, past the longest run's prompt): the first cache, its layers'
    keys and values replaced by the joined ones layer by layer, the others emptied as it goes (so the join
    needs one layer's copy more, not the whole cache's).

    transformers' ``StaticLayer`` (5.17 to 5.25) keeps ``keys`` and ``values`` as [rows, heads, length,
    dim] tensors and writes its next tokens at ``cumulative_length``; a release that keeps them otherwise
    raises ``CachesNotJoinable``. A layer that keeps nothing (a ``DummyLayer``: Gemma 4's layers that read
    another layer's keys) is left as it is."""
    if len(caches) == 1:
        return caches[0]  # it read the longest row: its next write is at ``filled`` already
    keeping = [at for at, layer in enumerate(caches[0].layers) if not isinstance(layer, _KEEPS_NOTHING)]
    layers = [[cache.layers[at] for at in keeping] for cache in caches]
    if not all(
        all(hasattr(layer, name) for name in ("keys", "values", "cumulative_length"))
        for cache_layers in layers
        for layer in cache_layers
    ):
        raise CachesNotJoinable(
            f"transformers {transformers.__version__}'s static cache keeps no keys, values and "
            "cumulative_length on its layers"
        )
    for at, layer in enumerate(layers[0]):
        others = [cache_layers[at] for cache_layers in layers[1:]]
        layer.keys = torch.cat([layer.keys, *(other.keys for other in others)])
        layer.values = torch.cat([layer.values, *(other.values for other in others)])
        layer.batch_size = layer.keys.shape[0]
        for other in others:
            other.keys = other.values = None
        layer.cumulative_length.fill_(filled)
    return caches[0]


class DecodeStep:
    """One generation step of a batch over fixed buffers, so that every step is the same kernels on the same
    memory (what a CUDA graph replays): ``load(tokens, t)`` puts step ``t``'s inputs in place (the tokens
    read in, their slots' mask, positions and cache positions), ``run()`` reads them into the cache and
    returns every member's next token ([rows, width], a buffer the next ``run`` overwrites). The masks of
    all ``steps`` are made at once."""

    def __init__(self, parts: ModelParts, plan: Layout, cache: Any, steps: int, dtype: torch.dtype):
        self.parts, self.plan, self.cache = parts, plan, cache
        width, device = plan.width, plan.ids.device
        slots = slice(plan.prefill, plan.prefill + max(steps, 1) * width)
        self.masks = parts.masks(plan, slots, slice(None), dtype)  # each [rows, 1, steps x width, total]
        self.tokens = torch.zeros((len(plan.ids), width), dtype=torch.long, device=device)
        self.mask = {kind: mask[:, :, :width].clone() for kind, mask in self.masks.items()}
        self.positions = plan.positions[:, plan.prefill : plan.prefill + width].clone()
        self.cache_position = torch.arange(plan.prefill, plan.prefill + width, device=device)
        self.keyword = cache_keyword(parts.decoder)

    def load(self, tokens: torch.Tensor, t: int) -> None:
        start = self.plan.prefill + t * self.plan.width
        self.tokens.copy_(tokens)
        for kind, mask in self.mask.items():
            mask.copy_(self.masks[kind][:, :, t * self.plan.width : (t + 1) * self.plan.width])
        self.positions.copy_(self.plan.positions[:, start : start + self.plan.width])
        self.cache_position.copy_(torch.arange(start, start + self.plan.width, device=self.tokens.device))

    def run(self) -> torch.Tensor:
        hidden = _read(
            self.parts,
            self.cache,
            self.keyword,
            self.mask,
            input_ids=self.tokens,
            position_ids=self.positions,
            cache_position=self.cache_position,
        )
        return self.parts.head(hidden).argmax(-1)


def generate_rows(
    parts: ModelParts,
    reads: Sequence[Sequence[Row]],
    audio: dict[str, torch.Tensor],
    steps: int,
    stop_ids: Sequence[int],
    pad_id: int,
    dtype: torch.dtype,
    device: torch.device,
    seconds: dict[str, float] | None = None,
    paths: FastPaths | None = None,
    work: dict[str, int] | None = None,
) -> dict[int, list[int]]:
    """Greedy tokens (``steps`` at most, fewer once every prompt has stopped) for every prompt in ``reads``
    (rows read together, ``prefill``; all decoded together), by request index. ``seconds``: where the time
    went is added to its ``prefill`` and ``decode`` (and of the decode, to ``decode_setup``, what its first
    two steps took past the prefill's end: the eager one and the CUDA graph's capture). ``paths``: with CUDA
    graphs on, the first decode step runs eagerly (compiling and warming what it needs), the rest replay its
    capture; the host queues both behind the prefill's kernels without waiting for them, and asks whether
    every prompt has stopped from the second step on. ``work``: the positions read once for several rows are
    added to its ``lm_read_once``, the decode to ``decodes`` and its steps after the prefill's token to
    ``decode_steps``."""
    seconds = {} if seconds is None else seconds
    clock = _ReadClock(device)
    stops = _on_device(stop_ids, device)
    done_reading = prefill(parts, reads, audio, steps - 1, pad_id, dtype, device, work)
    clock.read()
    plan, cache = done_reading.plan, done_reading.cache
    tokens = done_reading.logits.argmax(-1)  # [rows, width]
    generated = [tokens]
    done = torch.isin(tokens, stops)
    capturing = paths is not None and paths.cuda_graphs and steps - 1 > 2
    finished = False if capturing else bool(done.all())  # without a capture, waits for the prefill
    step = DecodeStep(parts, plan, cache, steps - 1, dtype)
    run = step.run
    set_up = None
    for t in range(steps - 1):
        if finished:
            break
        if t == 1 and capturing:
            run = replayed(step.run, paths)
        step.load(tokens, t)
        tokens = run().clone()
        generated.append(tokens)
        done |= torch.isin(tokens, stops)
        if t >= 1 or not capturing:
            finished = bool(done.all())  # waits for the step
        if t == 1:
            set_up = time.perf_counter()
    table = torch.stack(generated, dim=-1).tolist()  # [rows, width, steps]
    finish = time.perf_counter()
    reading = clock.seconds()
    seconds["prefill"] = seconds.get("prefill", 0.0) + reading
    seconds["decode"] = seconds.get("decode", 0.0) + finish - clock.started - reading
    setting_up = max((set_up or finish) - clock.started - reading, 0.0)
    seconds["decode_setup"] = seconds.get("decode_setup", 0.0) + setting_up
    if work is not None:
        work["decodes"] = work.get("decodes", 0) + 1
        work["decode_steps"] = work.get("decode_steps", 0) + len(generated) - 1
    return {
        member.sequence.index: table[r][m]
        for r, row in enumerate(row for run in reads for row in run)
        for m, member in enumerate(row.members)
    }


class _ReadClock:
    """When a decode's prefill ended, for its seconds (``seconds()``, once the decode is done): on a GPU, by
    CUDA events around the prefill's kernels (the host queues the decode's first steps before they finish);
    elsewhere, where every kernel has run when it returns, by the host's clock."""

    def __init__(self, device: torch.device):
        self.started = time.perf_counter()
        self._ended = self.started
        self._events = None
        if device.type == "cuda":
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            self._events[0].record()

    def read(self) -> None:
        """The prefill's last kernel is queued."""
        if self._events is None:
            self._ended = time.perf_counter()
        else:
            self._events[1].record()

    def seconds(self) -> float:
        if self._events is None:
            return self._ended - self.started
        return self._events[0].elapsed_time(self._events[1]) / 1e3


def _on_device(values: Sequence[int], device: torch.device) -> torch.Tensor:
    """``values`` as a tensor on ``device``; to a GPU from pinned memory, so that the copy waits for
    nothing queued before it (a copy from pageable memory waits for the whole stream)."""
    made = torch.tensor(list(values), dtype=torch.long)
    if device.type == "cuda":
        return made.pin_memory().to(device, non_blocking=True)
    return made.to(device)
