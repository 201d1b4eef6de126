"""Prompt tokens a prefix cache can reuse over the whole benchmark, for three orders of submission.

Every prompt of a default build (9 tasks x 300 episodes, k = 1..5, Morse bank on) is rendered as the ``vllm``
backend renders it for Qwen2-Audio (``render_chat`` with the checkpoint's chat template) and counted in tokens:
text pieces with the tokenizer, each clip with the number of audio tokens the real Qwen2-Audio processor gives
it (a tiny random checkpoint's processor: the real processor class and feature extractor settings, so the audio
counts are the real model's; its text tokenizer is a small BPE, so text counts are larger than Qwen's).

A prompt reuses the longest token prefix it shares with a prompt submitted before it, in whole blocks of 16
tokens (vLLM's cache granularity), from an earlier prompt of the same engine call (a window of 32 prompts, the
runner's default: batch 8 x 4). Orders:

- ``k, file order``: one k file after another, as the original ran;
- ``episode``: the runner's default, an episode's k prompts together;
- ``episode + prefix sort``: the same windows, each sorted by text and clip content (the ``vllm`` backend).

    python benchmarks/prefix_sharing.py [--episodes 300] [--window 32]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile as sf

from audioicl.backends.families import FAMILIES
from audioicl.backends.rendering import load_processor, prefix_key, render_chat
from audioicl.dataset.meta import find_meta_files, read_meta
from audioicl.inference.runner import Work, order_work
from audioicl.prompts.build import build_prompt
from audioicl.prompts.chat import AudioPart
from audioicl.prompts.clips import ClipStore, load_morse_bank
from audioicl.testing import tiny_checkpoint

BLOCK = 16


class LengthOnly(ClipStore):
    """Clips as silence of their true length, named by path: token counts need lengths, not samples."""

    def load(self, audio_path: str) -> AudioPart:
        frames = sf.info(str(Path(self.root) / audio_path)).frames
        return AudioPart(np.zeros(frames, dtype=np.float32), 16_000, audio_path)


class Counter:
    def __init__(self, processor, family):
        self.processor, self.family = processor, family
        self.text_cache: dict[str, list[int]] = {}
        self.audio_cache: dict[int, int] = {}
        self.audio_id = processor.tokenizer.convert_tokens_to_ids(family.audio_token)

    def text(self, piece: str) -> list[int]:
        if piece not in self.text_cache:
            self.text_cache[piece] = self.processor.tokenizer(piece, add_special_tokens=False).input_ids
        return self.text_cache[piece]

    def audio(self, samples: int) -> int:
        if samples not in self.audio_cache:
            out = self.processor(
                text=[self.family.placeholder],
                audio=[np.zeros(samples, np.float32)],
                sampling_rate=16_000,
                return_tensors="np",
            )
            self.audio_cache[samples] = int((out["input_ids"][0] == self.audio_id).sum())
        return self.audio_cache[samples]

    def units(self, chat) -> list[tuple[object, int]]:
        """The prompt as (identity, tokens) units: one per text token, one per clip (all its tokens)."""
        text, clips = render_chat(chat, self.family, self.processor.apply_chat_template)
        units: list[tuple[object, int]] = []
        for piece, clip in zip(text.split(self.family.placeholder), [*clips, None], strict=True):
            units += [(token, 1) for token in self.text(piece)]
            if clip is not None:  # the placeholder's bos/eos tokens around the clip's audio tokens
                units += [("bos", 1), (clip.digest, self.audio(len(clip.wave))), ("eos", 1)]
        return units


def shared_tokens(a: list[tuple[object, int]], b: list[tuple[object, int]]) -> int:
    count = 0
    for (x, n), (y, _) in zip(a, b, strict=False):
        if x != y:
            break
        count += n
    return count


def reused(order: list[list[tuple[object, int]]], window: int) -> int:
    total = 0
    for position, units in enumerate(order):
        start = position - position % window
        best = max((shared_tokens(units, order[j]) for j in range(start, position)), default=0)
        total += best // BLOCK * BLOCK
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--window", type=int, default=32)
    args = parser.parse_args()
    family = FAMILIES.get("qwen2-audio")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "bench"
        build = ["build", "--out", str(root), "--episodes", str(args.episodes), "--quiet"]
        subprocess.run([sys.executable, "-m", "audioicl", *build], check=True)
        processor = load_processor(str(tiny_checkpoint("qwen2-audio", Path(tmp) / "ckpt")))
        counter = Counter(processor, family)
        store, bank = LengthOnly(root), load_morse_bank(root, "auto")
        pending = {k: read_meta(path) for k, path in find_meta_files(root).items()}
        units: dict[str, list[tuple[object, int]]] = {}
        sort_keys: dict[str, list[str]] = {}
        for k, episodes in pending.items():
            for ep in episodes:
                chat = build_prompt(ep, store, family=family.system_family, bank=bank).chat
                key = Work(k, ep).key
                units[key] = counter.units(chat)
                text, clips = render_chat(chat, family, processor.apply_chat_template)
                sort_keys[key] = prefix_key(text, clips, family.placeholder)
    total = sum(n for prompt in units.values() for _, n in prompt)
    by_k = [w.key for w in order_work(pending, "k")]
    by_episode = [w.key for w in order_work(pending, "episode")]
    sorted_windows = [
        key
        for start in range(0, len(by_episode), args.window)
        for key in sorted(by_episode[start : start + args.window], key=sort_keys.__getitem__)
    ]
    print(f"{len(units)} prompts, {total:,} prompt tokens (window {args.window}, blocks of {BLOCK})")
    print("| order | tokens reused | % of all |\n|---|---|---|")
    for name, order in (
        ("k, file order", by_k),
        ("episode", by_episode),
        ("episode + prefix sort", sorted_windows),
    ):
        saved = reused([units[key] for key in order], args.window)
        print(f"| {name} | {saved:,} | {100 * saved / total:.1f} |")


if __name__ == "__main__":
    main()
