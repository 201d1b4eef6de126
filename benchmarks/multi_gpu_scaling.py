"""Data-parallel scaling of the ``hf`` backend: one shard per GPU, each shard its own process.

For each GPU count n in ``--gpus`` (default 1,2) it starts n processes at once, process i pinned to GPU i - 1
by ``CUDA_VISIBLE_DEVICES``. Each builds its model (the full-size configuration with random weights on its
GPU, ``--family``, or a checkpoint folder, ``--model hf:DIR``), warms it up on the first episode of each
task, waits until all n are ready (a file barrier, so model building and warm-up are not timed), then runs
the real runner over its shard (``--shard i/n``, the episodes whose id hashes to it, every k) into
``OUT/n<n>/shard-i-of-n``. The shards are then joined with
``audioicl merge`` (``inference.results.merge_shards``, which refuses a missing or doubled episode) and compared with
the one-process run line by line (every field but the timing).

Printed: per GPU count the prompts, the wall time from the first shard's start to the last shard's end, the
slowest and fastest shard, prompts/s overall and per GPU, the scaling efficiency (prompts/s over n times
the one-GPU rate), the full benchmark (13,500 prompts) extrapolated, and how many merged lines equal the
one-GPU run's. In fp32 the answers do not depend on which prompts share a batch, so all lines must be equal;
in bf16 on a GPU a few greedy answers may flip with the batch's composition (``gpu_throughput.py`` measures
that noise on the first-position logits).

    python benchmarks/multi_gpu_scaling.py --data BUILD --family qwen2-audio [--gpus 1,2] [--limit N]
    python benchmarks/multi_gpu_scaling.py --data BUILD --model hf:DIR --device cpu --gpus 1,2   # CPU check
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from audioicl.backends import ModelSpec, load_backend
from audioicl.inference.options import RunOptions, Shard
from audioicl.inference.results import iter_results, merge_shards
from audioicl.inference.runner import run

FULL_BENCHMARK = 13_500  # 9 tasks x 300 episodes x k = 1..5
TIMING_FIELDS = ("seconds",)  # fields of a results line that may differ between two runs of one prompt


def parse_ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--family", help="full-size model with random weights (audioicl.testing.full_size_model)"
    )
    source.add_argument(
        "--model", type=ModelSpec.parse, help="a model spec the runner loads itself, e.g. hf:DIR"
    )
    parser.add_argument("--out", type=Path, default=Path("multi-gpu-scaling"), help="results folder (new)")
    parser.add_argument("--gpus", type=parse_ints, default=(1, 2), help="GPU counts to run, e.g. 1,2,4")
    parser.add_argument("--device", default="cuda", help="cuda (one GPU per process) or cpu")
    parser.add_argument("--dtype", default="bf16", help="bf16|fp16|fp32")
    parser.add_argument("--num-layers", type=int, help="--family only: fewer layers (for a quick check)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--limit", type=int, help="the first N episodes of each task")
    parser.add_argument("--k", type=parse_ints, help="shots to run (default: every k of the build)")
    parser.add_argument("--reuse", default="prefix", help="hf backend option reuse: off|audio|prefix")
    parser.add_argument("--json", type=Path, help="also write the table's rows as JSON here")
    # one shard's process (started by the parent)
    parser.add_argument("--worker", type=Shard.parse, help=argparse.SUPPRESS)
    parser.add_argument("--barrier", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def run_options(args: argparse.Namespace, folder: Path, shard: Shard | None) -> RunOptions:
    backend_options = {"reuse": args.reuse}
    if args.model:
        backend_options |= {"device": args.device, "dtype": args.dtype}
    return RunOptions(
        data=args.data,
        model=args.model or ModelSpec("hf", f"{args.family}-full-random"),
        out=folder,
        shots=args.k,
        batch_size=args.batch_size,
        limit=args.limit,
        shard=shard,
        backend_options=backend_options,
    )


def full_size_backend(args: argparse.Namespace):
    """The ``hf`` backend around the full-size random-weight model, built on this process's device."""
    from audioicl.backends.hf.backend import HFBackend
    from audioicl.backends.hf.load import DTYPES
    from audioicl.testing import full_size_model

    model, processor = full_size_model(
        args.family, device=args.device, dtype=DTYPES[args.dtype], num_layers=args.num_layers
    )
    return HFBackend.around(f"hf:{args.family}-full-random", model, processor, reuse=args.reuse)


def wait_for_all(barrier: Path, shard: Shard, poll: float = 0.05) -> None:
    """Mark this shard ready and wait until every shard of the count is."""
    (barrier / f"ready-{shard.index}").touch()
    while len(list(barrier.glob("ready-*"))) < shard.count:
        time.sleep(poll)


