"""Throughput of the ``hf`` backend on a GPU: full-size models with random weights, the real runner.

For each family it builds the full-size configuration with random weights directly on the GPU
(``checkpoints.full_size_model``), wraps it in the ``hf`` backend and runs ``runner.run`` over a built
benchmark (all nine tasks, every k the build has, so the mix of prompts is the benchmark's), greedy with
``--max-new-tokens`` tokens. Feature extraction is part of the time (the processor's own, per distinct clip).

Printed per family: prompts, wall seconds, prompts/s, audio seconds/s, estimated TFLOP/s (2 x parameters x
tokens for the language model, active parameters for MoE, plus 2 x encoder parameters x encoder positions per
clip; attention's quadratic term left out, so an underestimate) and its fraction of the bf16 matmul ceiling
measured in the same process, peak GPU memory, and the full benchmark (13,500 prompts) extrapolated.

    python benchmarks/gpu_throughput.py --data BUILD [--families qwen2-audio,qwen2.5-omni] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import soundfile as sf
import torch

from audioicl.backends.hf import HFBackend
from audioicl.backends.rendering import family_of
from audioicl.checkpoints import full_size_model
from audioicl.runner import RunOptions, run

FULL_BENCHMARK = 13_500  # 9 tasks x 300 episodes x k = 1..5


def matmul_ceiling(n: int = 8192, repeats: int = 20) -> float:
    """Median bf16 dense matmul rate in TFLOP/s."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * n**3 / statistics.median(times) / 1e12


def parameter_counts(model: torch.nn.Module) -> dict[str, float]:
    """Parameters doing matmul work per token: the language model (MoE experts counted as active only)
    and the audio encoder. Embedding lookups and the unused vision encoder are left out."""
    config = getattr(model.config, "text_config", model.config)
    experts = getattr(config, "num_experts", None)
    active = getattr(config, "num_experts_per_tok", None)
    counts = {"lm": 0.0, "audio": 0.0}
    for name, param in model.named_parameters():
        if "audio_tower" in name:
            counts["audio"] += param.numel()
        elif "visual" in name or "embed_tokens" in name:
            continue
        elif experts and ".experts." in name:
            counts["lm"] += param.numel() * active / experts
        else:
            counts["lm"] += param.numel()
    return counts


def encoder_positions(family: str, audio_tokens: int, clips: int) -> float:
    """Positions the audio encoder's transformer runs over for a prompt's clips."""
    if family == "qwen2-audio":
        return 1500.0 * clips  # every clip padded to the 30 s window
    if family == "qwen2.5-omni":
        return 2.0 * audio_tokens  # pooled by 2 after the encoder
    return float(audio_tokens)


def profile_one_window(backend: HFBackend, options: RunOptions) -> None:
    """The GPU operators of one window of prompts (k = 3, one episode per task), by CUDA time."""
    from torch.profiler import ProfilerActivity, profile

    probe = RunOptions(**{**options.__dict__, "out": options.out / "profile", "limit": 4, "shots": (3,)})
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(probe, report=lambda _: None, backend=backend)
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=60))


def clip_seconds(data: Path, paths: list[str], cache: dict[str, float]) -> float:
    total = 0.0
    for path in paths:
        if path not in cache:
            cache[path] = sf.info(str(data / path)).duration
        total += cache[path]
    return total


