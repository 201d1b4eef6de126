"""Work the ``hf`` backend does once instead of once per prompt: each clip through the audio encoder once,
and the prompt prefix an episode's k prompts share computed once (``-o reuse=prefix``, the default).

An episode's k-shot prompt is its (k-1)-shot prompt with one more demo before the query, so the k prompts of
one episode share their system prompt, instruction and first demos, token for token and clip for clip. The
runner hands the backend an episode's k prompts together (episode-major order); here they are packed into one
*row*: the longest prompt (the *trunk*) first, then, for every other prompt, only the tokens after the prefix
it shares with the trunk. An attention mask lets each prompt's tokens see the trunk's first ``shared`` tokens
and its own tokens before them, nothing else, and position ids continue each prompt's own count; so every
prompt is computed exactly as it would be alone, with its prefix computed once. Generation then appends one
token per prompt per step to the same row.

A batch's rows are read (prefilled) into a static KV cache of their own; several batches' caches can be joined
and decoded as one (``prefill``'s *reads*, ``join_caches``): a decode step reads every weight whatever its batch,
so it serves more prompts for nearly the same time, while the prefill's memory stays that of one batch.

Nothing here is keyed by what a prompt means: prompts share a row when the runner gives them the same episode
id, and what they share is measured by comparing their tokens and their clips' content digests.

Audio embeddings (the encoder's and projector's output for a clip) are cached by content digest, so a clip
in several prompts of an episode, or the Morse letter bank in every MorseCode prompt, is encoded once while
it stays in the cache (least recently used dropped beyond a size).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
import transformers
from transformers import StaticCache, cache_utils
from transformers.cache_utils import StaticLayer
from transformers.masking_utils import create_bidirectional_mask

from .attention import attention_in_force, batched_windows, reuse_attention_in
from .graphs import FastPaths, replayed, text_model

PAD_SLOT = -1  # owner of a padding position
REUSE_MODES = ("off", "audio", "prefix")


@dataclass(frozen=True)
class ClipSpan:
    """A clip's audio tokens in a prompt: ``tokens`` positions from ``start``."""

    digest: str
    start: int
    tokens: int


@dataclass(frozen=True)
class TokenSequence:
    """One prompt as the model reads it: token ids with every clip's audio tokens expanded, and the clips.
    ``group``: prompts that may share a prefix (the runner's episode)."""

    index: int
    group: str
    ids: tuple[int, ...]
    clips: tuple[ClipSpan, ...]

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def audio_tokens(self) -> int:
        return sum(clip.tokens for clip in self.clips)


def token_sequence(index: int, group: str, ids: Sequence[int], audio_token_id: int, clips) -> TokenSequence:
    """``ids`` with its runs of ``audio_token_id`` matched, in order, to ``clips`` (``(digest, tokens)``)."""
    spans = []
    position = 0
    for digest, tokens in clips:
        while position < len(ids) and ids[position] != audio_token_id:
            position += 1
        run = ids[position : position + tokens]
        if len(run) != tokens or any(token != audio_token_id for token in run):
            raise ValueError(f"prompt {index}: its audio tokens do not match its clips")
        spans.append(ClipSpan(digest, position, tokens))
        position += tokens
    if audio_token_id in ids[position:]:
        raise ValueError(f"prompt {index}: more audio tokens than its clips make")
    return TokenSequence(index, group, tuple(ids), tuple(spans))


def shared_prefix(a: TokenSequence, b: TokenSequence) -> int:
    """How many first tokens ``a`` and ``b`` have in common: the same ids and, in audio, the same clip."""
    length = 0
    for x, y in zip(a.ids, b.ids, strict=False):
        if x != y:
            break
        length += 1
    for clip_a, clip_b in zip(a.clips, b.clips, strict=False):
        if clip_a.start >= length:
            break
        if clip_a != clip_b:
            return min(length, clip_a.start, clip_b.start)
    return length


@dataclass(frozen=True)
class Member:
    """A prompt in a row: its own tokens ``sequence.ids[shared:]`` lie at ``start`` in the row; before
    them it reads the first ``shared`` tokens of its group's trunk, which starts at ``trunk_at`` (the trunk
    reads only its own; a packed row holds several groups one after another)."""

    sequence: TokenSequence
    shared: int
    start: int
    trunk_at: int = 0

    @property
    def own(self) -> int:
        return len(self.sequence) - self.shared


