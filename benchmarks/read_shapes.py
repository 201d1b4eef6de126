"""What the reuse path's reads and decodes hold over a real build, counted on the CPU (no model runs).

Every prompt of a build (k = 1..5, the Morse bank on) goes through the ``hf`` backend of a tiny random Qwen2-Audio
checkpoint as a run sends it (episode-major windows of the runner's sizes, packed into rows, cut into batches of
``--batch-size`` prompts; the clips' audio token counts are the real processor's, the text a small BPE's, so text
lengths are approximate). Printed:

- the reads and the decodes they make: reads joined while the joined KV cache fits ``--budget-gib`` (the path's
  rule, ``ReusePath._decode_groups``; 15.75 GiB is what a bf16 Qwen2-Audio run on an H100 gets), the KV cache a
  read holds at Qwen2-Audio-7B's 512 KiB a position, and the share of the positions a decode step reads that are
  each row's own (the rest: rows padded to the joined length);
- the prefill's attention: the queries after the read's causal head (its *shortest* trunk: the masked kernel
  takes them over every key of the read) against those after each row's own trunk, and the pairs each computes.

    python benchmarks/read_shapes.py [--episodes 100] [--batch-size 128] [--budget-gib 15.75]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from audioicl.backends.hf.reuse.rows import Row, batches, cache_positions, common_prefix
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import window_sizes, windows
from audioicl.testing.requests import built_benchmark, episode_major_requests, packed_rows, tiny_backend

KV_BYTES = 32 * 2 * 32 * 128 * 2  # Qwen2-Audio-7B in bf16: 32 layers' keys and values of 32 heads of 128
DECODED_TOGETHER = 4  # the path's decode_batches on a GPU
STEPS = 15  # 16 new tokens: the first comes from the prefill


def read_batches(requests, backend, batch_size: int) -> list[list[Row]]:
    """The batches of ``requests`` as the runner's windows and the backend's packing make them."""
    options = RunOptions(data=Path("."), model="hf:tiny", out=Path("."), batch_size=batch_size)
    made = []
    for window in windows(
        requests, window_sizes(options), whole_episodes=True, episode_of=lambda r: r.episode_id
    ):
        rows, _ = packed_rows(backend, list(window))
        made += batches(rows, batch_size)
    return made


def decode_groups(reads: list[list[Row]], budget: float) -> list[list[Row]]:
    """``reads`` joined into decodes as ``ReusePath._decode_groups`` joins them under a KV budget."""
    groups: list[list[Row]] = []
    joined = 0
    for read in reads:
        fits = groups and cache_positions([*groups[-1], *read], STEPS) * KV_BYTES <= budget
        if fits and joined < DECODED_TOGETHER:
            groups[-1] += read
            joined += 1
        else:
            groups.append(list(read))
            joined = 1
    return groups


def rest_after(read: list[Row], per_row: bool) -> tuple[int, int]:
    """The queries of ``read`` after its causal head and the pairs the masked kernel computes for them (each
    over every key of the read): the head the read's shortest trunk, or (``per_row``) each row's own, the rest
    then gathered to the longest of the rows' rests."""
    longest = max(row.length for row in read)
    prefix = common_prefix(read)
    shared = len(prefix) if prefix is not None else 0
    trunks = [max(row.members[0].own - shared, 0) for row in read]
    if per_row:
        rest = max(row.length - shared - trunk for row, trunk in zip(read, trunks, strict=True))
    else:
        rest = longest - shared - min(trunks)
    return len(read) * rest, len(read) * rest * longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--budget-gib", type=float, default=15.75)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = built_benchmark(Path(tmp) / "bench", args.episodes)
        backend = tiny_backend("qwen2-audio", Path(tmp) / "ckpt")
        requests = episode_major_requests(root, backend.family)
        reads = read_batches(requests, backend, args.batch_size)
    groups = decode_groups(reads, args.budget_gib * 2**30)
    stepped = sum(cache_positions(group, STEPS) for group in groups)
    own = sum(row.length + STEPS * len(row.members) for group in groups for row in group)
    per_read = [cache_positions(read, STEPS) * KV_BYTES / 2**30 for read in reads]
    print(f"{len(requests)} prompts ({args.episodes} episodes a task, k = 1..5), batch {args.batch_size}")
    print(
        f"- {len(reads)} reads, {len(groups)} decodes under a {args.budget_gib} GiB KV budget; a read's KV cache "
        f"{min(per_read):.1f}-{max(per_read):.1f} GiB (mean {sum(per_read) / len(per_read):.1f}); of the "
        f"positions a decode step reads, {own / stepped:.1%} are each row's own"
    )
    queries = sum(
        len(read) * (max(row.length for row in read) - len(common_prefix(read) or ())) for read in reads
    )
    for label, per_row in (("the read's shortest trunk (today)", False), ("each row's own trunk", True)):
        rest, pairs = (sum(made) for made in zip(*(rest_after(read, per_row) for read in reads), strict=True))
        print(f"- causal head {label}: {rest / queries:.1%} of the queries masked, {pairs:,} masked pairs")


if __name__ == "__main__":
    main()
