"""Where the reuse path's prefill time goes, and which SDPA kernel serves its masks best (needs a GPU).

A full-size model with random weights; the first ``--episodes`` episodes of every task at every k, packed into
rows as the ``hf`` backend packs them (``reuse=prefix``) and cut into batches of ``--batch-size`` prompts.
For each choice of SDPA kernels (``CHOICES``: which takes a read's causal head, which the rest under its mask): the
median over ``--repeats`` of the time to prefill all batches (audio embeddings made beforehand, not timed; the fused
kernels in force, as a run reads), its ratio to the default choice, and the first-position logits' relative error
against the default's. Then one profiled pass of the default: CUDA time by kernel class. Last, what sdpa's
first call on a shape it has not seen costs against the same call again, for each kernel (cuDNN builds a graph
a shape: ``new_shape_ms``).

    python benchmarks/prefill_attention.py --data FULL --episodes 12 --batch-size 128
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from pathlib import Path

import torch
from gpu_throughput import relative_error
from torch.nn.attention import SDPBackend, sdpa_kernel

from audioicl.backends.hf.backend import HFBackend
from audioicl.backends.hf.reuse.decode import prefill
from audioicl.backends.hf.reuse.rows import batches
from audioicl.testing import full_size_model
from audioicl.testing.requests import episode_major_requests, packed_rows

# sdpa's kernels by priority (``sdpa_kernel(..., set_priority=True)``): the causal head goes to the first that takes a
# causal call without a mask (its lower-right variant to flash or efficient only), the rest of the read (under the
# mask) to the first that takes a mask (cuDNN or efficient)
FLASH, CUDNN, EFFICIENT = (
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
)
CHOICES = {
    "default": None,
    "flash head, cudnn rest": [FLASH, CUDNN, EFFICIENT],
    "cudnn head, efficient rest": [CUDNN, EFFICIENT],
    "flash head, efficient rest": [FLASH, EFFICIENT],
    "efficient": [EFFICIENT],
}
KERNEL_CLASSES = (
    ("attention", ("fmha", "attention", "flash", "cudnn", "sdpa", "softmax")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul")),
)


def kernels(choice: list[SDPBackend] | None):
    return sdpa_kernel(choice, set_priority=True) if choice else contextlib.nullcontext()


def prefill_all(backend: HFBackend, work, steps: int) -> list[torch.Tensor]:
    """Every batch prefilled; the first-position logits of each (float32, on the GPU)."""
    out = []
    for batch, audio in work:
        with backend.path._fused_kernels():  # as the run reads: norms, MLPs and rotary through Triton
            done = prefill(
                backend.path.parts,
                [batch],
                audio,
                steps,
                backend.pad_token_id,
                backend.model.dtype,
                backend.device,
            )
        out.append(done.logits.float())
        del done
    torch.cuda.synchronize()
    return out


def kernel_class(name: str) -> str:
    lowered = name.lower()
    for label, marks in KERNEL_CLASSES:
        if any(mark in lowered for mark in marks):
            return label
    return "other"


def new_shape_ms(choice: list[SDPBackend], masked: bool, shapes: int = 5) -> tuple[float, float]:
    """Milliseconds (host and GPU, synchronized) of sdpa's first call on a shape it has not seen and of the
    call again, medians over ``shapes`` shapes a read of Qwen2-Audio's prefill could have (26 rows, 32 heads of
    128, about 800 queries over 4,400 keys, under an additive mask or causal): cuDNN builds a graph a new shape
    before its first call, which a read of new lengths pays once a layer type, the GPU idle meanwhile."""
    device, dtype = torch.device("cuda"), torch.bfloat16
    first, again = [], []
    for at in range(shapes):
        queries, keys = 800 + 8 * at, 4400 + 16 * at + 1000 * masked
        query = torch.randn(26, 32, queries, 128, device=device, dtype=dtype)
        key, value = (torch.randn(26, 32, keys, 128, device=device, dtype=dtype) for _ in "kv")
        mask = torch.zeros(26, 1, queries, keys, device=device, dtype=dtype) if masked else None
        for times in (first, again):
            torch.cuda.synchronize()
            started = time.perf_counter()
            with kernels(choice):
                torch.nn.functional.scaled_dot_product_attention(
                    query, key, value, attn_mask=mask, is_causal=not masked
                )
            torch.cuda.synchronize()
            times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(first), statistics.median(again)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark (audioicl build)")
    parser.add_argument("--family", default="qwen2-audio")
    parser.add_argument("--episodes", type=int, default=12, help="episodes per task, every k")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    args = parser.parse_args()

    model, processor = full_size_model(args.family, "cuda", torch.bfloat16)
    backend = HFBackend.around(f"hf:{args.family}-full-random", model, processor, reuse="prefix")
    requests = episode_major_requests(args.data, backend.family, args.episodes)
    rows, clips = packed_rows(backend, requests)
    steps = args.max_new_tokens - 1
    with torch.inference_mode():
        work = [
            (batch, backend.path._embeddings(backend.path._clips_of(batch, clips)))
            for batch in batches(rows, args.batch_size)
        ]
        positions = sum(len(batch) * max(row.length for row in batch) for batch, _ in work)
        print(
            f"{torch.cuda.get_device_name()}, torch {torch.__version__}: {len(requests)} prompts in "
            f"{len(rows)} rows, {len(work)} batches, {positions} prefill positions",
            flush=True,
        )
        reference = None
        print(
            "| SDPA kernels | prefill s (median) | vs default | max rel. error of logits vs default | note |"
        )
        print("|---|---|---|---|---|", flush=True)  # each row as it is measured: a cut run keeps its rows
        for label, choice in CHOICES.items():
            try:
                with kernels(choice):
                    prefill_all(backend, work, steps)  # warm-up
                    times, logits = [], None
                    for _ in range(args.repeats):
                        started = time.perf_counter()
                        logits = prefill_all(backend, work, steps)
                        times.append(time.perf_counter() - started)
            except RuntimeError as exc:  # no kernel of this choice takes these inputs
                print(f"| {label} | — | — | — | {str(exc).splitlines()[0][:80]} |", flush=True)
                continue
            seconds = statistics.median(times)
            if reference is None:
                reference = (seconds, logits)
            error = max(
                relative_error(a[i, j], b[i, j])
                for a, b in zip(logits, reference[1], strict=True)
                for i in range(a.shape[0])
                for j in range(a.shape[1])
            )
            print(f"| {label} | {seconds:.3f} | {reference[0] / seconds:.2f}x | {error:.1e} | |", flush=True)

        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            prefill_all(backend, work, steps)
        by_class: dict[str, float] = {}
        for event in prof.key_averages():
            if event.device_type == DeviceType.CUDA:
                name = kernel_class(event.key)
                by_class[name] = by_class.get(name, 0.0) + event.self_device_time_total
        total = sum(by_class.values())
        print()
        print("| kernel class (default) | CUDA ms | share |")
        print("|---|---|---|")
        for name, micros in sorted(by_class.items(), key=lambda item: -item[1]):
            print(f"| {name} | {micros / 1e3:.1f} | {micros / total:.0%} |")
        print()
        print(
            prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12, max_name_column_width=60)
        )

    # last: measured first (2026-12-06), the choices after it ran the efficient kernel by default where
    # `audioicl run` has cuDNN; the priorities sdpa_kernel(..., set_priority=True) set are the suspect
    print("\n| sdpa kernel, call | first call on a new shape ms | the same call again ms |\n|---|---|---|")
    for label, choice, masked in (
        ("cuDNN, masked", [CUDNN], True),
        ("efficient, masked", [EFFICIENT], True),
        ("cuDNN, causal", [CUDNN], False),
        ("flash, causal", [FLASH], False),
    ):
        try:
            made = new_shape_ms(choice, masked)
        except RuntimeError as exc:  # the kernel refuses these inputs
            print(f"| {label} | — | {str(exc).splitlines()[0][:60]} |")
            continue
        print(f"| {label} | {made[0]:.1f} | {made[1]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