@dataclass(frozen=True)
class Row:
    members: tuple[Member, ...]

    @property
    def length(self) -> int:
        last = self.members[-1]
        return last.start + last.own


def pack(sequences: Sequence[TokenSequence], share: bool) -> list[Row]:
    """Rows of the prompts: with ``share``, one row per group, its longest prompt the trunk and every other
    prompt after it with what it shares with the trunk left out; else one row per prompt."""
    groups: dict[str, list[TokenSequence]] = {}
    for sequence in sequences:
        groups.setdefault(sequence.group if share else str(sequence.index), []).append(sequence)
    rows = []
    for members in groups.values():
        trunk, *others = sorted(members, key=len, reverse=True)
        placed = [Member(trunk, 0, 0)]
        start = len(trunk)
        for sequence in others:
            shared = min(shared_prefix(sequence, trunk), len(sequence) - 1)  # at least one token of its own
            placed.append(Member(sequence, shared, start))
            start += len(sequence) - shared
        rows.append(Row(tuple(placed)))
    return rows


def batches(rows: Sequence[Row], prompts: int, packed: bool = False) -> list[list[Row]]:
    """Rows longest first, in batches of at least ``prompts`` prompts (a batch ends with a whole row); with
    ``packed``, each batch's rows packed (``pack_rows``)."""
    out = runs(sorted(rows, key=lambda r: r.length, reverse=True), prompts)
    return [pack_rows(batch) for batch in out] if packed else out


def runs(rows: Sequence[Row], prompts: int) -> list[list[Row]]:
    """``rows`` in order, cut into runs of at least ``prompts`` prompts each (the last may hold fewer), a run
    ending with a whole row."""
    out: list[list[Row]] = []
    count = 0
    for row in rows:
        if not out or count >= prompts:
            out.append([])
            count = 0
        out[-1].append(row)
        count += len(row.members)
    return out


def pack_rows(rows: Sequence[Row]) -> list[Row]:
    """The rows of a batch placed one after another in fewer rows, none longer than the batch's longest (first
    fit, longest first): the batch's padding positions are computed no more, and its attention (the full
    square of the longest row, masked) covers fewer rows. Each group still reads only itself (``trunk_at``)."""
    capacity = max(row.length for row in rows)
    bins: list[list[Member]] = []
    used: list[int] = []
    for row in sorted(rows, key=lambda r: r.length, reverse=True):
        place = next((i for i, length in enumerate(used) if length + row.length <= capacity), len(bins))
        if place == len(bins):
            bins.append([])
            used.append(0)
        offset = used[place]
        bins[place] += [replace(m, start=m.start + offset, trunk_at=m.trunk_at + offset) for m in row.members]
        used[place] += row.length
    return [Row(tuple(members)) for members in bins]


@dataclass
class Layout:
    """A batch of rows as tensors. Positions ``[0, prefill)`` hold the rows' tokens (padded at the end);
    after them, ``steps`` groups of ``width`` slots, one slot per member per generation step (the token a
    member generated at step t is read in at slot t). ``owner``: the member each position belongs to;
    ``limit``: per member, how many positions of its group's trunk it reads, from ``trunk_at``;
    ``positions``: position ids."""

    ids: torch.Tensor  # [rows, prefill]
    owner: torch.Tensor  # [rows, total]
    limit: torch.Tensor  # [rows, width]
    trunk_at: torch.Tensor  # [rows, width]
    positions: torch.Tensor  # [rows, total]
    last: torch.Tensor  # [rows, width]: where each member's last prompt token is
    prefill: int
    width: int

    @property
    def total(self) -> int:
        return self.owner.shape[1]

    def visible(self, queries: slice, rows: slice = slice(None)) -> torch.Tensor:
        """[rows, queries, total] True where the query position may attend to the key position: its own
        member's earlier positions, its trunk's first ``limit`` positions, and itself (padding only that)."""
        keys = torch.arange(self.total, device=self.owner.device)
        query_ids = keys[queries]
        owner = self.owner[rows]
        owner_q = owner[:, queries]
        same = (owner_q[:, :, None] == owner[:, None, :]) & (owner_q[:, :, None] >= 0)
        causal = keys[None, None, :] <= query_ids[None, :, None]
        limit_q = torch.gather(self.limit[rows], 1, owner_q.clamp(min=0))
        from_q = torch.gather(self.trunk_at[rows], 1, owner_q.clamp(min=0))
        in_trunk = (keys[None, None, :] >= from_q[:, :, None]) & (
            keys[None, None, :] < (from_q + limit_q)[:, :, None]
        )
        trunk = in_trunk & (owner_q[:, :, None] >= 0)
        itself = keys[None, None, :] == query_ids[None, :, None]
        return (same & causal) | trunk | itself


