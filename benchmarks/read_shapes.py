"""What the reuse path's reads and decodes hold over a real build, counted on the CPU (no model runs).

Every prompt of a build (k = 1..5, the Morse bank on) goes through the ``hf`` backend of a tiny random Qwen2-Audio
checkpoint as a run sends it (episode-major windows of the runner's sizes, packed into rows, cut into batches of
``--batch-size`` prompts; the clips' audio token counts are the real processor's, the text a small BPE's, so text
lengths are approximate). Printed:

- the reads and the decodes they make: reads joined while the joined KV cache fits ``--budget-gib`` (the path's
  rule, ``plan.decode_groups``; 15.75 GiB is what a bf16 Qwen2-Audio run on an H100 gets), the KV cache a
  read holds at Qwen2-Audio-7B's 512 KiB a position, and the share of the positions a decode step reads that are
  each row's own (the rest: rows padded to the joined length);
- the prefill's attention: the queries after the read's causal head (its *shortest* trunk: the masked kernel
  takes them over every key of the read) against those after each row's own trunk, and the pairs each computes.

    python benchmarks/read_shapes.py [--episodes 100] [--batch-size 128] [--budget-gib 15.75] [--dump FILE]

``--dump`` writes the reads' shapes (each row's length and prompts, read by read) as JSON: the fixture that
``tests/backends/hf/test_decode_plan.py`` plans decodes and halvings over (``--episodes 300``, the GPU check's
benchmark).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from audioicl.backends.hf.reuse.path import AUTO_DECODE_BATCHES
from audioicl.backends.hf.reuse.plan import JoinBudget, decode_groups, joined
from audioicl.backends.hf.reuse.rows import Row, cache_positions, common_prefix
from audioicl.testing.requests import built_benchmark, episode_major_requests, run_batches, tiny_backend

KV_BYTES = 32 * 2 * 32 * 128 * 2  # Qwen2-Audio-7B in bf16: 32 layers' keys and values of 32 heads of 128
STEPS = 15  # 16 new tokens: the first comes from the prefill


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
    parser.add_argument("--dump", type=Path, help="write the reads' shapes here (JSON)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = built_benchmark(Path(tmp) / "bench", args.episodes)
        backend = tiny_backend("qwen2-audio", Path(tmp) / "ckpt")
        requests = episode_major_requests(root, backend.family)
        reads = run_batches(backend, requests, args.batch_size)
    if args.dump:
        shapes = [[[row.length, len(row.members)] for row in read] for read in reads]
        made = {
            "episodes": args.episodes,
            "batch_size": args.batch_size,
            "prompts": len(requests),
            "reads": shapes,
        }
        args.dump.write_text(json.dumps(made, separators=(",", ":")) + "\n")
    budget = JoinBudget(int(args.budget_gib * 2**30), KV_BYTES)
    planned = decode_groups(reads, AUTO_DECODE_BATCHES["cuda"], lambda rows: budget.fits(rows, STEPS))
    groups = [joined(group) for group in planned]
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