def measure(family: str, args: argparse.Namespace, ceiling: float) -> dict[str, float]:
    torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    model, processor = full_size_model(family, "cuda", torch.bfloat16)
    built = time.perf_counter() - started
    spec = family_of(model.config.model_type)
    backend = HFBackend(
        name=f"hf:{family}-full-random",
        model=model,
        processor=processor,
        model_family=spec,
        device=torch.device("cuda"),
        kv_cache=args.cache,
    )
    counts = parameter_counts(model)
    out = Path(tempfile.mkdtemp(prefix=f"gpu-{family}-"))
    options = RunOptions(
        data=args.data,
        model=f"hf:{family}-full-random",
        out=out,
        batch_size=args.batch_size,
        window=args.window,
        max_new_tokens=args.max_new_tokens,
        limit=args.limit,
    )
    warm = RunOptions(**{**options.__dict__, "out": out / "warmup", "limit": 1, "shots": (1,)})
    run(warm, report=lambda _: None, backend=backend)  # kernels compiled, allocator warm
    backend.features.__init__(backend.features.max_bytes)
    backend.seconds = dict.fromkeys(backend.seconds, 0.0)
    if args.profile:
        profile_one_window(backend, options)
    torch.cuda.synchronize()
    started = time.perf_counter()
    summary = run(options, report=lambda _: None, backend=backend)
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    lines = [json.loads(x) for s in summary.ks for x in s.path.read_text().splitlines()]
    ok = [x for x in lines if x["status"] == "ok"]
    durations: dict[str, float] = {}
    audio = sum(clip_seconds(args.data, x["audio_paths"], durations) for x in ok)
    flops = 0.0
    for x in ok:
        usage = x["usage"]
        flops += 2 * counts["lm"] * (usage["input_tokens"] + usage["output_tokens"])
        flops += 2 * counts["audio"] * encoder_positions(family, usage["audio_tokens"], len(x["audio_paths"]))
    rate = len(ok) / wall
    extractions = backend.features.misses
    spent = dict(backend.seconds)
    backend.close()
    del model, backend
    torch.cuda.empty_cache()
    return {
        "prompts": len(lines),
        "errors": len(lines) - len(ok),
        "build_s": built,
        "wall_s": wall,
        "prompts_per_s": rate,
        "audio_s_per_s": audio / wall,
        "clips_per_prompt": sum(len(x["audio_paths"]) for x in ok) / max(len(ok), 1),
        "tflops": flops / wall / 1e12,
        "ceiling_fraction": flops / wall / 1e12 / ceiling,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
        "full_benchmark_min": FULL_BENCHMARK / rate / 60,
        "feature_extractions": extractions,
        "features_s": spent["features"],
        "generate_s": spent["generate"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark (audioicl build)")
    parser.add_argument("--families", default="qwen2-audio,qwen2.5-omni,qwen3-omni")
    parser.add_argument("--limit", type=int, default=None, help="episodes per task (default: all built)")
    parser.add_argument(
        "--omni-limit", type=int, default=None, help="episodes per task for the Omni families"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--batch-sizes", help="several runs of the first family, e.g. 16,32,64 (overrides --batch-size)"
    )
    parser.add_argument(
        "--window", type=int, default=None, help="prompts per backend call (default 4 batches)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument("--cache", default="dynamic", choices=("dynamic", "static"), help="KV cache")
    parser.add_argument("--profile", action="store_true", help="print the GPU operators of one window first")
    args = parser.parse_args()

    ceiling = matmul_ceiling()
    print(
        f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16 matmul ceiling {ceiling:.0f} TFLOP/s"
    )
    rows = {}
    runs = [(f, args.batch_size) for f in args.families.split(",")]
    if args.batch_sizes:
        first = runs[0][0]
        runs = [(first, int(b)) for b in args.batch_sizes.split(",")] + runs[1:]
    for family, batch in runs:
        limit = args.omni_limit if family != "qwen2-audio" and args.omni_limit else args.limit
        family_args = argparse.Namespace(**{**vars(args), "limit": limit, "batch_size": batch})
        label = f"{family} b{batch} {args.cache}"
        rows[label] = measure(family, family_args, ceiling)
        print(label, json.dumps({k: round(v, 3) for k, v in rows[label].items()}), flush=True)
    header = (
        "| family, batch | prompts | errors | clips/prompt | wall s | features s | generate s | prompts/s | "
        "audio s/s | TFLOP/s | of ceiling | peak GiB | full benchmark min |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for family, r in rows.items():
        print(
            f"| {family} | {r['prompts']} | {r['errors']} | {r['clips_per_prompt']:.1f} | {r['wall_s']:.1f} | "
            f"{r['features_s']:.1f} | {r['generate_s']:.1f} | "
            f"{r['prompts_per_s']:.2f} | {r['audio_s_per_s']:.0f} | {r['tflops']:.0f} | {r['ceiling_fraction']:.0%} | "
            f"{r['peak_gib']:.1f} | {r['full_benchmark_min']:.1f} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
