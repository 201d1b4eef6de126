"""What ``-o pack=on`` saves the reuse path's prefill, counted over a real build: positions and attention area.

Every prompt of a build (k = 1..5, the Morse bank on) goes through the ``hf`` backend of a tiny random Qwen2-Audio
checkpoint as a run sends it: episode-major windows of the runner's sizes (``batch x 4`` prompts, the first two
1 and 2 batches; none cuts an episode), each prepared (its clips through the real Qwen2-Audio processor: the real audio token counts; the text
through a small BPE, so text counts are larger than Qwen's), packed into the reuse path's rows (an episode's k
prompts sharing their prefix) and cut into batches.
Nothing runs through a model: what a prefill computes follows from the batches' shapes.

- ``positions``: rows x the batch's longest row, summed over batches (every position of the prefill, padding
  included); ``padding``: the share of those that hold no token;
- ``attention``: rows x longest^2 summed (the masked full square that sdpa computes for the custom mask).

    python benchmarks/row_packing.py [--episodes 20] [--batch-size 128]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from audioicl.backends.base import Request
from audioicl.testing.requests import built_benchmark, episode_major_requests, run_batches, tiny_backend


def shapes(backend, all_requests: list[Request], batch_size: int, packed: bool) -> dict[str, float]:
    totals = {"batches": 0, "rows": 0, "tokens": 0, "positions": 0, "attention": 0}
    for batch in run_batches(backend, all_requests, batch_size, packed=packed):
        longest = max(row.length for row in batch)
        totals["batches"] += 1
        totals["rows"] += len(batch)
        totals["tokens"] += sum(row.length for row in batch)
        totals["positions"] += len(batch) * longest
        totals["attention"] += len(batch) * longest**2
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = built_benchmark(Path(tmp) / "bench", args.episodes)
        backend = tiny_backend("qwen2-audio", Path(tmp) / "ckpt")
        prompts = episode_major_requests(root, backend.family)
        plain = shapes(backend, prompts, args.batch_size, packed=False)
        packed = shapes(backend, prompts, args.batch_size, packed=True)
    print(
        f"{len(prompts)} prompts ({args.episodes} episodes per task, k = 1..5), batch {args.batch_size}, reuse=prefix"
    )
    print(f"{'':>12} | {'batches':>7} | {'rows':>6} | {'positions':>11} | {'padding':>7} | {'attention':>15}")
    for name, made in (("pack=off", plain), ("pack=on", packed)):
        padding = 1 - made["tokens"] / made["positions"]
        print(
            f"{name:>12} | {made['batches']:>7} | {made['rows']:>6} | {made['positions']:>11,} | "
            f"{padding:>7.1%} | {made['attention']:>15,}"
        )
    print(
        f"{'on / off':>12} | {'':>7} | {packed['rows'] / plain['rows']:>6.2f} | "
        f"{packed['positions'] / plain['positions']:>11.3f} | {'':>7} | {packed['attention'] / plain['attention']:>15.3f}"
    )


if __name__ == "__main__":
    main()
