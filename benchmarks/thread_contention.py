"""Does the runner's preparing thread slow the model's own calls? The audio encoder over every distinct clip and
one batch's prefill and decode, each timed alone and beside a thread that does what the preparing thread does
(the family's processor over the build's clips, one call after another as ``prefetch`` makes them, on the
backend's feature stream), at Python's default GIL switch interval (5 ms) and at a short one.

Why it could: the model's calls are thousands of small torch operations, each releasing the GIL while it
launches its kernel, and a few host syncs. A thread that holds the GIL in Python (a processor's tokenizer and
padding) makes each re-acquire wait for it to reach a switch point, up to the interval. On a CPU with a tiny
model each operation is long and the effect is lost in it; a GPU's launches are microseconds.

    python benchmarks/thread_contention.py --data BUILD [--families qwen2.5-omni,qwen3-omni] [--limit 5]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import torch

from audioicl.backends.base import GenerationConfig
from audioicl.backends.hf.backend import HFBackend
from audioicl.backends.hf.features import PREFETCH_CLIPS
from audioicl.backends.hf.reuse.rows import batches
from audioicl.testing import full_size_model
from audioicl.testing.requests import episode_major_requests, packed_rows

INTERVALS = (0.005, 0.0002)  # Python's default, and a short one


class PreparingThread:
    """A thread extracting ``clips``' features one call after another (the backend's ``_extract``, nothing
    cached) until stopped, as many clips a call as ``prefetch`` gives one: ``PREFETCH_CLIPS`` where the
    family's features do not depend on the call, else one (a clip of one length with others is rarer)."""

    def __init__(self, backend: HFBackend, clips: list) -> None:
        self.backend, self.clips, self.calls = backend, clips, 0
        self.per_call = PREFETCH_CLIPS if backend.model_family.features_independent_of_batch else 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._work, daemon=True)

    def _work(self) -> None:
        while not self._stop.is_set():
            start = self.calls * self.per_call % len(self.clips)
            self.backend.clips.extract(self.clips[start : start + self.per_call])
            self.calls += 1

    def __enter__(self) -> PreparingThread:
        self._thread.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def timed(step: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``step()`` (the GPU synchronized before and after)."""
    runs = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        step()
        torch.cuda.synchronize()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def measure(family: str, data: Path, limit: int, batch_size: int, repeats: int) -> list[dict]:
    model, processor = full_size_model(family, "cuda", torch.bfloat16)
    backend = HFBackend.around(f"hf:{family}-full-random", model, processor, reuse="prefix")
    requests = episode_major_requests(data, backend.family, limit)
    rows, clips = packed_rows(backend, requests)
    parts = list({p.digest: p for r in requests for p in backend._render(r)[1]}.values())
    config = GenerationConfig(max_new_tokens=16, batch_size=batch_size)
    first = batches(rows, batch_size)[0]
    first_clips = backend.path._clips_of(first, clips)

    def encode_all() -> None:
        backend.path.embeddings.clear()
        with torch.inference_mode():
            backend.path._embeddings(clips)

    def answer_batch() -> None:
        backend.path._generate_rows(first, first_clips, config)

    answer_batch()  # warm: kernels, the CUDA graph's first capture, the embeddings of the first batch
    encode_all()
    out = []
    for interval in INTERVALS:
        sys.setswitchinterval(interval)
        for label, step in (("encode every clip", encode_all), ("one batch: prefill + decode", answer_batch)):
            alone = timed(step, repeats)
            with PreparingThread(backend, parts) as thread:
                beside = timed(step, repeats)
            out.append(
                {
                    "family": family,
                    "work": label,
                    "interval_ms": interval * 1000,
                    "alone_s": alone,
                    "beside_s": beside,
                    "ratio": beside / alone,
                    "processor_calls": thread.calls,
                }
            )
            print(json.dumps(out[-1]), flush=True)
    sys.setswitchinterval(INTERVALS[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark (audioicl build)")
    parser.add_argument("--families", default="qwen2.5-omni,qwen3-omni")
    parser.add_argument("--limit", type=int, default=5, help="episodes per task")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    for family in args.families.split(","):
        rows += measure(family, args.data, args.limit, args.batch_size, args.repeats)
        gc.collect()  # the family's model, before the next is built
        torch.cuda.empty_cache()
    print(
        "| family | work | switch interval ms | alone s | beside the preparing thread s | ratio | processor calls |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['family']} | {r['work']} | {r['interval_ms']:g} | {r['alone_s']:.3f} | {r['beside_s']:.3f} | "
            f"{r['ratio']:.2f}x | {r['processor_calls']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
