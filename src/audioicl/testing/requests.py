"""The requests a run sends a backend for a whole build, for tests and benchmarks that call a backend directly;
the build itself and a tiny backend to send them to (CPU benchmarks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from audioicl.backends.base import Request
from audioicl.dataset.meta import read_meta
from audioicl.prompts.build import build_prompt
from audioicl.prompts.clips import ClipStore, load_morse_bank


def episode_major_requests(root: Path, family: str, per_task: int | None = None) -> list[Request]:
    """Every episode's prompts for every k of the build at ``root`` (the Morse bank as the build has it), an
    episode's together: the runner's default order, the one the reuse path shares prefixes in. ``per_task``:
    only the first episodes of every task."""
    store, bank = ClipStore(root), load_morse_bank(root, "auto")
    work = []
    for meta in sorted((root / "meta").glob("meta_k*.jsonl")):
        k = int(meta.stem.removeprefix("meta_k"))
        seen: dict[str, int] = {}
        for ep in read_meta(meta):
            seen[ep.task] = seen.get(ep.task, 0) + 1
            if per_task is None or seen[ep.task] <= per_task:
                work.append((ep.id, k, ep))
    return [
        Request(f"{eid}@k{k}", eid, ep.task, k, build_prompt(ep, store, family=family, bank=bank).chat)
        for eid, k, ep in sorted(work, key=lambda item: (item[0], item[1]))
    ]


def packed_rows(backend: Any, requests: list[Request]) -> tuple[list[Any], dict[str, Any]]:
    """``requests`` prepared by the ``hf`` backend and packed into the reuse path's rows: the rows and their
    clips' features by digest. A prompt that cannot be prepared or packed is an error here: a benchmark over a
    build times every prompt or none."""
    prepared, failed = backend.prepare(requests)
    rows, clips, refused = backend.path.pack(prepared)
    if failed or refused:
        problems = {**failed, **refused}
        raise RuntimeError(f"prompts the backend refused: {problems}")
    return rows, clips


def run_batches(
    backend: Any, requests: list[Request], batch_size: int, packed: bool = False
) -> list[list[Any]]:
    """The reads a run makes of ``requests`` (episode-major, as ``episode_major_requests`` gives them): the
    runner's windows (``inference.runner.window_sizes``; none cuts an episode), each packed into the reuse
    path's rows (``packed_rows``) and cut into batches of ``batch_size`` prompts (``packed``: as ``-o pack=on``
    cuts them)."""
    from audioicl.backends.hf.reuse.rows import batches
    from audioicl.inference.options import RunOptions
    from audioicl.inference.runner import window_sizes, windows

    options = RunOptions(data=Path("."), model="hf:tiny", out=Path("."), batch_size=batch_size)
    made = []
    for window in windows(
        requests, window_sizes(options), whole_episodes=True, episode_of=lambda r: r.episode_id
    ):
        rows, _ = packed_rows(backend, list(window))
        made += batches(rows, batch_size, packed=packed)
    return made


def built_benchmark(out: Path, episodes: int) -> Path:
    """``audioicl build --out OUT --episodes EPISODES`` in a process of its own, as a user builds it; OUT."""
    command = [sys.executable, "-m", "audioicl", "build", "--out", str(out), "--episodes", str(episodes)]
    subprocess.run([*command, "--quiet"], check=True)
    return out


def tiny_backend(family: str, folder: Path) -> Any:
    """The ``hf`` backend (fp32, CPU) around a tiny random checkpoint of ``family`` written to ``folder``."""
    from audioicl.backends import ModelSpec, load_backend
    from audioicl.testing.build import tiny_checkpoint

    return load_backend(ModelSpec("hf", str(tiny_checkpoint(family, folder))), dtype="fp32", device="cpu")
