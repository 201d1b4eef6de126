"""Throughput of the ``hf`` backend on a GPU: full-size models with random weights, the real runner.

For each family it builds the full-size configuration with random weights directly on the GPU
(``audioicl.testing.full_size_model``), wraps it in the ``hf`` backend once per reuse mode (``--reuse``: off =
transformers' ``generate`` on every prompt from scratch, audio = each clip encoded once, prefix = also each
episode's shared prompt prefix computed once) and runs ``inference.runner.run`` over a built benchmark (all nine tasks,
every k the build has, so the mix of prompts is the benchmark's), greedy with ``--max-new-tokens`` tokens.
Feature extraction is part of the time (the processor's own, per distinct clip).

Printed per family and mode: prompts, wall seconds and where they went, prompts/s, the work done in PFLOP
(counted from what the backend computed: 2 x language-model parameters x positions read or generated, active
parameters for MoE, plus 2 x encoder parameters x encoder positions per clip encoded; attention's quadratic
term left out, so an underestimate) and its share of the same prompts from scratch, TFLOP/s and its fraction
of the bf16 matmul ceiling measured in the same process, peak GPU memory, the memory still held after the run,
and the full benchmark (13,500 prompts) extrapolated. First, per family, the relative error of the first
generated position's logits of the reuse path against the model's own forward over each prompt alone.

Each prefix run is timed once per ``--speeds`` setting (off: eager kernels; graphs: the decode step as a CUDA
graph; fused: graphs and the norms and MLPs through the Triton kernels; all: graphs and the compiled norms and
MLPs, ``backends.graphs``), and the answers of every run are
compared with the ``reuse=off`` run's on the prompts both answered (share identical). ``--step-ms`` times one
decode step of the first batch eagerly and replayed, each with the reuse path's attention and with transformers'
sdpa, and counts the host syncs an eager step makes; ``--encode-ms N`` times the audio encoder over the distinct
clips of N episodes a task, the Omni encoders' windows batched and in transformers' loop. Every row is
the median of ``--repeats`` timed runs (3; each run's wall seconds in ``wall_s_runs``): the first timed run of a
process can be a quarter slower than the next.

    python benchmarks/gpu_throughput.py --data BUILD [--families qwen2-audio,qwen2.5-omni] [--limit N]
        [--reuse off,audio,prefix] [--off-limit N] [--batch-sizes 32,64] [--speeds off,graphs,fused,all]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import soundfile as sf
import torch

from audioicl.backends.base import ModelSpec
from audioicl.backends.families import FAMILIES
from audioicl.backends.hf.backend import HFBackend
from audioicl.backends.hf.fp8 import quantize_decoder
from audioicl.backends.hf.load import configure_allocator
from audioicl.backends.hf.reuse import decode as reuse_module
from audioicl.backends.hf.reuse import parts as parts_module
from audioicl.backends.hf.reuse import path as hf_module
from audioicl.backends.hf.reuse.decode import DecodeStep, prefill
from audioicl.backends.hf.reuse.graphs import FastPaths, replayed, uncompile_decoder
from audioicl.backends.hf.reuse.parts import PARTS
from audioicl.backends.hf.reuse.rows import batches
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import run
from audioicl.testing import full_size_model
from audioicl.testing.requests import episode_major_requests, packed_rows

FULL_BENCHMARK = 13_500  # 9 tasks x 300 episodes x k = 1..5
# (compile, cuda_graphs, fused)
SPEEDS = {
    "off": ("off", "off", "off"),
    "graphs": ("off", "on", "off"),
    "fused": ("off", "on", "on"),
    "all": ("on", "on", "off"),
}


def matmul_ceiling(n: int = 8192, repeats: int = 20) -> float:
    """Median bf16 dense matmul rate in TFLOP/s."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    return 2 * n**3 / (cuda_ms(lambda: a @ b, repeats) / 1e3) / 1e12


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


def encoder_positions(family: str, audio_tokens: int, clips: int, whole_window: bool = True) -> float:
    """Positions the audio encoder's transformer runs over for clips making ``audio_tokens``."""
    if family == "qwen2-audio":  # every clip padded to the 30 s window, or its valid frames (pooled by 2)
        return 1500.0 * clips if whole_window else 2.0 * audio_tokens
    if family == "qwen2.5-omni":
        return 2.0 * audio_tokens  # pooled by 2 after the encoder
    return float(audio_tokens)


