"""What the reuse path's prefill attention computes against what its masks let it see, counted over a real build.

Every prompt of a build (k = 1..5, the Morse bank on) goes through the ``hf`` backend of a tiny random Qwen2-Audio
checkpoint as a run sends it (episode-major windows of the runner's sizes, packed into rows, cut into batches of
``--batch-size`` prompts; the clips' audio token counts are the real processor's, the text a small BPE's), and each
batch is read as ``reuse.decode.prefill`` reads it: its common prefix once, then the span after it, whose first
queries (the *causal head*: the positions every row reads causally, ``attention.prefill_shape``) go through sdpa's
causal kernel and the rest through the masked kernel over every key of the read. Nothing runs through a model.

Counted, in query-key pairs summed over the batches: the head's (the causal lower triangle over the prefix and
itself), the rest's (its queries times the read's keys: the masked kernel computes every tile), and the pairs the
masks show (each prompt's own causal triangle over its shared trunk and its own tokens); and, for scale, the
attention's FLOPs (4 x hidden x pairs a layer) over the matmuls' (2 x a layer's parameters a position) at
Qwen2-Audio-7B's shapes.

    python benchmarks/prefill_attention_work.py [--episodes 20] [--batch-size 128]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from audioicl.backends.hf.reuse.rows import Row, batches, common_prefix
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import window_sizes, windows
from audioicl.testing.requests import built_benchmark, episode_major_requests, packed_rows, tiny_backend

HIDDEN, LAYER_PARAMETERS = 4096, 4 * 4096 * 4096 + 3 * 4096 * 11008  # Qwen2-Audio-7B's decoder layer


def visible_pairs(row: Row, length: int) -> int:
    """The pairs a row's mask shows: each member's causal triangle over its shared trunk and own tokens, one
    for each padding position (itself)."""
    pairs = 0
    for member in row.members:
        own = member.own
        pairs += own * member.shared + own * (own + 1) // 2
    return pairs + (length - row.length)


def read_pairs(batch: list[Row], rows_a_call: int) -> dict[str, int]:
    """One batch as ``prefill`` reads it, its attention in calls of ``rows_a_call`` consecutive rows (each call
    with its own causal head, its rest's keys up to its longest row; the whole batch where 0): positions, the
    head's, the rest's and the visible pairs."""
    longest = max(row.length for row in batch)
    prefix = common_prefix(batch)
    shared = len(prefix) if prefix is not None else 0
    made = {
        "positions": len(batch) * (longest - shared) + shared,
        "prefix": shared * (shared + 1) // 2,
        "visible": sum(visible_pairs(row, longest) for row in batch),
        "head": 0,
        "rest": 0,
        "head_queries": 0,
        "rest_queries": 0,
        "calls": 0,
    }
    step = rows_a_call or len(batch)
    for first in range(0, len(batch), step):
        rows = batch[first : first + step]
        end = longest if not rows_a_call else max(row.length for row in rows)
        head = max(min(row.members[0].own for row in rows) - shared, 0)  # every row's trunk reads causally
        rest = end - shared - head
        made["head"] += len(rows) * (head * shared + head * (head + 1) // 2)
        made["rest"] += len(rows) * rest * end
        made["head_queries"] += len(rows) * head
        made["rest_queries"] += len(rows) * rest
        made["calls"] += 1
    return made


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


def count(reads: list[list[Row]], rows_a_call: int) -> dict[str, int]:
    """``read_pairs`` summed over ``reads``."""
    totals: dict[str, int] = {}
    for batch in reads:
        for key, value in read_pairs(batch, rows_a_call).items():
            totals[key] = totals.get(key, 0) + value
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument(
        "--rows-a-call", default="0,8,4,1", help="the attention's rows a call (0: the whole batch)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = built_benchmark(Path(tmp) / "bench", args.episodes)
        backend = tiny_backend("qwen2-audio", Path(tmp) / "ckpt")
        requests = episode_major_requests(root, backend.family)
        reads = read_batches(requests, backend, args.batch_size)
        made = {int(n): count(reads, int(n)) for n in args.rows_a_call.split(",")}
    print(
        f"{len(requests)} prompts ({args.episodes} episodes a task, k = 1..5), batch {args.batch_size}, reuse=prefix"
    )
    print(
        "| rows a call | sdpa calls a layer, all reads | head pairs | rest pairs | computed | visible / computed | "
        "rest's share of queries | attention / matmul FLOPs, computed | visible |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for rows_a_call, totals in made.items():
        computed = totals["prefix"] + totals["head"] + totals["rest"]
        matmul = 2 * LAYER_PARAMETERS * totals["positions"]
        queries = totals["head_queries"] + totals["rest_queries"]
        print(
            f"| {rows_a_call or 'the batch'} | {2 * totals['calls']} | {totals['head']:,} | {totals['rest']:,} | "
            f"{computed:,} | {totals['visible'] / computed:.1%} | {totals['rest_queries'] / queries:.1%} | "
            f"{4 * HIDDEN * computed / matmul:.1%} | {4 * HIDDEN * totals['visible'] / matmul:.1%} |"
        )


if __name__ == "__main__":
    main()