def worker(args: argparse.Namespace) -> None:
    """One shard: build the model, warm it up, wait for the others, run, print one JSON line of timing."""
    shard = args.worker
    if args.device == "cpu":
        import torch

        torch.set_num_threads(1)  # the shards share the machine's cores
    options = run_options(args, args.out, shard)
    if args.family:
        backend = full_size_backend(args)
    else:
        backend = load_backend(options.model, seed=options.seed, **options.backend_options)
    # each task's first episode first, into a scratch folder: start-up costs (kernels, allocator) are not timed
    warm_up = replace(options, out=args.barrier / f"warm-up-{shard.index}", shard=None, limit=1)
    run(warm_up, report=lambda message: None, backend=backend)
    wait_for_all(args.barrier, shard)
    start = time.time()
    summary = run(options, report=lambda message: None, backend=backend)
    end = time.time()
    if summary.errors:
        raise SystemExit(f"shard {shard}: {summary.errors} prompts got error lines")
    prompts = sum(k.written for k in summary.ks)
    print(json.dumps({"shard": str(shard), "start": start, "end": end, "prompts": prompts}), flush=True)


def launch(args: argparse.Namespace, count: int, folder: Path) -> list[dict]:
    """Run ``count`` shard processes at once; their timing lines."""
    barrier = folder / ".barrier"
    barrier.mkdir(parents=True)
    processes = []
    for index in range(1, count + 1):
        env = dict(os.environ)
        if args.device == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = str(index - 1)
        command = [sys.executable, __file__, *strip_parent_only(sys.argv[1:])]
        command += ["--out", str(folder), "--worker", f"{index}/{count}", "--barrier", str(barrier)]
        processes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
    timings = []
    for process in processes:
        stdout, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a shard process failed (exit {process.returncode})")
        timings.append(json.loads(stdout.strip().splitlines()[-1]))
    return timings


def strip_parent_only(argv: list[str]) -> list[str]:
    """The parent's arguments without those only the parent reads (``--out``, ``--gpus``, ``--json``)."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("--out", "--gpus", "--json"):
            skip = "=" not in arg
            continue
        kept.append(arg)
    return kept


def results_lines(folder: Path) -> dict[tuple[str, str], dict]:
    """(file name, id) → the line without its timing fields, for every results file in ``folder``."""
    lines = {}
    for path in sorted(folder.glob("*_results_k*.jsonl")):
        for line in iter_results(path):
            lines[(path.name, line.id)] = {k: v for k, v in line.data.items() if k not in TIMING_FIELDS}
    return lines


def measure(args: argparse.Namespace) -> list[dict]:
    """Every GPU count's run, merged; one row per count."""
    args.out.mkdir(parents=True, exist_ok=False)
    rows, single = [], None
    for count in args.gpus:
        folder = args.out / f"n{count}"
        timings = launch(args, count, folder)
        shards = [folder / Shard(i, count).folder for i in range(1, count + 1)]
        # with --limit the build holds episodes no shard ran: merge without the coverage check then
        merge_shards(shards, folder / "merged", data=None if args.limit else args.data)
        lines = results_lines(folder / "merged")
        compared = single is not None  # the one-GPU run itself has nothing to be compared with
        single = lines if count == 1 else single
        durations = [t["end"] - t["start"] for t in timings]
        wall = max(t["end"] for t in timings) - min(t["start"] for t in timings)
        prompts = len(lines)
        rows.append(
            {
                "gpus": count,
                "prompts": prompts,
                "wall_s": wall,
                "slowest_s": max(durations),
                "fastest_s": min(durations),
                "prompts_per_s": prompts / wall,
                "equal_to_one_gpu": sum(1 for key, line in lines.items() if single.get(key) == line)
                if compared
                else None,
                "lines_of_one_gpu": len(single) if compared else None,
            }
        )
    base = next((row["prompts_per_s"] for row in rows if row["gpus"] == 1), None)
    for row in rows:
        row["efficiency"] = row["prompts_per_s"] / (row["gpus"] * base) if base else None
        row["full_benchmark_min"] = FULL_BENCHMARK / row["prompts_per_s"] / 60
    return rows


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    source = args.family or args.model
    print(f"\n{source}, {args.device}, {args.dtype}, batch {args.batch_size}, reuse {args.reuse}")
    print("| GPUs | prompts | wall s | slowest / fastest shard s | prompts/s | per GPU | efficiency "
          "| full benchmark min | merged = 1 GPU |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        equal = (
            "—"
            if row["equal_to_one_gpu"] is None
            else f"{row['equal_to_one_gpu']} of {row['lines_of_one_gpu']}"
        )
        efficiency = "—" if row["efficiency"] is None else f"{row['efficiency']:.2f}"
        print(
            f"| {row['gpus']} | {row['prompts']} | {row['wall_s']:.1f} | {row['slowest_s']:.1f} / "
            f"{row['fastest_s']:.1f} | {row['prompts_per_s']:.2f} | {row['prompts_per_s'] / row['gpus']:.2f} | "
            f"{efficiency} | {row['full_benchmark_min']:.1f} | {equal} |"
        )


def main() -> None:
    args = arguments()
    if args.worker:
        worker(args)
        return
    rows = measure(args)
    print_table(rows, args)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
