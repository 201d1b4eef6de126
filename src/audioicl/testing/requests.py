"""The requests a run sends a backend for a whole build, for tests and benchmarks that call a backend directly."""

from __future__ import annotations

from pathlib import Path

from audioicl.backends.base import Request
from audioicl.dataset.meta import read_meta
from audioicl.prompts.build import build_prompt
from audioicl.prompts.clips import ClipStore, load_morse_bank


def episode_major_requests(root: Path, family: str) -> list[Request]:
    """Every episode's k = 1..5 prompts of the build at ``root`` (the Morse bank as the build has it), an
    episode's together: the runner's default order, the one the reuse path shares prefixes in."""
    store, bank = ClipStore(root), load_morse_bank(root, "auto")
    work = [(ep.id, k, ep) for k in range(1, 6) for ep in read_meta(root / "meta" / f"meta_k{k}.jsonl")]
    return [
        Request(f"{eid}@k{k}", eid, ep.task, k, build_prompt(ep, store, family=family, bank=bank).chat)
        for eid, k, ep in sorted(work, key=lambda item: (item[0], item[1]))
    ]
