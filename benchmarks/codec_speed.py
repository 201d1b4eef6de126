"""Apertus 1.5's audio codec (WavTokenizer's encoder, released configuration, random weights, float32) one clip
a call as the model calls it: transformers' own modules against the same prepared at load
(``backends.hf.codec``: the padding numbers on the CPU, the weight norms computed once). Milliseconds a clip (the
median of ``--repeats`` passes over the same clips), the ratio, and whether every clip's codes are equal.

    python benchmarks/codec_speed.py [--device cuda] [--clips 40] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import torch
from medians import print_medians
from transformers import AutoConfig, AutoModel

from audioicl.backends.hf.codec import prepare_codecs

SAMPLE_RATE = 24_000


def codec(device: str) -> torch.nn.Module:
    torch.manual_seed(0)
    config = AutoConfig.for_model("wavtokenizer_encoder")
    return AutoModel.from_config(config).float().eval().to(device)


def clips(count: int, device: str) -> list[torch.Tensor]:
    """``count`` waveforms of 0.5 to 4 s (the benchmark's clip lengths), each its own length."""
    generator = torch.Generator().manual_seed(1)
    lengths = torch.randint(SAMPLE_RATE // 2, 4 * SAMPLE_RATE, (count,), generator=generator).tolist()
    return [torch.randn(1, 1, n, generator=generator).to(device) for n in lengths]


def encode_all(model: torch.nn.Module, waves: list[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        return [model.encode(wave).audio_codes for wave in waves]


def timed(model: torch.nn.Module, waves: list[torch.Tensor], device: str) -> float:
    """Seconds to encode every clip, one a call, the device finished."""
    started = time.perf_counter()
    encode_all(model, waves)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--clips", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    waves = clips(args.clips, args.device)
    original, prepared = codec(args.device), codec(args.device)
    convs = prepare_codecs(prepared)
    same = all(
        torch.equal(a, b)
        for a, b in zip(encode_all(original, waves), encode_all(prepared, waves), strict=True)
    )
    seconds = {"transformers' modules": [], "prepared at load": []}
    for _ in range(args.repeats):  # taking turns, so that a drift of the machine reaches both
        seconds["transformers' modules"].append(timed(original, waves, args.device))
        seconds["prepared at load"].append(timed(prepared, waves, args.device))
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"{name}, {args.clips} clips of 0.5-4 s, {convs} convolutions prepared, median of {args.repeats}")
    print_medians(seconds, args.clips, "codec")
    print(f"every clip's codes equal: {same}")


if __name__ == "__main__":
    main()
