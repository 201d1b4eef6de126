"""How long the model waits for its first call: the runner's first windows ramped (1, 2, then 4 batches) against
every window 4 batches, over a real build on this machine's CPU.

Nothing overlaps the first window's preparation (each clip through the real processor of the family: its feature
extraction), so the model waits for all of it before its first call; later windows are prepared while the one
before them runs. The model is a tiny random checkpoint, so the wait is the one a full-size model on a GPU has
(the same processor, the same clips), while its own calls are far shorter than a GPU's: the wall time here is
mostly feature extraction and says little. Each run starts from empty caches (a backend of its own around the
same model), after one untimed run; the row is the median of ``--repeats``.

    python benchmarks/window_ramp.py [--episodes 5] [--batch-size 32] [--family qwen2-audio] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from audioicl.backends.hf.backend import HFBackend
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import WINDOW_BATCHES, run
from audioicl.testing.requests import built_benchmark, tiny_backend


class Timed:
    """The backend, each ``generate`` call's start and end kept (the runner sees the backend itself)."""

    def __init__(self, backend: HFBackend) -> None:
        self.backend = backend
        self.calls: list[tuple[float, float, int]] = []

    def generate(self, requests, config):
        started = time.perf_counter()
        out = self.backend.generate(requests, config)
        self.calls.append((started, time.perf_counter(), len(requests)))
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def one_run(model, processor, data: Path, out: Path, batch: int, window: int | None) -> dict[str, float]:
    backend = HFBackend.around("hf:tiny", model, processor)
    timed = Timed(backend)
    options = RunOptions(data=data, model="hf:tiny", out=out, batch_size=batch, window=window)
    started = time.perf_counter()
    run(options, report=lambda _: None, backend=timed)
    wall = time.perf_counter() - started
    busy = sum(end - begin for begin, end, _ in timed.calls)
    return {
        "first_wait": timed.calls[0][0] - started,
        "first_call": timed.calls[0][2],
        "calls": len(timed.calls),
        "busy": busy,
        "features": backend.seconds["features"],
        "wall": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--family", default="qwen2-audio")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = built_benchmark(Path(tmp) / "bench", args.episodes)
        loaded = tiny_backend(args.family, Path(tmp) / "ckpt")
        settings = {"ramp (default)": None, f"{WINDOW_BATCHES} batches": args.batch_size * WINDOW_BATCHES}
        # one run first, not timed: a process's first run pays one-time costs (kernels, allocator)
        one_run(loaded.model, loaded.processor, data, Path(tmp) / "warm-up", args.batch_size, None)
        rows = {}
        for label, window in settings.items():
            made = [
                one_run(
                    loaded.model,
                    loaded.processor,
                    data,
                    Path(tmp) / f"out-{label}-{i}",
                    args.batch_size,
                    window,
                )
                for i in range(args.repeats)
            ]
            rows[label] = {key: statistics.median(m[key] for m in made) for key in made[0]}
    print(
        f"{args.family} (tiny, CPU), {args.episodes} episodes per task, batch {args.batch_size}, "
        f"median of {args.repeats}"
    )
    print(
        f"{'windows':>16} | {'calls':>5} | {'first call':>10} | {'wait before it s':>16} | {'model s':>7} | "
        f"{'features s':>10} | {'wall s':>6}"
    )
    for label, row in rows.items():
        print(
            f"{label:>16} | {row['calls']:>5.0f} | {row['first_call']:>10.0f} | {row['first_wait']:>16.2f} | "
            f"{row['busy']:>7.2f} | {row['features']:>10.2f} | {row['wall']:>6.2f}"
        )
    ramp, flat = rows.values()
    print(f"{'ramp / flat':>16} | {'':>5} | {'':>10} | {ramp['first_wait'] / flat['first_wait']:>16.2f} |")


if __name__ == "__main__":
    main()
