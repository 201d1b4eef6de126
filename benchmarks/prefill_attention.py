"""Where the reuse path's prefill time goes, which SDPA kernel serves its masks best, and how many parts to
read it in (needs a GPU).

Per family (``--families``), a full-size model with random weights; the first ``--episodes`` episodes of every
task at every k, packed into rows as the ``hf`` backend packs them (``reuse=prefix``) and cut into batches of
``--batch-size`` prompts. For each choice of SDPA kernels (``--kernels``) and of prefill parts (``--chunks``,
``reuse.prefill_chunks``): the median over ``--repeats`` of the time to prefill all batches (audio embeddings
made beforehand, not timed), its ratio to the first choice, and the first-position logits' relative error
against the first's. Then one profiled pass of the default: CUDA time by kernel class.

    python benchmarks/prefill_attention.py --data FULL --episodes 12 --batch-size 128 --chunks 1,4,8
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

from audioicl.backends.hf import HFBackend
from audioicl.backends.reuse import PREFILL_CHUNKS, batches, prefill
from audioicl.testing import full_size_model
from audioicl.testing.requests import episode_major_requests

CHOICES = {
    "default": None,
    "efficient": [SDPBackend.EFFICIENT_ATTENTION],
    "cudnn": [SDPBackend.CUDNN_ATTENTION],
}
KERNEL_CLASSES = (
    ("attention", ("fmha", "attention", "flash", "cudnn", "sdpa", "softmax")),
    ("matmul", ("gemm", "cutlass", "xmma", "nvjet", "cublas", "matmul")),
)


def kernels(choice: list[SDPBackend] | None):
    return sdpa_kernel(choice) if choice else contextlib.nullcontext()


def prefill_all(backend: HFBackend, work, steps: int, chunks: int = PREFILL_CHUNKS) -> list[torch.Tensor]:
    """Every batch prefilled in ``chunks`` parts; the first-position logits of each (float32, on the GPU)."""
    out = []
    for batch, audio in work:
        done = prefill(
            backend.parts,
            batch,
            audio,
            steps,
            backend.pad_token_id,
            backend.model.dtype,
            backend.device,
            chunks,
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


def time_choices(backend: HFBackend, work, steps: int, choices, repeats: int) -> list[tuple]:
    """(label, median seconds, max relative error of the logits against the first choice, note) per
    ``(label, kernels, chunks)`` choice."""
    reference = None
    table = []
    for label, choice, chunks in choices:
        try:
            with kernels(choice):
                prefill_all(backend, work, steps, chunks)  # warm-up
                times, logits = [], None
                for _ in range(repeats):
                    started = time.perf_counter()
                    logits = prefill_all(backend, work, steps, chunks)
                    times.append(time.perf_counter() - started)
        except RuntimeError as exc:  # no kernel of this choice takes these inputs
            table.append((label, None, None, str(exc).splitlines()[0][:80]))
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
        table.append((label, seconds, error, ""))
    return table


def profile_by_class(backend: HFBackend, work, steps: int) -> None:
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
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12, max_name_column_width=60))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark (audioicl build)")
    parser.add_argument("--families", default="qwen2-audio")
    parser.add_argument("--episodes", type=int, default=12, help="episodes per task, every k")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--kernels", default="default", help=f"SDPA kernel choices: {','.join(CHOICES)}")
    parser.add_argument("--chunks", default=str(PREFILL_CHUNKS), help="prefill parts to time, e.g. 1,4,8")
    parser.add_argument("--profile", action="store_true", help="then one profiled pass, by kernel class")
    args = parser.parse_args()

    for family in args.families.split(","):
        model, processor = full_size_model(family, "cuda", torch.bfloat16)
        backend = HFBackend.around(f"hf:{family}-full-random", model, processor, reuse="prefix")
        requests = episode_major_requests(args.data, backend.family, args.episodes)
        prepared, failed = backend.prepare(requests)
        assert not failed, failed
        rows, clips, failed = backend.pack(prepared)
        assert not failed, failed
        steps = args.max_new_tokens - 1
        with torch.inference_mode():
            work = [
                (batch, backend._embeddings(backend._clips_of(batch, clips)))
                for batch in batches(rows, args.batch_size)
            ]
            positions = sum(len(batch) * max(row.length for row in batch) for batch, _ in work)
            print(
                f"{family} on {torch.cuda.get_device_name()}, torch {torch.__version__}: {len(requests)} "
                f"prompts in {len(rows)} rows, {len(work)} batches, {positions} prefill positions",
                flush=True,
            )
            choices = [
                (f"{name}, {chunks} part{'s' if int(chunks) > 1 else ''}", CHOICES[name], int(chunks))
                for name in args.kernels.split(",")
                for chunks in args.chunks.split(",")
            ]
            table = time_choices(backend, work, steps, choices, args.repeats)
            first = next(seconds for _, seconds, _, _ in table if seconds is not None)
            print(
                f"| {family}: SDPA kernels, prefill parts | prefill s (median) | vs first | max rel. error of logits vs first | note |"
            )
            print("|---|---|---|---|---|")
            for label, seconds, error, note in table:
                if seconds is None:
                    print(f"| {label} | — | — | — | {note} |")
                else:
                    print(f"| {label} | {seconds:.3f} | {first / seconds:.2f}x | {error:.1e} | {note} |")
            if args.profile:
                profile_by_class(backend, work, steps)
        del model, processor, backend, work
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
