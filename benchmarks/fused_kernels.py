"""The Triton kernels of ``-o fused=`` (``backends.kernels``) against the eager transformers modules they stand in
for, at the decoder shapes of the Qwen families (needs a GPU).

For each shape: the median over ``--repeats`` of one call (CUDA events, after warm-up), eager and fused, their
ratio, and the share of bf16 output elements identical to the bit. Rows: an RMSNorm over a prefill's positions
(``--positions``), the MLP's ``silu(gate) * up``, and the whole MLP (its three matmuls included: what the prefill
gains), plus a per-head norm (Qwen3-Omni's queries and keys) and the rotary embedding of a layer's queries and
keys (Qwen2-Audio's 32 heads of 128, laid out as its attention makes them).

    python benchmarks/fused_kernels.py [--positions 16384] [--repeats 20]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from gpu_throughput import cuda_ms
from transformers import Qwen2Config
from transformers.models.qwen2.modeling_qwen2 import Qwen2MLP, Qwen2RMSNorm, apply_rotary_pos_emb

from audioicl.backends.hf.reuse import kernels

# name → (hidden size, MLP width): Qwen2.5-Omni-7B's thinker, Qwen2-Audio-7B's decoder
SHAPES = {"qwen2.5-omni": (3584, 18944), "qwen2-audio": (4096, 11008)}


def median_ms(call: Callable[[], torch.Tensor], repeats: int) -> float:
    """``gpu_throughput.cuda_ms`` after three calls of warm-up."""
    for _ in range(3):
        call()
    return cuda_ms(call, repeats)


def row(name: str, eager: Callable, fused: Callable, repeats: int) -> dict:
    same = float((eager() == fused()).float().mean())
    eager_ms, fused_ms = median_ms(eager, repeats), median_ms(fused, repeats)
    return {
        "what": name,
        "eager_ms": eager_ms,
        "fused_ms": fused_ms,
        "ratio": eager_ms / fused_ms,
        "same": same,
    }


def family_rows(family: str, hidden: int, width: int, positions: int, repeats: int) -> list[dict]:
    device, dtype = torch.device("cuda"), torch.bfloat16
    norm = Qwen2RMSNorm(hidden, eps=1e-6).to(device, dtype)
    norm.weight.normal_(1.0, 0.1)
    mlp = Qwen2MLP(Qwen2Config(hidden_size=hidden, intermediate_size=width, hidden_act="silu")).to(
        device, dtype
    )
    x = torch.randn(positions, hidden, device=device, dtype=dtype)
    gate, up = mlp.gate_proj(x), mlp.up_proj(x)
    return [
        row(f"{family} RMSNorm", lambda: norm(x), lambda: kernels.rms_norm(x, norm.weight, 1e-6), repeats),
        row(
            f"{family} silu(gate) x up",
            lambda: mlp.act_fn(gate) * up,
            lambda: kernels.silu_mul(gate, up),
            repeats,
        ),
        row(
            f"{family} MLP",
            lambda: mlp(x),
            lambda: mlp.down_proj(kernels.silu_mul(mlp.gate_proj(x), mlp.up_proj(x))),
            repeats,
        ),
    ]


@torch.inference_mode()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=16384, help="rows x positions of one prefill")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, {args.positions} positions")
    rows = [
        r
        for family, (hidden, width) in SHAPES.items()
        for r in family_rows(family, hidden, width, args.positions, args.repeats)
    ]
    heads = torch.randn(args.positions, 32, 128, device="cuda", dtype=torch.bfloat16)  # Qwen3-Omni's queries
    head_norm = Qwen2RMSNorm(128, eps=1e-6).to("cuda", torch.bfloat16)
    rows.append(
        row(
            "per-head RMSNorm (32 x 128)",
            lambda: head_norm(heads),
            lambda: kernels.rms_norm(heads, head_norm.weight, 1e-6),
            args.repeats,
        )
    )
    # the queries and keys of one layer, [rows, heads, positions, dim] over [rows, positions, heads, dim]
    q, k = (
        torch.randn(8, args.positions // 8, 32, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2)
    )
    q, k = q.transpose(1, 2), k.transpose(1, 2)
    cos, sin = (
        torch.randn(8, args.positions // 8, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2)
    )
    rows.append(
        row(
            "rotary embedding, queries and keys (32 x 128)",
            lambda: apply_rotary_pos_emb(q, k, cos, sin)[0],  # both computed, the queries compared
            lambda: (kernels.rotary(k, cos, sin), kernels.rotary(q, cos, sin))[1],
            args.repeats,
        )
    )
    print("| what | eager ms | fused ms | eager / fused | bf16 elements identical |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['what']} | {r['eager_ms']:.3f} | {r['fused_ms']:.3f} | {r['ratio']:.2f}x | {r['same']:.4%} |"
        )


if __name__ == "__main__":
    main()