def profile_stretch(backend: HFBackend, options: RunOptions, episodes: int) -> None:
    """The GPU kernels of a stretch of the run (``episodes`` per task at every k, as the run orders and
    batches them), by their own CUDA time."""
    from torch.profiler import ProfilerActivity, profile

    probe = RunOptions(**{**options.__dict__, "out": options.out / "profile", "limit": episodes})
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run(probe, report=lambda _: None, backend=backend)
    print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=25, max_name_column_width=70))
    print("| kernels | CUDA ms | share |\n|---|---|---|")
    by_kind = kernel_kinds(prof)
    for kind, ms in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"| {kind} | {ms:.0f} | {ms / sum(by_kind.values()):.1%} |")


KERNEL_KINDS = (  # (kind, what its kernels' names contain), first match wins
    ("matmuls", ("nvjet", "gemm", "cutlass", "xmma", "scaled_mm", "cublas")),
    ("attention", ("sdpa", "fmha", "flash", "attention", "cudnn")),
    ("fused norm", ("_rms_norm",)),
    ("fused silu x up", ("_silu_mul",)),
    ("fused rotary", ("_rotary",)),
    ("fp8 input quantization", ("_rowwise_e4m3",)),
    ("concatenations", ("CatArray",)),
    ("index copies (the static cache's writes)", ("index_elementwise", "index_copy", "indexing")),
    ("copies", ("direct_copy", "copy_kernel", "Memcpy", "memcpy")),
    ("fills", ("fill", "Memset", "memset")),
    ("reductions", ("reduce_kernel", "Reduce")),
    ("other elementwise", ("elementwise",)),
)


def kernel_kinds(prof) -> dict[str, float]:
    """A profile's GPU kernels' own milliseconds by ``KERNEL_KINDS`` (the rest: ``other``)."""
    made: dict[str, float] = {}
    for event in prof.key_averages():
        if event.key.startswith(("aten::", "cuda", "Activity")) or not event.self_device_time_total:
            continue
        kind = next((k for k, parts in KERNEL_KINDS if any(p in event.key for p in parts)), "other")
        made[kind] = made.get(kind, 0.0) + event.self_device_time_total / 1e3
    return made


def clip_seconds(data: Path, paths: list[str], cache: dict[str, float]) -> float:
    total = 0.0
    for path in paths:
        if path not in cache:
            cache[path] = sf.info(str(data / path)).duration
        total += cache[path]
    return total


