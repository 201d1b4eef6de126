"""Every model family at full size on one GPU: the real runner against plain transformers ``generate``.

For each family (``--families``, default every family with a full-size builder) it builds the real full-size
configuration with random weights directly on the GPU (``audioicl.testing.full_size_model``), runs the real
runner and ``hf`` backend over a built benchmark (``--limit`` episodes per task, every task and k the build has:
the benchmark's mix of prompts) at ``--batch-size``, then the model card's way on the first ``--plain`` of the
same prompts: the processor over one prompt, ``model.generate`` greedy, one prompt at a time. Printed per
family: prompts, error lines, wall seconds, prompts/s of both, their ratio, peak GPU memory, and the whole
benchmark (13,500 prompts) extrapolated from the runner's rate. The runner's figures are the median of
``--repeats`` timed runs (3; each run's wall seconds in ``wall_s_runs``).

    python benchmarks/gpu_families.py --data BUILD [--families gemma3n,phi4_multimodal] [--limit 2]
        [--batch-size 32] [--plain 9] [--json rows.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import tempfile
import time
import traceback
from pathlib import Path

import torch

from audioicl.backends.base import GenerationConfig, ModelSpec
from audioicl.backends.families import FAMILIES
from audioicl.backends.hf.backend import HFBackend
from audioicl.backends.hf.reuse.parts import PARTS
from audioicl.inference.options import RunOptions
from audioicl.inference.runner import run
from audioicl.testing import FAMILIES as QWEN_FAMILIES
from audioicl.testing import full_size_model
from audioicl.testing.families import TINY

FULL_BENCHMARK = 13_500  # 9 tasks x 300 episodes x k = 1..5


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(out.glob("*_results_k*.jsonl")) for line in path.open()]


def _plain_rate(backend: HFBackend, requests, max_new_tokens: int) -> float:
    """Prompts/s of the model card's loop: the processor and ``generate`` per prompt (batch 1)."""
    prepared, _ = backend.prepare(requests)
    config = GenerationConfig(max_new_tokens=max_new_tokens, batch_size=1)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for item in prepared:
        backend.scratch._generate_batch([item], config)
    torch.cuda.synchronize()
    return len(prepared) / (time.perf_counter() - started)


def _requests(options: RunOptions, backend: HFBackend, count: int):
    """The first ``count`` prompts of the run, as the runner makes them (k = 1 file, every task, the run's
    layout)."""
    from audioicl.backends.base import Request
    from audioicl.dataset.meta import read_meta
    from audioicl.prompts.build import build_prompt
    from audioicl.prompts.clips import ClipStore, load_morse_bank

    store = ClipStore(options.data)
    bank = load_morse_bank(options.data, "auto")
    episodes = read_meta(options.data / "meta" / "meta_k1.jsonl")
    by_task: dict[str, list] = {}
    for episode in episodes:
        by_task.setdefault(episode.task, []).append(episode)
    picked = [ep for task in by_task.values() for ep in task[:1]][:count]
    return [
        Request(
            f"{ep.id}@k1",
            ep.id,
            ep.task,
            1,
            build_prompt(ep, store, family=backend.family, bank=bank, layout=options.layout).chat,
        )
        for ep in picked
    ]


def measure(name: str, args: argparse.Namespace) -> dict:
    torch.cuda.reset_peak_memory_stats()
    built = time.perf_counter()
    model, processor = full_size_model(name, "cuda", torch.bfloat16)
    build_s = time.perf_counter() - built
    reuse = "prefix" if name in PARTS else "off"  # the fast path's default, else the processor path
    # A family that takes one clip per prompt is measured on the labelled single-clip layout (the only one it
    # can answer); the row says so.
    one_clip = name in FAMILIES and FAMILIES.get(name).max_clips == 1
    layout = "single-clip" if one_clip else "original"
    backend = HFBackend.around(f"hf:{name}-full-random", model, processor, reuse=reuse)
    out = Path(tempfile.mkdtemp(prefix=f"gpu-{name}-"))
    options = RunOptions(
        data=args.data,
        model=ModelSpec("hf", f"{name}-full-random"),
        out=out,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        limit=args.limit,
        layout=layout,
    )
    warm = RunOptions(**{**options.__dict__, "out": out / "warmup", "limit": 1, "shots": (1,)})
    run(warm, report=lambda _: None, backend=backend)
    walls = []  # --repeats timed runs, each into a folder of its own; the row is the median run's
    for attempt in range(args.repeats):
        backend.clear_caches()  # each run from empty caches, as a real run starts
        torch.cuda.synchronize()
        started = time.perf_counter()
        run(
            RunOptions(**{**options.__dict__, "out": out / f"run{attempt}"}),
            report=lambda _: None,
            backend=backend,
        )
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - started)
    wall, median = sorted((w, i) for i, w in enumerate(walls))[len(walls) // 2]
    lines = _lines(out / f"run{median}")
    errors = [line for line in lines if line.get("status") == "error"]
    rate = len(lines) / wall
    # the model card's loop on the processor path (a fast-path backend prepares its prompts otherwise)
    processor_path = HFBackend.around(f"hf:{name}-full-random", model, processor, reuse="off")
    plain = _plain_rate(processor_path, _requests(options, processor_path, args.plain), args.max_new_tokens)
    processor_path.close()
    if plain == 0:
        raise RuntimeError("the plain generate loop answered no prompt: compare nothing")
    row = {
        "family": name,
        "build_s": round(build_s, 1),
        "prompts": len(lines),
        "errors": len(errors),
        "first_error": errors[0]["error"] if errors else "",
        "wall_s": round(wall, 1),
        "wall_s_runs": [round(w, 1) for w in walls],
        "prompts_per_s": round(rate, 2),
        "plain_prompts_per_s": round(plain, 2),
        "ratio": round(rate / plain, 1),
        "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 1),
        "whole_benchmark_min": round(FULL_BENCHMARK / rate / 60, 1),
        "reuse": backend.reuse,
        "path": "processor" if backend.processed else "fast path",
        "layout": layout,
    }
    backend.close()
    del model, processor, backend
    gc.collect()
    torch.cuda.empty_cache()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a built benchmark (audioicl build)")
    parser.add_argument("--families", help="comma-separated (default: every family with a full-size builder)")
    parser.add_argument("--limit", type=int, default=2, help="episodes per task")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--plain", type=int, default=9, help="prompts of the plain generate loop")
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the rows here")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per family (the row is the median's)"
    )
    args = parser.parse_args()
    names = (
        args.families.split(",")
        if args.families
        else [*QWEN_FAMILIES, *(n for n, t in TINY.items() if t.full_size is not None)]
    )
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    import transformers

    print(f"transformers {transformers.__version__}")
    rows = []
    for name in names:
        try:
            rows.append(measure(name, args))
        except Exception as exc:  # one family's failure is a row of the table, not the end of the run
            traceback.print_exc()
            rows.append({"family": name, "failed": f"{type(exc).__name__}: {exc}"[:300]})
            gc.collect()
            torch.cuda.empty_cache()
        print(json.dumps(rows[-1]), flush=True)
    columns = (
        "family",
        "path",
        "layout",
        "prompts",
        "errors",
        "wall_s",
        "prompts_per_s",
        "plain_prompts_per_s",
        "ratio",
    )
    columns += ("peak_gib", "whole_benchmark_min", "build_s")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        if "failed" in row:
            print(f"| {row['family']} | failed: {row['failed']} |")
        else:
            print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
