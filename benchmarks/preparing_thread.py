"""What the runner's preparing thread costs: the ``hf`` backend's ``prefetch`` over every prompt of a build (its
clips' features, the prompts rendered and tokenized), in CPU seconds of that thread, with the family's
``clip_features`` (the feature extractor alone) and with the processor's whole call over a placeholder a clip.

The thread runs beside the model's calls and holds the interpreter lock they need while it runs Python
(``thread_contention.py`` measures what that costs them on a GPU), so its CPU time is the cost to cut. A tiny
random checkpoint on this machine's CPU: the processor is the real one, the features are computed on the CPU
(on a GPU the extractor's share is smaller and the processor's Python a larger share). Median of ``--repeats``,
each from empty caches, after one untimed pass.

    python benchmarks/preparing_thread.py [--family qwen3-omni] [--episodes 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

from audioicl.backends.families.base import AudioFamily
from audioicl.backends.hf.backend import HFBackend
from audioicl.testing.requests import built_benchmark, episode_major_requests, tiny_backend


def prepared_once(backend: HFBackend, requests) -> tuple[float, float]:
    """CPU seconds of one ``prefetch`` over ``requests`` from empty caches, and its feature seconds (wall)."""
    backend.clear_caches()
    backend._ahead.clear()
    backend.seconds["features"] = 0.0
    started = time.process_time()
    backend.prefetch(requests)
    return time.process_time() - started, backend.seconds["features"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", default="qwen3-omni")
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = built_benchmark(Path(tmp) / "bench", args.episodes)
        loaded = tiny_backend(args.family, Path(tmp) / "ckpt")
        backend = HFBackend.around("hf:tiny", loaded.model, loaded.processor, reuse="prefix")
        requests = episode_major_requests(data, backend.family, args.episodes)
        family = type(backend.model_family)
        settings = {
            "the processor's call": patch.object(family, "clip_features", AudioFamily.clip_features),
            "the family's clip_features": patch.object(family, "clip_features", family.clip_features),
        }
        rows = {}
        for label, setting in settings.items():
            backend.clips._direct_features = (
                None  # checked afresh against the processor's call, as a run does
            )
            with setting:
                prepared_once(backend, requests)
                runs = [prepared_once(backend, requests) for _ in range(args.repeats)]
            rows[label] = [statistics.median(run[i] for run in runs) for i in (0, 1)]
    baseline = rows["the processor's call"][0]
    print(f"{args.family}, {len(requests)} prompts ({args.episodes} episodes a task, k = 1..5)")
    print("| features through | preparing thread CPU s | feature s | vs the processor's call |")
    print("|---|---|---|---|")
    for label, (cpu, features) in rows.items():
        print(f"| {label} | {cpu:.2f} | {features:.2f} | {cpu / baseline:.2f}x |")


if __name__ == "__main__":
    main()