def measure(
    model,
    processor,
    family: str,
    reuse: str,
    args: argparse.Namespace,
    ceiling: float,
    speed: str = "off",
    decode_batches: str = "auto",
    encode_ahead: str = "auto",
) -> tuple[dict, dict[str, str | None]]:
    """One timed run of the real runner over the build with ``reuse``, the fast paths of ``speed``,
    ``-o decode_batches`` and ``-o encode_ahead``, after a one-prompt warm-up; its row, and its answers by
    request key."""
    uncompile_decoder(PARTS[family](model).decoder)  # what an earlier run compiled in place
    compile, cuda_graphs, fused = SPEEDS[speed]
    backend = HFBackend.around(
        f"hf:{family}-full-random",
        model,
        processor,
        reuse=reuse,
        cache=args.cache if reuse == "off" else "dynamic",
        compile=compile,
        cuda_graphs=cuda_graphs,
        fused=fused,
        pack="on" if args.pack and reuse != "off" else "off",
        decode_batches=decode_batches,
        encode_ahead=encode_ahead,
    )
    counts = parameter_counts(model)
    out = Path(tempfile.mkdtemp(prefix=f"gpu-{family}-{reuse}-"))
    options = RunOptions(
        data=args.data,
        model=ModelSpec("hf", f"{family}-full-random"),
        out=out,
        batch_size=args.batch_size,
        window=args.window,
        max_new_tokens=args.max_new_tokens,
        limit=args.limit,
    )
    warm = RunOptions(**{**options.__dict__, "out": out / "warmup", "limit": 1, "shots": (1,)})
    run(warm, report=lambda _: None, backend=backend)  # kernels compiled, allocator warm
    if args.profile:
        profile_stretch(backend, options, args.profile)
    # ``--repeats`` timed runs, each into a folder of its own; the row is the run of median wall time (the first
    # timed model of a process can run a quarter slower: docs/measurements.md), with every run's wall time
    timed = [
        timed_run(backend, RunOptions(**{**options.__dict__, "out": out / f"run{i}"}))
        for i in range(args.repeats)
    ]
    walls = [made.wall for made in timed]  # in the order they ran
    median = sorted(timed, key=lambda made: made.wall)[len(timed) // 2]
    summary, wall, before, after, peak = median.summary, median.wall, median.before, median.after, median.peak
    backend.seconds.update(median.seconds)
    backend.work.update(median.work)
    lines = [json.loads(x) for s in summary.ks for x in s.path.read_text().splitlines()]
    ok = [x for x in lines if x["status"] == "ok"]
    durations: dict[str, float] = {}
    audio = sum(clip_seconds(args.data, x["audio_paths"], durations) for x in ok)
    work = backend.work
    flops = 2 * counts["lm"] * work["lm_tokens"]
    whole_window = reuse == "off" or backend.settings.encoder == "window"
    encoded = encoder_positions(family, work["encoded_audio_tokens"], work["encoded_clips"], whole_window)
    flops += 2 * counts["audio"] * encoded
    scratch = 0.0  # what every prompt from scratch would have cost
    for x in ok:
        usage = x["usage"]
        scratch += 2 * counts["lm"] * (usage["input_tokens"] + usage["output_tokens"])
        scratch += (
            2 * counts["audio"] * encoder_positions(family, usage["audio_tokens"], len(x["audio_paths"]))
        )
    rate = len(ok) / wall
    spent = dict(backend.seconds)
    on_gpu = spent["encode"] + spent["prefill"] + spent["decode"]
    answers = {
        f"{x['id']}@k{s.k}": x.get("response")
        for s in summary.ks
        for x in map(json.loads, s.path.read_text().splitlines())
    }
    if backend.path is not None:  # reuse=off has no reuse path
        backend.path.embeddings.clear()
    return {
        "prompts": len(lines),
        "errors": len(lines) - len(ok),
        "wall_s": wall,
        "prompts_per_s": rate,
        "audio_s_per_s": audio / wall,
        "clips_per_prompt": sum(len(x["audio_paths"]) for x in ok) / max(len(ok), 1),
        "pflop": flops / 1e15,
        "work_of_scratch": flops / scratch if scratch else 0.0,
        "tflops": flops / wall / 1e12,
        "ceiling_fraction": flops / wall / 1e12 / ceiling,
        "peak_gib": peak / 2**30,
        "held_after_gib": (after - before) / 2**30,
        "full_benchmark_min": FULL_BENCHMARK / rate / 60,
        "encoded_clips": work["encoded_clips"],
        "prefill_padding": work["lm_padding"] / max(work["lm_tokens"], 1),
        "features_s": spent["features"],
        "encode_s": spent["encode"],
        "encode_ahead_s": spent["encode_ahead"],  # in the preparing thread, beside the model's calls
        "generate_s": spent["generate"],
        "prefill_s": spent["prefill"],
        "decode_s": spent["decode"],
        "idle_s": wall - on_gpu,  # neither encoding nor prefill nor decode (features overlap the GPU)
        # idle, split: the runner waiting for a window's preparation, the runner's own work (prompts,
        # results), the backend's outside the GPU phases (packing, answers), attempts out of memory
        "waited_s": summary.waited_s,
        "runner_s": wall - summary.waited_s - spent["in_generate"],
        "backend_host_s": spent["in_generate"] - on_gpu - spent["lost"],
        "out_of_memory": work["out_of_memory"],
        "encode_ahead_stopped": work["encode_ahead_stopped"],  # windows the preparing thread left to generate
        "lost_s": spent["lost"],
        "paths": {
            k: v
            for k, v in backend.info.items()
            if k in ("compile", "fused", "cuda_graphs", "experts", "decode_batches", "encode_ahead")
        },
        "wall_s_runs": walls,
    }, answers


@dataclass
class Timed:
    """One timed run: its summary, wall seconds, where the backend's time went and its work counters, and the
    GPU memory allocated before and after it and at its peak."""

    summary: Any
    wall: float
    seconds: dict[str, float]
    work: dict[str, int]
    before: int
    after: int
    peak: int


def timed_run(backend: HFBackend, options: RunOptions) -> Timed:
    """The runner over ``options`` on ``backend``, from empty caches and counters whatever ran before (and with
    no batch size remembered as too large: each timed run learns it as a run of its own process would)."""
    backend.clear_caches()
    backend.halving._failed_footprints.clear()
    backend.reset_counters()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    calls: list[float] = []  # each ``generate`` call's seconds: the rest of the wall is the runner's
    answer = backend.generate

    def generate(requests, config):
        began = time.perf_counter()
        try:
            return answer(requests, config)
        finally:
            calls.append(time.perf_counter() - began)

    started = time.perf_counter()
    with patch.object(backend, "generate", generate):
        summary = run(options, report=lambda _: None, backend=backend)
    torch.cuda.synchronize()
    wall = time.perf_counter() - started
    after = torch.cuda.memory_allocated()
    peak = torch.cuda.max_memory_allocated()
    seconds = {**backend.seconds, "in_generate": sum(calls)}
    return Timed(summary, wall, seconds, dict(backend.work), before, after, peak)


def run_speeds(reuse: str, speeds: str) -> list[str]:
    """The ``--speeds`` a run of ``reuse`` is timed with: reuse=off (transformers' generate) has none."""
    return ["off"] if reuse == "off" else speeds.split(",")


def same_answers(answers: dict[str, str | None], reference: dict[str, str | None]) -> dict[str, float]:
    """The share of the prompts both runs answered whose answers are identical."""
    both = [key for key in answers if key in reference]
    same = sum(answers[key] == reference[key] for key in both)
    return {"prompts": len(both), "identical": same / len(both) if both else 0.0}


def rounded(row: dict) -> dict:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}