def layout(rows: Sequence[Row], steps: int, pad_id: int, device: torch.device, align: int = 16) -> Layout:
    """The tensors for ``rows`` with room for ``steps`` generated tokens per member read back in."""
    width = max(len(row.members) for row in rows)
    prefill = max(row.length for row in rows)
    total = math.ceil((prefill + steps * width) / align) * align
    ids = torch.full((len(rows), prefill), pad_id, dtype=torch.long)
    owner = torch.full((len(rows), total), PAD_SLOT, dtype=torch.long)
    limit = torch.zeros((len(rows), width), dtype=torch.long)
    trunk_at = torch.zeros((len(rows), width), dtype=torch.long)
    positions = torch.zeros((len(rows), total), dtype=torch.long)
    last = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        for m, member in enumerate(row.members):
            own = slice(member.start, member.start + member.own)
            ids[r, own] = torch.tensor(member.sequence.ids[member.shared :])
            owner[r, own] = m
            positions[r, own] = torch.arange(member.shared, len(member.sequence))
            limit[r, m] = member.shared
            trunk_at[r, m] = member.trunk_at
            last[r, m] = member.start + member.own - 1
            for step in range(steps):
                slot = prefill + step * width + m
                owner[r, slot] = m
                positions[r, slot] = len(member.sequence) + step
    return Layout(
        ids.to(device),
        owner.to(device),
        limit.to(device),
        trunk_at.to(device),
        positions.to(device),
        last.to(device),
        prefill,
        width,
    )


def cache_positions(rows: Sequence[Row], steps: int) -> int:
    """The KV positions a decode of ``rows`` holds (``layout``'s rows x total, before alignment)."""
    return len(rows) * (max(row.length for row in rows) + steps * max(len(row.members) for row in rows))


def kv_bytes_per_position(decoder: Any, dtype: torch.dtype) -> int:
    """What one position of the reuse path's static KV cache takes over ``decoder``'s layers: the keys and
    values of every layer that keeps its own (a layer that reads another's, as Gemma 4's shared ones do, has no
    key projection and keeps none). Read off the projections: a heterogeneous config has no one head size."""
    projections = [getattr(layer.self_attn, "k_proj", None) for layer in text_model(decoder).layers]
    return sum(2 * k.out_features * dtype.itemsize for k in projections if k is not None)


