"""A decode step's attention as the reuse path runs it (a few queries a row under an additive mask, over a static
KV cache) against ``kernels.decode_attention`` (split along the keys), at the decode shapes of Qwen2-Audio (32 query
and 32 KV heads) and the Omni thinkers (28 query heads over 4 KV heads), one layer (needs a GPU).

For each shape: the median milliseconds over ``--repeats`` (CUDA events, after warm-up) of transformers' sdpa path
(``attention.reuse_attention`` without the kernel: sdpa's own choice of kernel), of sdpa with only the
memory-efficient kernel, and of the kernel at several splits; the bandwidth each reaches reading the keys and
values once; the largest difference from an fp32 reference and the share of bf16 outputs equal to sdpa's.

    python benchmarks/decode_attention.py [--repeats 50]
"""

from __future__ import annotations

import argparse
import math
import types

import torch
from fused_kernels import median_ms
from torch.nn.attention import SDPBackend, sdpa_kernel

from audioicl.backends.hf.reuse import attention, kernels
from audioicl.backends.hf.reuse.rows import additive_mask

# name → (query heads, KV heads); rows, queries a row (members), keys
FAMILIES = {"qwen2-audio": (32, 32), "omni": (28, 4)}
SHAPES = [(26, 5, 2200), (26, 5, 4400), (104, 5, 1200), (8, 1, 4400)]
SPLITS = (128, 256, 512)


def inputs(heads: int, kv_heads: int, rows: int, queries: int, keys: int) -> tuple[torch.Tensor, ...]:
    """Queries as the attention makes them (transposed), a static cache's keys and values, and a mask that
    shows every row's first 90 % of keys (its trunk and its members' own) to every query."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    query = torch.randn(rows, queries, heads, 128, device=device, dtype=dtype).transpose(1, 2)
    key, value = (torch.randn(rows, kv_heads, keys, 128, device=device, dtype=dtype) for _ in range(2))
    visible = torch.rand(rows, queries, keys, device=device) < 0.98
    visible[:, :, int(keys * 0.9) :] = False
    return query, key, value, additive_mask(visible, dtype)


def shape_rows(family: str, shape: tuple[int, int, int], repeats: int) -> list[dict]:
    heads, kv_heads = FAMILIES[family]
    rows, queries, keys = shape
    query, key, value, mask = inputs(heads, kv_heads, rows, queries, keys)
    module = types.SimpleNamespace(num_key_value_groups=heads // kv_heads, is_causal=False, training=False)
    scale = 1 / math.sqrt(128)

    def sdpa() -> torch.Tensor:
        return attention.reuse_attention(module, query, key, value, mask, scaling=scale)[0]

    def efficient() -> torch.Tensor:
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
            return sdpa()

    def split(keys_per_program: int):
        def call() -> torch.Tensor:
            kernels.DECODE_KEYS_PER_PROGRAM = keys_per_program
            return kernels.decode_attention(query, key, value, mask, scale)

        return call

    groups = heads // kv_heads
    reference = torch.nn.functional.scaled_dot_product_attention(
        query.float(),
        key.float().repeat_interleave(groups, 1),
        value.float().repeat_interleave(groups, 1),
        attn_mask=mask.float(),
        scale=scale,
    ).transpose(1, 2)
    gigabytes = 2 * key.numel() * key.element_size() / 1e9
    base = sdpa()
    made = []
    for name, call in [("sdpa", sdpa), ("sdpa efficient", efficient)] + [
        (f"kernel, {n} keys a program", split(n)) for n in SPLITS
    ]:
        out = call()
        ms = median_ms(call, repeats)
        made.append(
            {
                "family": family,
                "shape": f"{rows} rows x {queries} queries x {keys} keys",
                "what": name,
                "ms": ms,
                "gb_per_s": gigabytes / ms * 1e3,
                "max_diff": float((out.float() - reference).abs().max()),
                "same_as_sdpa": float((out == base).float().mean()),
            }
        )
    kernels.DECODE_KEYS_PER_PROGRAM = SPLITS[1]
    return made


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| family | shape | what | ms | GB/s (keys and values once) | max diff to fp32 | bf16 equal to sdpa |")
    print("|---|---|---|---|---|---|---|")
    for family in FAMILIES:
        for shape in SHAPES:
            for r in shape_rows(family, shape, args.repeats):
                print(
                    f"| {r['family']} | {r['shape']} | {r['what']} | {r['ms']:.3f} | {r['gb_per_s']:.0f} | "
                    f"{r['max_diff']:.2e} | {r['same_as_sdpa']:.2%} |"
                )


if __name__ == "__main__":
    main()
