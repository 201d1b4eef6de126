"""Extracting a window's clips ahead where a call pads its clips to its longest and the features are computed
on the CPU (Gemma 4's numpy extractor; on the GPU machine the preparing thread's 11.2 s that Gemma 4's
20-episode run waited 11.8 s for): the processor's calls of 64 clips in the order asked (the code before) against
``ClipFeaturizer.prefetch`` (its calls of near lengths, longest first). Milliseconds a clip, the median of
``--repeats`` passes over the same clips (the cache emptied before each), and whether every clip's features
are equal.

    python benchmarks/feature_order.py [--family gemma4] [--clips 256] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from medians import print_medians

from audioicl.backends import ModelSpec, load_backend
from audioicl.backends.hf import features
from audioicl.prompts.chat import AudioPart
from audioicl.testing.families import TINY


def clips(count: int, rate: int) -> list[AudioPart]:
    """``count`` clips of noise, 0.5 to 4 s (the benchmark's clip lengths), in no order of length."""
    rng = np.random.default_rng(1)
    return [
        AudioPart.of((0.1 * rng.standard_normal(int(rate * rng.uniform(0.5, 4)))).astype(np.float32), rate)
        for _ in range(count)
    ]


def before(featurizer: features.ClipFeaturizer, waves: list[AudioPart]) -> None:
    """The code before: calls of ``PREFETCH_CLIPS`` clips in the order asked, one after another."""
    for start in range(0, len(waves), features.PREFETCH_CLIPS):
        chunk = waves[start : start + features.PREFETCH_CLIPS]
        for clip, made in zip(chunk, featurizer.extract(chunk), strict=True):
            featurizer.features.put(clip.digest, made)


def timed(featurizer: features.ClipFeaturizer, waves: list[AudioPart], now: bool) -> float:
    featurizer.features.clear()
    started = time.perf_counter()
    if now:
        featurizer.prefetch(waves)
    else:
        before(featurizer, waves)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", default="gemma4")
    parser.add_argument("--clips", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = TINY.get(args.family).write(Path(folder) / args.family, 0)
        backend = load_backend(ModelSpec("hf", str(checkpoint)), dtype="fp32", device="cpu")
        featurizer = backend.clips
        waves = clips(args.clips, featurizer.sampling_rate)
        timed(featurizer, waves, False)  # a warm-up, and the reference features
        reference = {clip.digest: featurizer.features.get(clip.digest) for clip in waves}
        runs = {"before: calls of 64 in the order asked": False, "prefetch: longest first": True}
        seconds: dict[str, list[float]] = {label: [] for label in runs}
        same = True
        for _ in range(args.repeats):  # taking turns, so that a drift of the machine reaches every row
            for label, now in runs.items():
                seconds[label].append(timed(featurizer, waves, now))
                same &= all(
                    torch.equal(featurizer.features.get(d).features, made.features)
                    for d, made in reference.items()
                )
        backend.close()
    print(f"{args.family}'s feature extractor, {args.clips} clips of 0.5-4 s, median of {args.repeats}, CPU")
    print_medians(seconds, args.clips, "extraction ahead")
    print(f"every clip's features equal to the code before's: {same}")


if __name__ == "__main__":
    main()