def additive_mask(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[rows, 1, q, k]: 0 where visible, the dtype's lowest value elsewhere (for sdpa and eager alike)."""
    mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    return mask.masked_fill_(~visible, torch.finfo(dtype).min)[:, None]


# --------------------------------------------------------------------------- the model's parts


@dataclass(frozen=True)
class ModelParts:
    """What the reuse path calls: the text decoder (embeddings and layers, no head), the head, and the
    family's audio encoder as ``encode(features, valid, tokens) -> one [tokens, hidden] per clip``
    (``features`` [clips, bins, frames] padded, ``valid`` frames and ``tokens`` audio tokens per clip);
    ``windowed_tower``: the audio encoder whose attention windows ``encode`` batches, if any."""

    decoder: Any
    head: Any
    encode: Callable[[torch.Tensor, torch.Tensor, Sequence[int]], list[torch.Tensor]]
    text_config: Any
    windowed_tower: Any = None
    # what else the decoder reads of a prompt's token ids when it is given embeddings (Gemma 4's per-layer
    # inputs), as keyword arguments
    read_inputs: Callable[[torch.Tensor], dict[str, torch.Tensor]] | None = None

    def attention(self) -> dict[str, Any]:
        """What this path's calls attend through, for the record."""
        return attention_in_force(self.text_config, self.windowed_tower)

    @property
    def sliding_window(self) -> int | None:
        """The window of the decoder's sliding-attention layers, where it has some (Gemma 4's)."""
        layer_types = getattr(self.text_config, "layer_types", None) or ()
        return self.text_config.sliding_window if "sliding_attention" in layer_types else None

    def masks(self, plan: Layout, queries: slice, rows: slice, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        """The additive masks of ``queries`` in ``rows`` by layer type: ``full_attention`` (``Layout.visible``)
        and, for a decoder with sliding layers, ``sliding_attention``: also no key ``sliding_window``
        positions or more before the query (by position ids, as transformers' sliding mask counts them)."""
        visible = plan.visible(queries, rows)
        made = {"full_attention": additive_mask(visible, dtype)}
        window = self.sliding_window
        if window is not None:
            positions = plan.positions[rows]
            distance = positions[:, queries, None] - positions[:, None, :]
            made["sliding_attention"] = additive_mask(visible & (distance < window), dtype)
        return made

    def cache(self, length: int) -> Any:
        """A static KV cache of ``length`` positions for every layer: sliding layers keep every position too
        (transformers' sliding layers keep a ring of the window, which the rows' layout cannot index; their
        masks keep the window)."""
        cache = StaticCache(config=self.text_config, max_cache_len=length)
        for at, layer in enumerate(cache.layers):
            if getattr(layer, "is_sliding", False):
                cache.layers[at] = StaticLayer(max_cache_len=length)
        return cache


def _qwen2_audio_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model
    tower, projector = inner.audio_tower, inner.multi_modal_projector

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """The clips through the encoder and projector as ``Qwen2AudioModel.forward`` runs them (the
        padding frames masked out of attention), with ``encoder="window"`` over the whole 30 s window, with
        ``"valid"`` over only the frames the kept outputs depend on (``_valid_frames``)."""
        lengths, _ = tower._get_feat_extract_output_lengths(valid)
        if encoder == "valid":
            features = features[..., : _valid_frames(int(lengths.max()), features.shape[-1])]
        frames = (features.shape[-1] - 1) // 2 + 1
        mask_2d = (torch.arange(frames, device=features.device)[None, :] < lengths[:, None]).long()
        dummy = torch.zeros((features.shape[0], frames, 1), dtype=features.dtype, device=features.device)
        mask = create_bidirectional_mask(config=tower.config, inputs_embeds=dummy, attention_mask=mask_2d)
        if encoder == "valid":
            hidden = _qwen2_audio_encoder(tower, features, mask)
        else:
            hidden = tower(features, attention_mask=mask).last_hidden_state
        out = projector(hidden)
        return [out[clip, :count] for clip, count in enumerate(tokens)]

    return ModelParts(inner.language_model, model.lm_head, encode, model.config.text_config)


def _valid_frames(positions: int, window: int) -> int:
    """Mel frames to keep so that the encoder's first ``positions`` positions come out as over the whole
    ``window``: position j reads, through conv1 (kernel 3) and conv2 (kernel 3, stride 2), mel frames up to
    2j + 2, so 2 * positions + 2 frames leave every kept position's inputs untouched by the cut."""
    return min(window, 2 * positions + 2)


def _qwen2_audio_encoder(tower: Any, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``Qwen2AudioEncoder.forward`` (eval) over a window shorter than 30 s: the same layers, the position
    embeddings of the first positions. Its own forward refuses any input but the full window."""
    hidden = torch.nn.functional.gelu(tower.conv1(features.to(tower.conv1.weight.dtype)))
    hidden = torch.nn.functional.gelu(tower.conv2(hidden)).permute(0, 2, 1)
    hidden = hidden + tower.embed_positions.weight[: hidden.shape[1]]
    for layer in tower.layers:
        hidden = layer(hidden, mask)
    hidden = tower.avg_pooler(hidden.permute(0, 2, 1)).permute(0, 2, 1)
    return tower.layer_norm(hidden)


def _omni_thinker_parts(model: Any, encoder: str = "valid") -> ModelParts:
    tower = getattr(model, "audio_tower", None) or model.model.audio_tower  # moved under .model in 5.2x

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """The clips through the thinker's ``get_audio_features`` (valid frames only, every attention window
        of every clip in one call: ``attention.batched_windows``), split per clip."""
        frames = torch.arange(features.shape[-1], device=features.device)
        mask = (frames[None, :] < valid[:, None]).long()
        with batched_windows(tower):
            flat = model.get_audio_features(features, mask).last_hidden_state
        if flat.shape[0] != sum(tokens):
            raise ValueError(
                f"the audio encoder made {flat.shape[0]} embeddings for {sum(tokens)} audio tokens"
            )
        return list(torch.split(flat, list(tokens)))

    return ModelParts(model.model, model.lm_head, encode, model.config.text_config, windowed_tower=tower)


def _apertus_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """Each clip's waveform ([clips, 1, samples], float32) through the WavTokenizer at its own length and
        its codes through the text embedding table (``Apertus1p5Model.get_audio_features``)."""
        samples = torch.arange(features.shape[-1], device=features.device)
        mask = (samples[None, :] < valid[:, None]).long()
        out = list(inner.get_audio_features(features.to(torch.float32), mask).pooler_output)
        if [len(clip) for clip in out] != list(tokens):
            raise ValueError(
                f"the audio tokenizer made {[len(c) for c in out]} codes for {list(tokens)} tokens"
            )
        return out

    return ModelParts(inner.language_model, model.lm_head, encode, model.config.text_config)


def _voxtral_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model
    frames = inner.audio_tower.config.max_source_positions * 2  # mel frames of one 30 s window (3000)

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """Each clip's 30 s windows (laid end to end in its feature row, the processor's padding included:
        the encoder reads every window whole) through the encoder and projector together, as
        ``VoxtralModel.get_audio_features`` takes a call's windows, split per clip."""
        bins = features.shape[1]
        windows = torch.cat(
            [
                features[clip, :, : int(count)].reshape(bins, -1, frames).transpose(0, 1)
                for clip, count in enumerate(valid.tolist())
            ]
        )
        flat = inner.get_audio_features(windows.to(inner.audio_tower.dtype)).pooler_output
        if flat.shape[0] != sum(tokens):
            raise ValueError(
                f"the audio encoder made {flat.shape[0]} embeddings for {sum(tokens)} audio tokens"
            )
        return list(torch.split(flat, list(tokens)))

    return ModelParts(inner.language_model, model.lm_head, encode, model.config.text_config)


def _gemma4_parts(model: Any, encoder: str = "valid") -> ModelParts:
    inner = model.model
    text_model, text_config = inner.language_model, model.config.get_text_config()
    audio_id, pad_id = model.config.audio_token_id, text_config.pad_token_id

    def encode(features: torch.Tensor, valid: torch.Tensor, tokens: Sequence[int]) -> list[torch.Tensor]:
        """The clips (``features`` [clips, bins, frames], given back to the tower frames first) through the
        audio tower and its projection as ``Gemma4Model.get_audio_features`` runs them (Gemma 4 Unified's:
        each frame's projection), each clip's valid embeddings (the tower's own mask of them)."""
        frames = torch.arange(features.shape[-1], device=features.device)
        mask = frames[None, :] < valid[:, None]
        out = inner.get_audio_features(features.transpose(1, 2), mask, return_dict=True)
        kept = [out.pooler_output[clip][out.attention_mask[clip]] for clip in range(len(tokens))]
        made = [len(clip) for clip in kept]
        if made != list(tokens):
            raise ValueError(f"the audio encoder made {made} embeddings for {list(tokens)} audio tokens")
        return kept

    def read_inputs(ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """The per-layer inputs (PLE) of ``ids`` with every audio token read as padding, as
        ``Gemma4Model.forward`` makes them (the decoder cannot make them from embeddings alone)."""
        if not getattr(text_config, "hidden_size_per_layer_input", None):  # Gemma 4 Unified has none
            return {}
        return {
            "per_layer_inputs": text_model.get_per_layer_inputs(torch.where(ids == audio_id, pad_id, ids))
        }

    return ModelParts(text_model, model.lm_head, encode, text_config, read_inputs=read_inputs)


ENCODER_WINDOWS = ("valid", "window")
# family → its parts; Omni encoders read only valid frames whatever ``encoder`` says
PARTS: dict[str, Callable[..., ModelParts]] = {
    "qwen2-audio": _qwen2_audio_parts,
    "qwen2.5-omni": _omni_thinker_parts,
    "qwen3-omni": _omni_thinker_parts,
    "apertus1p5": _apertus_parts,
    "voxtral": _voxtral_parts,
    "gemma4": _gemma4_parts,
    "gemma4_unified": _gemma4_parts,  # the same decoder; its audio "tower" projects each frame alone
}


class EmbeddingCache:
    """Audio embeddings ([tokens, hidden], on the model's device) by clip digest, least recently used
    dropped beyond ``max_bytes``."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, torch.Tensor] = OrderedDict()
        self._bytes = 0
        self.encoded = 0  # clips through the encoder (misses)

    def get(self, digest: str) -> torch.Tensor | None:
        found = self._items.get(digest)
        if found is not None:
            self._items.move_to_end(digest)
        return found

    def put(self, digest: str, embedding: torch.Tensor) -> None:
        self.encoded += 1
        self._items[digest] = embedding
        self._bytes += embedding.numel() * embedding.element_size()
        while self._bytes > self.max_bytes and len(self._items) > 1:
            _, dropped = self._items.popitem(last=False)
            self._bytes -= dropped.numel() * dropped.element_size()

    def clear(self) -> None:
        self._items.clear()
        self._bytes = 0


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
) -> Prefilled:
    """Read every prompt of ``reads`` (each shared prefix once) with room for ``steps`` more tokens per
    member, for one decode of them all. ``audio``: each clip's embedding by digest. Each read (rows) is
    padded to its own longest row and read into a cache of its own, and the caches are joined
    (``join_caches``): a decode of many prompts for the memory of a prefill of fewer."""
    plan = layout([row for run in reads for row in run], steps, pad_id, device)
    keyword = cache_keyword(parts.decoder)
    caches, logits = [], []
    first = 0
    for run in reads:
        taken = slice(first, first + len(run))
        length = max(row.length for row in run)
        ids = plan.ids[taken, :length]
        embeds = parts.decoder.get_input_embeddings()(ids)
        _place_audio(embeds, run, audio)
        cache = parts.cache(plan.total)
        hidden = _read(
            parts,
            cache,
            keyword,
            parts.masks(plan, slice(0, length), taken, dtype),
            inputs_embeds=embeds,
            position_ids=plan.positions[taken, :length],
            cache_position=torch.arange(length, device=device),
            **(parts.read_inputs(ids) if parts.read_inputs is not None else {}),
        )
        rows_index = torch.arange(len(run), device=device)[:, None]
        logits.append(parts.head(hidden[rows_index, plan.last[taken]]))
        caches.append(cache)
        first += len(run)
        del embeds, hidden
    return Prefilled(plan, join_caches(caches, plan.prefill), torch.cat(logits))


def _place_audio(embeds: torch.Tensor, rows: Sequence[Row], audio: dict[str, torch.Tensor]) -> None:
    """Each clip's embedding in place of its audio tokens, where a member reads it itself (a clip inside the
    shared prefix is the trunk's)."""
    for r, row in enumerate(rows):
        for member in row.members:
            for clip in member.sequence.clips:
                begin = max(clip.start, member.shared)
                if begin >= clip.start + clip.tokens:
                    continue  # inside the shared prefix: the trunk holds it
                at = member.start + begin - member.shared
                embeds[r, at : at + clip.start + clip.tokens - begin] = audio[clip.digest][
                    begin - clip.start :
                ]


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
) -> dict[int, list[int]]:
    """Greedy tokens (``steps`` at most, fewer once every prompt has stopped) for every prompt in ``reads``
    (rows read together, ``prefill``; all decoded together), by request index. ``seconds``: where the time
    went is added to its ``prefill`` and ``decode``. ``paths``: with CUDA graphs on, the first decode step
    runs eagerly (compiling and warming what it needs), the rest replay its capture."""
    seconds = {} if seconds is None else seconds
    started = time.perf_counter()
    done_reading = prefill(parts, reads, audio, steps - 1, pad_id, dtype, device)
    plan, cache = done_reading.plan, done_reading.cache
    tokens = done_reading.logits.argmax(-1)  # [rows, width]
    generated = [tokens]
    stops = torch.tensor(list(stop_ids), device=device)
    done = torch.isin(tokens, stops)
    finished = bool(done.all())  # waits for the prefill
    read = time.perf_counter()
    seconds["prefill"] = seconds.get("prefill", 0.0) + read - started
    step = DecodeStep(parts, plan, cache, steps - 1, dtype)
    run = step.run
    for t in range(steps - 1):
        if finished:
            break
        if t == 1 and paths is not None and steps - 1 > 2:
            run = replayed(step.run, paths)
        step.load(tokens, t)
        tokens = run().clone()
        generated.append(tokens)
        done |= torch.isin(tokens, stops)
        finished = bool(done.all())
    table = torch.stack(generated, dim=-1).tolist()  # [rows, width, steps]
    seconds["decode"] = seconds.get("decode", 0.0) + time.perf_counter() - read
    return {
        member.sequence.index: table[r][m]
        for r, row in enumerate(row for run in reads for row in run)
        for m, member in enumerate(row.members)
    }
