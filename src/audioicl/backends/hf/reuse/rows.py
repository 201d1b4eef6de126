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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from .graphs import text_model

PAD_SLOT = -1  # owner of a padding position
# positions a read's rows must have in common to be read once (``common_prefix``): fewer cost more as a
# call of their own than they save
MIN_COMMON_PREFIX = 32


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


def common_prefix(rows: Sequence[Row]) -> TokenSequence | None:
    """What every row of ``rows`` begins with: the first tokens (and clips, cut where the prefix ends inside
    one) that every row's first trunk has in common (``shared_prefix``), short of each trunk's last token
    (whose logits the prefill reads); None for a single row or fewer than ``MIN_COMMON_PREFIX`` tokens."""
    if len(rows) < 2:
        return None
    trunks = [row.members[0].sequence for row in rows]
    first = trunks[0]
    length = min(min(shared_prefix(first, trunk) for trunk in trunks[1:]), *(len(t) - 1 for t in trunks))
    if length < MIN_COMMON_PREFIX:
        return None
    clips = tuple(
        replace(clip, tokens=min(clip.tokens, length - clip.start))
        for clip in first.clips
        if clip.start < length
    )
    return TokenSequence(first.index, first.group, first.ids[:length], clips)


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
        member's earlier positions, its trunk's first ``limit`` positions, and itself (padding only that).
        Built in five passes over the [rows, queries, total] result, whatever the rows hold: on the CPU
        the masks of a batch cost as much as its attention did, built in twice as many."""
        owner = self.owner[rows]
        owner_q = owner[:, queries]
        real = owner_q >= 0
        member = owner_q.clamp(min=0)
        trunk_from = torch.gather(self.trunk_at[rows], 1, member)
        trunk_to = torch.where(real, trunk_from + torch.gather(self.limit[rows], 1, member), trunk_from)
        keys = torch.arange(self.total, device=owner.device)
        seen = owner_q.masked_fill(~real, PAD_SLOT - 1)[:, :, None] == owner[:, None, :]  # padding: nothing
        seen &= keys[None, None, :] <= keys[queries, None]
        seen |= (keys >= trunk_from[:, :, None]) & (keys < trunk_to[:, :, None])
        seen.diagonal(queries.start or 0, 1, 2).fill_(True)  # itself
        return seen


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
    nothing = torch.zeros((), dtype=dtype, device=visible.device)
    lowest = torch.full((), torch.finfo(dtype).min, dtype=dtype, device=visible.device)
    return torch.where(visible, nothing, lowest)[:, None]
