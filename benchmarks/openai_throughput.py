"""Requests per second of the ``openai`` backend against the tests' local chat server (127.0.0.1) at several
concurrencies: real prompts of a small build (every task, k = 1..5, base64 WAV clips), the server answering
each after a fixed delay (a stand-in for the model's time), through the backend's ``generate`` as a run calls
it. Median of the runs.

    python benchmarks/openai_throughput.py [--requests 270] [--latency 0.05] [--concurrency 1,8,32] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chat_server import ChatServer  # noqa: E402

from audioicl.backends import ModelSpec, load_backend  # noqa: E402
from audioicl.backends.base import GenerationConfig, Request  # noqa: E402
from audioicl.dataset.meta import find_meta_files, read_meta  # noqa: E402
from audioicl.prompts.build import build_prompt  # noqa: E402
from audioicl.prompts.clips import ClipStore, load_morse_bank  # noqa: E402


def requests(root: Path, count: int) -> list[Request]:
    store, bank = ClipStore(root), load_morse_bank(root, "auto")
    made = [
        Request(f"{ep.id}@k{k}", ep.id, ep.task, k, build_prompt(ep, store, bank=bank).chat)
        for k, path in find_meta_files(root).items()
        for ep in read_meta(path)
    ]
    return [made[i % len(made)] for i in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=270)
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the server takes per answer")
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        subprocess.run(
            [sys.executable, "-m", "audioicl", "build", "--out", str(root), "--episodes", "6", "--quiet"],
            check=True,
        )
        work = requests(root, args.requests)
    megabytes = sum(p.wave.nbytes / 2 for r in work for p in r.chat.audio_parts()) / 2**20  # 16-bit samples
    server = ChatServer(latency=lambda digest: args.latency).start()
    print(
        f"{len(work)} requests ({megabytes:.0f} MB of 16-bit audio before base64), server delay {args.latency} s"
    )
    print("| concurrency | wall s | requests/s |\n|---|---|---|")
    try:
        for concurrency in map(int, args.concurrency.split(",")):
            times = []
            for _ in range(args.runs):
                backend = load_backend(
                    ModelSpec("openai", "bench"), base_url=server.url, concurrency=str(concurrency)
                )
                started = time.perf_counter()
                responses = backend.generate(work, GenerationConfig())
                times.append(time.perf_counter() - started)
                backend.close()
                assert all(r.error is None for r in responses)
            wall = statistics.median(times)
            print(f"| {concurrency} | {wall:.2f} | {len(work) / wall:.1f} |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
