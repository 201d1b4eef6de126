"""The reuse path's attention masks (``backends.hf.reuse.rows``): ``Layout.visible`` and ``additive_mask`` against
the mask as its definition reads, one tensor per condition joined at the end (how ``visible`` was built until
2026-12-07), on batches of episode rows shaped as the benchmark's: each episode's k = 1..5 prompts, the longest
the trunk, the others branching off it one demo apart.

Per batch size: the median over ``--repeats`` of each way (after one call of warm-up; on a GPU, synchronized),
and the ratio to the definition's. The outputs are checked equal first.

    python benchmarks/masks.py [--rows 7,32] [--clip-tokens 375] [--device cpu] [--repeats 7]
"""

from __future__ import annotations

import argparse
import time

import torch
from medians import print_medians

from audioicl.backends.hf.reuse.rows import ClipSpan, Layout, TokenSequence, additive_mask, layout, pack

AUDIO_ID = 7
TEXT_TOKENS = 40  # a demo's text around its clip


def episode(index: int, clip_tokens: int, shots: int = 5) -> list[TokenSequence]:
    """An episode's k = 1..shots prompts: an instruction, k demos (clip and answer), the query clip."""
    prompts = []
    for k in range(1, shots + 1):
        ids: list[int] = list(range(100, 100 + TEXT_TOKENS))
        clips = []
        for demo in [*range(k), "query"]:
            clips.append(ClipSpan(f"{index}-{demo}", len(ids), clip_tokens))
            ids += [AUDIO_ID] * clip_tokens + [200 + (demo if demo != "query" else 99)] * TEXT_TOKENS
        prompts.append(TokenSequence(index * shots + k, f"episode-{index}", tuple(ids), tuple(clips)))
    return prompts


def by_definition(plan: Layout, queries: slice) -> torch.Tensor:
    """``Layout.visible`` as its docstring reads: each condition a tensor of its own, joined at the end."""
    keys = torch.arange(plan.total, device=plan.owner.device)
    query_ids = keys[queries]
    owner_q = plan.owner[:, queries]
    same = (owner_q[:, :, None] == plan.owner[:, None, :]) & (owner_q[:, :, None] >= 0)
    causal = keys[None, None, :] <= query_ids[None, :, None]
    limit_q = torch.gather(plan.limit, 1, owner_q.clamp(min=0))
    from_q = torch.gather(plan.trunk_at, 1, owner_q.clamp(min=0))
    in_trunk = (keys[None, None, :] >= from_q[:, :, None]) & (
        keys[None, None, :] < (from_q + limit_q)[:, :, None]
    )
    itself = keys[None, None, :] == query_ids[None, :, None]
    return (same & causal) | (in_trunk & (owner_q[:, :, None] >= 0)) | itself


def additive_by_fill(visible: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    mask = torch.zeros(visible.shape, dtype=dtype, device=visible.device)
    return mask.masked_fill_(~visible, torch.finfo(dtype).min)[:, None]


def timed(call, repeats: int, device: torch.device) -> list[float]:
    call()
    seconds = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        call()
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return seconds


def measure(count: int, clip_tokens: int, device: torch.device, repeats: int) -> None:
    """The two tables of a batch of ``count`` episode rows."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    sequences = [s for index in range(count) for s in episode(index, clip_tokens)]
    plan = layout(pack(sequences, share=True), steps=16, pad_id=0, device=device)
    plan = Layout(
        **{**vars(plan), **{k: getattr(plan, k).to(device) for k in ("owner", "limit", "trunk_at")}}
    )
    queries = slice(0, plan.prefill)
    visible = plan.visible(queries)
    assert torch.equal(visible, by_definition(plan, queries))
    assert torch.equal(additive_mask(visible, dtype), additive_by_fill(visible, dtype))
    print(f"\n{count} rows, {plan.prefill} queries x {plan.total} keys, {device}, {dtype}:\n")
    ways = {
        "visible by definition": lambda: by_definition(plan, queries),
        "Layout.visible": lambda: plan.visible(queries),
    }
    print_medians(
        {name: timed(call, repeats, device) for name, call in ways.items()}, count, "mask", "an episode"
    )
    print()
    ways = {
        "zeros, masked_fill": lambda: additive_by_fill(visible, dtype),
        "additive_mask": lambda: additive_mask(visible, dtype),
    }
    print_medians(
        {name: timed(call, repeats, device) for name, call in ways.items()},
        count,
        "additive mask",
        "an episode",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="7,32", help="episodes a batch (rows), comma-separated")
    parser.add_argument("--clip-tokens", type=int, default=375, help="audio tokens a clip (Voxtral: 375)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    for count in map(int, args.rows.split(",")):
        measure(count, args.clip_tokens, torch.device(args.device), args.repeats)


if __name__ == "__main__":
    main()
