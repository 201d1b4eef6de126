"""Attention implementations the reuse path registers with transformers, each the same numbers as the one it
replaces in fewer or smaller kernels; each is in force only inside the reuse path's own calls (a context
manager swaps the module's config's ``_attn_implementation`` and puts it back), so ``reuse=off`` runs
transformers' own.

**Encoder windows.** Qwen2.5-Omni's and Qwen3-Omni's audio encoders attend within windows of a clip (``cu_seqlens`` boundaries over
all clips' positions laid end to end). transformers runs that either through flash-attn's variable-length
kernel or, for every other attention implementation, as one sdpa call per window in a Python loop with a host
sync per layer: thousands of small calls for a batch of clips (a 4 s clip is two windows, times 32 layers),
which made the encoder a third of Qwen2.5-Omni's reuse path on the GPU. ``segment_attention`` takes the
variable-length calling convention and runs every window at once: the windows padded to the longest, each
query reading only its own window's keys. The same numbers as the loop (each window's softmax over exactly its
own keys); only the kernel's summation order may differ.

transformers sends ``cu_seqlens`` only to an implementation whose name contains "flash", hence ``WINDOWS``.

**A prefill's causal head** (``prefill_attention``). A read's first queries are its rows' trunks (each row's
longest prompt, before the shorter prompts' own tokens): each sees every key up to itself, nothing else. Under
one additive mask sdpa computes the whole [queries, keys] square for them; here the queries every row reads
causally (``PrefillShape.causal``, from the mask itself) go through sdpa's causal kernel, which computes only the
lower triangle, and only the rest through the mask. No prefill query reads a key after the read's last position,
so the keys stop there (``PrefillShape.keys``; the static cache holds the decode's slots and, for a shorter
read decoded with longer ones, more). The same attention: each query's softmax over exactly its visible keys.

**Grouped queries under a mask** (``reuse_attention``, in place of sdpa). With an attention mask (the reuse
path always has one: prompts share rows), transformers' sdpa copies every KV head once per query head of its
group (``repeat_kv``) before the kernel, in every layer at every step: for Qwen2.5-Omni (7 query heads a KV
head) a decode step wrote and read seven copies of the whole KV cache. Here a group's query heads are folded
into the query length instead ([rows, kv heads, group x queries, dim] against the KV heads as they are, the
mask repeated along the queries) wherever the queries are few (decode: the copies dominate; a prefill's
queries are many, its mask large and its time compute, so it keeps sdpa's path).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention.bias import causal_lower_right
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward
from transformers.utils.generic import is_flash_attention_requested

PREFILL_ATTRIBUTE = "_audioicl_prefill"  # where a prefill's mask carries its ``PrefillShape``
WINDOWS = "audioicl_flash_windows"
REUSE = "audioicl_sdpa_reuse"
FOLD_MAX_QUERIES = 64  # queries per row up to which reuse_attention folds (decode steps, not prefills)


def segment_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    scaling: float | None = None,
    dropout: float = 0.0,
    cu_seq_lens_q: torch.Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """``query``/``key``/``value`` [1, heads, positions, dim], every window ``cu_seq_lens_q[i]:[i + 1]``
    attending within itself → [1, positions, heads, dim] (flash-attn's layout, as the encoders reshape it)."""
    if cu_seq_lens_q is None:
        raise ValueError(f"{WINDOWS} attends within cu_seqlens windows; this call gave none")
    index, valid, kept = _window_layout(cu_seq_lens_q, max_length_q, query.shape[2], query.device)

    def windows(x: torch.Tensor) -> torch.Tensor:  # [1, heads, positions, dim] → [windows, heads, width, dim]
        return x[0][:, index].transpose(0, 1)

    out = torch.nn.functional.scaled_dot_product_attention(
        windows(query), windows(key), windows(value), attn_mask=valid[:, None, None, :], scale=scaling
    )
    heads, dim = out.shape[1], out.shape[3]
    return out.transpose(1, 2).reshape(-1, heads, dim)[kept][None], None


def _window_layout(
    cu_seqlens: torch.Tensor, max_length: Any, positions: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where each window's slots read ([windows, width] positions), which slots are real ([windows, width])
    and the real slots' flat numbers in position order. The two host syncs this takes (the width, the real
    slots' count) happen once per encoder call, not once per layer: every layer of a call gets the same
    ``cu_seqlens`` tensor, which keeps the layout made for it."""
    made = getattr(cu_seqlens, "_audioicl_windows", None)
    if made is not None:
        return made
    bounds = cu_seqlens.to(device, torch.long)
    lengths = bounds[1:] - bounds[:-1]
    width = int(max_length) if max_length is not None else int(lengths.max())
    slots = torch.arange(width, device=device)
    valid = slots[None, :] < lengths[:, None]
    index = (bounds[:-1, None] + slots[None, :]).clamp(max=positions - 1)
    made = (index, valid, valid.flatten().nonzero().squeeze(-1))
    cu_seqlens._audioicl_windows = made  # type: ignore[attr-defined]
    return made


@dataclass(frozen=True)
class PrefillShape:
    """What a prefill's queries read: the first ``causal`` of them, in every row, each key up to its own
    position and nothing else; none of them a key at ``keys`` or after."""

    causal: int
    keys: int


def prefill_shape(visible: torch.Tensor, queries: slice) -> PrefillShape:
    """The ``PrefillShape`` of ``visible`` [rows, queries, keys], the visibility of the query positions
    ``queries`` (a prefill's span: no query sees a key after itself, ``rows.Layout.visible``): a query reads
    causally where its visible keys number its position plus one."""
    counts = visible.sum(-1)
    expected = torch.arange(queries.start + 1, queries.stop + 1, device=visible.device)
    exact = (counts == expected).all(0)
    return PrefillShape(int(exact.int().cumprod(0).sum()), queries.stop)


def prefill_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor,
    shape: PrefillShape,
    scaling: float | None,
    **kwargs: Any,
) -> torch.Tensor:
    """sdpa attention of a prefill's ``query`` [rows, heads, queries, dim] (the module docstring's causal
    head): its first ``shape.causal`` queries through the causal kernel, the rest under ``attention_mask``,
    every key from ``shape.keys`` on left out → [rows, queries, heads, dim], as sdpa's path returns it."""
    key, value = key[:, :, : shape.keys], value[:, :, : shape.keys]
    queries = query.shape[2]
    head = min(shape.causal, queries)
    made = []
    if head:
        seen = shape.keys - queries + head  # the cache's positions before the span, and the head's own
        groups = getattr(module, "num_key_value_groups", 1)
        first = torch.nn.functional.scaled_dot_product_attention(
            query[:, :, :head],
            repeat_kv(key[:, :, :seen], groups),
            repeat_kv(value[:, :, :seen], groups),
            attn_mask=causal_lower_right(head, seen),
            scale=scaling,
        )
        made.append(first.transpose(1, 2))
    if head < queries:
        rest, _ = sdpa_attention_forward(
            module, query[:, :, head:], key, value, attention_mask[:, :, head:, : shape.keys],
            scaling=scaling, **kwargs,
        )  # fmt: skip
        made.append(rest)
    return torch.cat(made, dim=1) if len(made) > 1 else made[0].contiguous()


def reuse_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' sdpa attention (``query`` [rows, heads, queries, dim], ``key``/``value`` [rows, kv heads,
    keys, dim], ``attention_mask`` [rows, 1, queries, keys]) with a group's query heads folded into the query
    length where there are few queries, so no KV head is copied; else sdpa's own path."""
    groups = getattr(module, "num_key_value_groups", 1)
    rows, heads, queries, dim = query.shape
    shape = getattr(attention_mask, PREFILL_ATTRIBUTE, None)
    if shape is not None and queries > FOLD_MAX_QUERIES and not dropout:
        return prefill_attention(module, query, key, value, attention_mask, shape, scaling, **kwargs), None
    if (
        groups == 1
        or attention_mask is None
        or attention_mask.shape[1] != 1
        or queries > FOLD_MAX_QUERIES
        or dropout
    ):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    keys = attention_mask.shape[-1]
    folded = query.reshape(rows, heads // groups, groups * queries, dim)
    mask = attention_mask[:, :, None].expand(rows, 1, groups, queries, keys).reshape(rows, 1, -1, keys)
    out = torch.nn.functional.scaled_dot_product_attention(folded, key, value, attn_mask=mask, scale=scaling)
    return out.reshape(rows, heads, queries, dim).transpose(1, 2).contiguous(), None


AttentionInterface.register(WINDOWS, segment_attention)
AttentionInterface.register(REUSE, reuse_attention)


@contextmanager
def attending(config: Any, name: str, keep: Callable[[str | None], bool]) -> Iterator[None]:
    """``config``'s modules attend through ``name`` inside the block, unless ``keep`` says their own
    implementation stays."""
    before = config._attn_implementation
    if keep(before):
        yield
        return
    config._attn_implementation = name
    try:
        yield
    finally:
        config._attn_implementation = before


def batched_windows(tower: Any) -> AbstractContextManager[None]:
    """``tower`` (an Omni audio encoder) attends through ``segment_attention`` inside the block; a tower on a
    flash-attn implementation keeps it (its kernel already takes the windows at once)."""
    return attending(
        tower.config,
        WINDOWS,
        lambda name: is_flash_attention_requested(requested_attention_implementation=name),
    )


def reuse_attention_in(text_config: Any) -> AbstractContextManager[None]:
    """The decoder of ``text_config`` attends through ``reuse_attention`` inside the block where it runs
    sdpa (the reuse path's masks need sdpa or eager; eager keeps its own)."""
    return attending(text_config, REUSE, lambda name: name != "sdpa")


def attention_in_force(text_config: Any, tower: Any = None) -> dict[str, str]:
    """The implementations the reuse path's calls attend through (the decoder's, and the windowed audio
    encoder's where ``tower`` is one), for the run record."""
    own = text_config._attn_implementation
    made = {"decoder": REUSE if own == "sdpa" else own}
    if tower is not None:
        name = tower.config._attn_implementation
        flash = is_flash_attention_requested(requested_attention_implementation=name)
        made["audio_encoder"] = name if flash else WINDOWS
    return made