def without(name: str):
    """The reuse path's attention swap ``name`` (``batched_windows`` or ``reuse_attention_in``) made a no-op
    inside the block: transformers' own implementation runs, the baseline of the same process."""
    module = parts_module if name == "batched_windows" else reuse_module  # where each is called
    return patch.object(module, name, lambda *_: nullcontext())


def cuda_ms(step, repeats: int) -> float:
    """Median milliseconds of ``step()`` on the GPU."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def top_kernels(prof, count: int = 10) -> dict[str, float]:
    """The ``count`` GPU kernels of a profile with the most CUDA time, in milliseconds."""
    kernels = sorted(
        (e for e in prof.key_averages() if not e.key.startswith(("aten::", "cuda", "Activity"))),
        key=lambda e: e.self_device_time_total,
        reverse=True,
    )
    return {e.key[:70]: round(e.self_device_time_total / 1e3, 2) for e in kernels[:count]}


def decode_step_ms(model, processor, family: str, args: argparse.Namespace, repeats: int = 10) -> dict:
    """One decode step of the first batch of the run's prompts (``--batch-size``): milliseconds eagerly and
    replayed as a CUDA graph (median of ``repeats``, the same inputs each time: the cache is only
    overwritten at the same slots), each with the reuse path's attention (``attention.reuse_attention``)
    and with transformers' sdpa (``*_sdpa_ms``, the baseline); the host syncs, device-to-host copies and
    the top kernels of one eager step of each."""
    from torch.profiler import ProfilerActivity, profile

    uncompile_decoder(PARTS[family](model).decoder)
    backend = HFBackend.around(f"hf:{family}-full-random", model, processor, reuse="prefix", compile="off")
    requests = episode_major_requests(args.data, backend.family, max(1, args.batch_size // 45 + 1))
    rows, clips = packed_rows(backend, requests)
    batch = batches(rows, args.batch_size)[0]
    paths = FastPaths.resolve("off", "on", backend.device)
    out = {"prompts": sum(len(r.members) for r in batch), "rows": len(batch)}
    with torch.inference_mode():
        audio = backend.path._embeddings(backend.path._clips_of(batch, clips))
        # room for every step below: transformers' static cache writes each at its own running count
        room = 4 * repeats + 8
        done = prefill(
            backend.path.parts, [batch], audio, room, backend.pad_token_id, model.dtype, backend.device
        )
        out["keys"] = done.plan.total
        step = DecodeStep(backend.path.parts, done.plan, done.cache, room, model.dtype)
        step.load(done.logits.argmax(-1), 0)
        for label, swap in (("", nullcontext()), ("_sdpa", without("reuse_attention_in"))):
            with swap:
                step.run()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    step.run()
                names = [event.name for event in prof.events()]
                out[f"eager{label}_ms"] = cuda_ms(step.run, repeats)
                out[f"graph{label}_ms"] = cuda_ms(replayed(step.run, paths), repeats)
            out[f"top_kernels{label}_ms"] = top_kernels(prof)
            out[f"syncs{label}"] = sum(n in ("cudaStreamSynchronize", "cudaDeviceSynchronize") for n in names)
            out[f"launches{label}"] = sum(
                n in ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC") for n in names
            )
            out[f"device_to_host{label}"] = sum(
                n in ("aten::_local_scalar_dense", "aten::item") for n in names
            )
    out["experts"] = backend.info.get("experts")
    out["graph_fallback"] = paths.why_not.get("cuda_graphs")
    backend.path.embeddings.clear()
    return out


def encode_ms(model, processor, family: str, args: argparse.Namespace, repeats: int = 5) -> dict:
    """Every distinct clip of the first ``--encode-ms`` episodes per task through the reuse path's encoder
    (``backend._embeddings``: longest first, in chunks), from an empty cache: milliseconds (median of
    ``repeats``) with the Omni encoders' windows batched (``attention.batched_windows``) and with
    transformers' per-window loop (``loop_ms``, the baseline), the largest relative difference of the
    embeddings, and the top kernels of one pass of each."""
    from torch.profiler import ProfilerActivity, profile

    backend = HFBackend.around(f"hf:{family}-full-random", model, processor, reuse="prefix", compile="off")
    requests = episode_major_requests(args.data, backend.family, args.encode_ms)
    _, clips = packed_rows(backend, requests)
    out: dict[str, Any] = {"clips": len(clips), "audio_tokens": sum(c.tokens for c in clips.values())}
    made = {}
    chunks = [int(c) for c in args.encode_chunks.split(",") if int(c) != hf_module.ENCODE_CLIPS]
    variants = [("", nullcontext()), ("loop_", without("batched_windows"))]
    variants += [(f"chunk{c}_", patch.object(hf_module, "ENCODE_CLIPS", c)) for c in chunks]
    with torch.inference_mode():
        for label, swap in variants:
            with swap:

                def encode_all():
                    backend.path.embeddings.clear()
                    return backend.path._embeddings(clips)

                made[label] = encode_all()
                out[f"{label}ms"] = cuda_ms(encode_all, repeats)
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    encode_all()
                out[f"{label}top_kernels_ms"] = top_kernels(prof, 6)
    out["max_rel_diff"] = max(
        relative_error(made[""][d].float(), made[label][d].float()) for label in made for d in clips
    )
    backend.path.embeddings.clear()
    return out


def relative_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    return float((value - reference).norm() / reference.norm())


def first_logit_errors(model, processor, family: str, per_task: int, data: Path) -> dict[str, list[float]]:
    """Relative error ||delta|| / ||ref|| of the first generated position's logits (float32 from bf16),
    against the model's own forward over each prompt alone: the reuse path (prefix rows, batches of 8
    prompts) and, for scale, the same forward batched 8 at a time with left padding."""
    uncompile_decoder(PARTS[family](model).decoder)
    backend = HFBackend.around(
        f"hf:{family}-full-random",
        model,
        processor,
        reuse="prefix",
        compile="off",
        cuda_graphs="off",
        fused="off",
    )
    # reuse=off: the processor's features over the whole window, as transformers' own path reads them
    scratch = HFBackend.around(f"hf:{family}-full-random", model, processor, reuse="off")
    requests = episode_major_requests(data, backend.family, per_task)
    rows, clips = packed_rows(backend, requests)
    whole, failed = scratch.prepare(requests)
    assert not failed, failed
    errors: dict[str, list[float]] = {"reuse": [], "batched": []}
    with torch.inference_mode():
        alone = {item.index: model(**scratch.scratch._inputs([item])).logits[0, -1].float() for item in whole}
        for start in range(0, len(whole), 8):
            chunk = whole[start : start + 8]
            logits = model(**scratch.scratch._inputs(chunk)).logits[:, -1].float()
            errors["batched"] += [
                relative_error(logits[i], alone[item.index]) for i, item in enumerate(chunk)
            ]
        for batch in batches(rows, 8):
            audio = backend.path._embeddings(backend.path._clips_of(batch, clips))
            done = prefill(
                backend.path.parts, [batch], audio, 0, backend.pad_token_id, model.dtype, backend.device
            )
            for r, row in enumerate(batch):
                for m, member in enumerate(row.members):
                    errors["reuse"].append(
                        relative_error(done.logits[r, m].float(), alone[member.sequence.index])
                    )
    backend.path.embeddings.clear()
    return errors


def summarize(errors: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per path, the prompts compared and the median and largest relative error."""
    return {
        kind: {"prompts": len(v), "median": statistics.median(v), "max": max(v)} for kind, v in errors.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark (audioicl build)")
    parser.add_argument("--families", default="qwen2-audio,qwen2.5-omni")
    parser.add_argument("--reuse", default="off,audio,prefix", help="the hf backend's reuse modes to time")
    parser.add_argument("--limit", type=int, default=None, help="episodes per task (default: all built)")
    parser.add_argument("--audio-limit", type=int, default=None, help="episodes per task for reuse=audio")
    parser.add_argument("--off-limit", type=int, default=None, help="episodes per task for reuse=off")
    parser.add_argument("--off-batch-size", type=int, default=None, help="batch size of reuse=off")
    parser.add_argument(
        "--omni-limit", type=int, default=None, help="episodes per task for the Omni families"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--batch-sizes", help="several prefix runs of the first family, e.g. 32,64 (besides --batch-size)"
    )
    parser.add_argument(
        "--window", type=int, default=None, help="prompts per backend call (default 4 batches)"
    )
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument(
        "--logit-episodes", type=int, default=1, help="episodes per task for the logits check"
    )
    parser.add_argument(
        "--logits-fp32", action="store_true", help="after the runs, the logits check again in float32"
    )
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--speeds", default="off,all", help="fast paths of each audio/prefix run: off, graphs, fused, all"
    )
    parser.add_argument("--step-ms", action="store_true", help="time one decode step, eager and replayed")
    parser.add_argument(
        "--encode-ms",
        type=int,
        metavar="EPISODES",
        help="time the encoder over the distinct clips of EPISODES per task, windows batched and looped",
    )
    parser.add_argument(
        "--encode-chunks",
        default="32",
        help="with --encode-ms, also time the encoder at these clips per call (hf.reuse.path.ENCODE_CLIPS is one)",
    )
    parser.add_argument("--pack", action="store_true", help="audio/prefix runs with -o pack=on (row packing)")
    parser.add_argument(
        "--decode-batches",
        default="auto",
        help="audio/prefix runs at each of these -o decode_batches, e.g. 1,2,4 (batches decoded together)",
    )
    parser.add_argument(
        "--encode-ahead",
        default="auto",
        help="audio/prefix runs at each of these -o encode_ahead, e.g. off,on (clips encoded ahead)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per row (the row is the median's)")
    parser.add_argument(
        "--cache", default="dynamic", choices=("dynamic", "static"), help="KV cache of reuse=off"
    )
    parser.add_argument(
        "--precision",
        choices=("native", "fp8"),
        default="native",
        help="fp8: the decoder's linears as -o precision=fp8 makes them (rowwise e4m3), for its profile",
    )
    parser.add_argument(
        "--profile",
        type=int,
        metavar="EPISODES",
        help="first print the GPU kernels of a stretch of the run: EPISODES per task at every k",
    )
    args = parser.parse_args()

    allocator = configure_allocator(
        "auto", torch.device("cuda")
    )  # as the hf backend sets it: before the weights
    ceiling = matmul_ceiling()
    print(
        f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, bf16 matmul ceiling {ceiling:.0f} TFLOP/s"
        f", allocator {allocator['used']}"
    )
    rows: dict[str, dict] = {}
    logits: dict[str, dict] = {}
    steps: dict[str, dict] = {}
    encodes: dict[str, dict] = {}
    for index, family in enumerate(args.families.split(",")):
        model, processor = full_size_model(family, "cuda", torch.bfloat16)
        if args.precision == "fp8":  # as -o precision=fp8 loads it: before the fast path's fusions
            quantized = quantize_decoder(model, FAMILIES.get(family), "valid", torch.device("cuda"))
            print(family, "fp8", json.dumps(quantized.info()), flush=True)
        if args.logit_episodes:
            logits[family] = summarize(
                first_logit_errors(model, processor, family, args.logit_episodes, args.data)
            )
            print(family, "first-position logits", json.dumps(logits[family]), flush=True)
        runs = [
            (mode, args.off_batch_size if mode == "off" and args.off_batch_size else args.batch_size)
            for mode in args.reuse.split(",")
        ]
        if index == 0 and args.batch_sizes:
            runs += [("prefix", int(b)) for b in args.batch_sizes.split(",") if int(b) != args.batch_size]
        runs = [
            (reuse, batch, speed, together, ahead)
            for reuse, batch in runs
            for speed in run_speeds(reuse, args.speeds)
            for together in (["auto"] if reuse == "off" else args.decode_batches.split(","))
            for ahead in (["auto"] if reuse == "off" else args.encode_ahead.split(","))
        ]
        answers: dict[str, dict[str, str | None]] = {}
        for reuse, batch, speed, together, ahead in runs:
            limit = args.omni_limit if family != "qwen2-audio" and args.omni_limit else args.limit
            if reuse == "off" and args.off_limit:
                limit = min(limit or args.off_limit, args.off_limit)
            if reuse == "audio" and args.audio_limit:
                limit = min(limit or args.audio_limit, args.audio_limit)
            run_args = argparse.Namespace(**{**vars(args), "limit": limit, "batch_size": batch})
            label = f"{family}, reuse={reuse}, b{batch}" + (f", {speed}" if reuse != "off" else "")
            label += f", d{together}" if together != "auto" else ""
            label += f", ahead {ahead}" if ahead != "auto" else ""
            repeated = sum(name.split(" (again")[0] == label for name in rows)  # a setting listed twice
            label += f" (again {repeated})" if repeated else ""
            rows[label], answers[label] = measure(
                model, processor, family, reuse, run_args, ceiling, speed, together, ahead
            )
            reference = next((a for name, a in answers.items() if "reuse=off" in name), None)
            eager = next((a for name, a in answers.items() if f"b{batch}, off" in name), None)
            first = next((a for name, a in answers.items() if "reuse=off" not in name), None)
            if reference is not None and reuse != "off":
                rows[label]["same_as_off"] = same_answers(answers[label], reference)
            if eager is not None and speed != "off":
                rows[label]["same_as_eager"] = same_answers(answers[label], eager)
            if first is not None and first is not answers[label]:  # --decode-batches, --batch-sizes
                rows[label]["same_as_first_reuse_run"] = same_answers(answers[label], first)
            print(label, json.dumps(rounded(rows[label])), flush=True)
        if args.step_ms:
            steps[family] = decode_step_ms(model, processor, family, args)
            print(family, "decode step", json.dumps(steps[family]), flush=True)
        if args.encode_ms:
            encodes[family] = encode_ms(model, processor, family, args)
            print(family, "encode", json.dumps(encodes[family]), flush=True)
        if args.logits_fp32 and args.logit_episodes:
            model.float()
            logits[f"{family} fp32"] = summarize(
                first_logit_errors(model, processor, family, args.logit_episodes, args.data)
            )
            print(family, "fp32 first-position logits", json.dumps(logits[f"{family} fp32"]), flush=True)
        del model, processor
        torch.cuda.empty_cache()
    header = (
        "| family, reuse, batch | prompts | errors | wall s | features s | encode s | generate s "
        "(prefill + decode) | prompts/s | "
        "PFLOP done | of scratch | TFLOP/s | of ceiling | peak GiB | held after GiB | full benchmark min |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for label, r in rows.items():
        print(
            f"| {label} | {r['prompts']} | {r['errors']} | {r['wall_s']:.1f} | {r['features_s']:.1f} | "
            f"{r['encode_s']:.1f} | {r['generate_s']:.1f} ({r['prefill_s']:.1f} + {r['decode_s']:.1f}) | "
            f"{r['prompts_per_s']:.2f} | {r['pflop']:.1f} | "
            f"{r['work_of_scratch']:.0%} | {r['tflops']:.0f} | {r['ceiling_fraction']:.0%} | "
            f"{r['peak_gib']:.1f} | {r['held_after_gib']:.2f} | {r['full_benchmark_min']:.1f} |"
        )
    if logits:
        print()
        print("| family | path | prompts | median rel. error | max rel. error |")
        print("|---|---|---|---|---|")
    for family, kinds in logits.items():
        for kind, v in kinds.items():
            print(f"| {family} | {kind} | {v['prompts']} | {v['median']:.2e} | {v['max']:.2e} |")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"throughput": rows, "first_logits": logits, "decode_step": steps, "encode": encodes},
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
