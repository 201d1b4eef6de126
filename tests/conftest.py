"""Shared fixtures: a tiny on-disk dataset of generated WAVs and meta files (``meta.write_meta``).

``make_dataset(root)`` writes, for each of four task shapes (AudioCount: single clip; MorseCode: single
clip plus the alphabet bank A..Z; AudioRemap: A/B/MIX clips; AnomalyDetect: Normal/Anomalous pairs with
an ``object``), ``per_task`` episodes nested across ``ks`` (the k-shot demos are the first k of 5). Clips
are short sine tones whose length depends on their label, so they differ in duration.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import tone

from audioicl import Episode
from audioicl.audio import write_wav
from audioicl.dataset.meta import write_meta
from audioicl.records import Clip, Demo, Query
from audioicl.tasks import TASKS, episode_id

WORDS = (
    "apple",
    "brick",
    "cloud",
    "dream",
    "eagle",
    "flame",
    "grape",
    "house",
    "index",
    "joker",
    "knife",
    "lemon",
)
REMAP_PATTERNS = ("AAB", "ABA", "BAB", "BAA", "ABB", "BBA")


def _cuda_here() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


# Without a GPU, Triton's kernels (``backends.kernels``, ``-o fused=on``) run on CPU tensors through Triton's
# interpreter: it must be chosen before Triton is first imported, in this process and the CLI's it starts.
if not _cuda_here():
    os.environ.setdefault("TRITON_INTERPRET", "1")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _Writer:
    """Writes each clip once under ``root`` and returns its meta path."""

    def __init__(self, root: Path):
        self.root = root

    def clip(self, rel: str, seconds: float, freq: float = 440.0) -> str:
        path = self.root / rel
        if not path.exists():
            write_wav(path, tone(seconds, freq))
        return rel


def _count_episode(w: _Writer, index: int) -> Episode:
    labels = [str(v) for v in np.random.default_rng(index).permutation(np.arange(1, 9))[:6]]

    def clip(label: str) -> Clip:
        rel = w.clip(
            f"data/audiocount/easy/snd{index}_{label}.wav", 0.05 * int(label) + 0.02 * index, 300 + 50 * index
        )
        return Clip(rel, label)

    demos = tuple(Demo((clip(label),)) for label in labels[:5])
    query = clip(labels[5])
    return Episode(
        episode_id(TASKS.get("AudioCount"), index), "AudioCount", demos, Query((query,), query.label)
    )


def _morse_episode(w: _Writer, index: int) -> Episode:
    words = [WORDS[(index * 6 + j) % len(WORDS)] for j in range(6)]

    def clip(word: str) -> Clip:
        seconds = 0.05 + 0.01 * (sum(map(ord, word)) % 20)
        return Clip(w.clip(f"data/MorseCode/words/wav/{word}.wav", seconds, 600), word)

    demos = tuple(Demo((clip(word),)) for word in words[:5])
    query = clip(words[5])
    return Episode(
        episode_id(TASKS.get("MorseCode"), index), "MorseCode", demos, Query((query,), query.label)
    )


def _remap_episode(w: _Writer, index: int) -> Episode:
    a_letter, b_letter = LETTERS[(2 * index) % 26], LETTERS[(2 * index + 7) % 26]
    a = w.clip(f"data/one_shot/one_shot_percussive_sounds/1/a{index}.wav", 0.04, 200 + 10 * index)
    b = w.clip(f"data/one_shot/one_shot_percussive_sounds/2/b{index}.wav", 0.06, 900 + 10 * index)

    def spell(pattern: str) -> str:
        return pattern.replace("A", a_letter.lower()).replace("B", b_letter.lower()).upper()

    def mix(pattern: str) -> str:
        return w.clip(f"data/audioremap/MIX__{pattern}__ab{index:04d}.wav", 0.15, 500)

    demos = tuple(
        Demo((Clip(a, a_letter, "A"), Clip(b, b_letter, "B"), Clip(mix(p), spell(p), "MIX")), multi=True)
        for p in REMAP_PATTERNS[:5]
    )
    target = REMAP_PATTERNS[(index + 5) % 6]
    query = Query(
        (Clip(a, a_letter, "A"), Clip(b, b_letter, "B"), Clip(mix(target), None, "MIX")),
        spell(target),
        multi=True,
    )
    return Episode(episode_id(TASKS.get("AudioRemap"), index), "AudioRemap", demos, query)


def _anomaly_episode(w: _Writer, index: int) -> Episode:
    folder = "data/anomalous/fan"

    def clip(split: str, kind: str, number: int, label: str | None, role: str) -> Clip:
        rel = w.clip(
            f"{folder}/{split}/section_00_{kind}_{index:02d}{number:02d}.wav", 0.2 + 0.01 * number, 120
        )
        return Clip(rel, label, role)

    demos = tuple(
        Demo(
            (
                clip("train", "normal", j, "Normal", "Normal"),
                clip("test", "anomaly", j, "Anomalous", "Anomalous"),
            ),
            multi=True,
        )
        for j in range(5)
    )
    label = "Anomalous" if index % 2 else "Normal"
    kind = "anomaly" if index % 2 else "normal"
    query = Query((clip("test", kind, 9, None, "Query"),), label, multi=True)
    return Episode(
        episode_id(TASKS.get("AnomalyDetect"), index), "AnomalyDetect", demos, query, {"object": "fan"}
    )


BUILDERS = (_count_episode, _morse_episode, _remap_episode, _anomaly_episode)


def make_dataset(
    root: Path, *, per_task: int = 3, ks: tuple[int, ...] = (1, 2, 3), morse_bank: bool = True
) -> Path:
    """Write the tiny dataset under ``root`` (see the module docstring); returns ``root``."""
    w = _Writer(root)
    episodes = [build(w, index) for build in BUILDERS for index in range(per_task)]
    if morse_bank:
        for number, letter in enumerate(LETTERS):
            w.clip(f"data/MorseCode/alphabet/{letter}.wav", 0.03 + 0.002 * number, 600)
    for k in ks:
        write_meta(root / "meta" / f"meta_k{k}.jsonl", [ep.with_shots(k) for ep in episodes])
    return root


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory) -> Path:
    """A read-only tiny dataset shared by the session (copy it before changing anything)."""
    return make_dataset(tmp_path_factory.mktemp("tiny_dataset"))


@pytest.fixture(scope="session")
def one_episode_each(tmp_path_factory) -> Path:
    """One episode of every task, k = 1..5, as ``audioicl build --episodes 1`` makes them (the Morse letter bank
    included): built once a session (per xdist worker) and shared, read-only (copy it before changing it)."""
    root = tmp_path_factory.mktemp("one-episode-each") / "bench"
    command = [sys.executable, "-m", "audioicl", "build", "--out", str(root), "--episodes", "1", "--quiet"]
    subprocess.run([*command, "--workers", "1"], check=True, capture_output=True)
    return root


@pytest.fixture
def fresh_dataset(tmp_path) -> Path:
    """A private tiny dataset (k = 1 and 2) that a test may change."""
    return make_dataset(tmp_path / "dataset", ks=(1, 2))


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """family → folder of a tiny random-weight checkpoint in the real layout (``audioicl.checkpoints``).

    Built once per session (about a second each); read-only: copy a folder before changing it. The Omni families
    are in their full layout (thinker, talker, vocoder), as the real checkpoints are.
    """
    for module in ("torch", "transformers", "torchvision"):
        pytest.importorskip(module)
    from audioicl.testing import QWEN_FAMILIES, tiny_checkpoint

    root = tmp_path_factory.mktemp("tiny_checkpoints")
    return {family: tiny_checkpoint(family, root / family) for family in QWEN_FAMILIES}


@pytest.fixture(scope="session")
def tiny_backends(tiny_checkpoints):
    """family → the ``hf`` backend with its default options around the tiny checkpoint, fp32 on the CPU;
    shared by the session (a test that needs other options builds its own)."""
    from audioicl import ModelSpec, load_backend

    loaded = {
        name: load_backend(ModelSpec("hf", str(path)), dtype="fp32", device="cpu")
        for name, path in tiny_checkpoints.items()
    }
    yield loaded
    for backend in loaded.values():
        backend.close()


@pytest.fixture(scope="session")
def tiny_thinker_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Omni family → thinker-only tiny checkpoint (the other layout a backend must load); same weights."""
    for module in ("torch", "transformers", "torchvision"):
        pytest.importorskip(module)
    from audioicl.testing import FAMILY_SPECS, tiny_checkpoint

    root = tmp_path_factory.mktemp("tiny_thinker_checkpoints")
    omni = [name for name, spec in FAMILY_SPECS.items() if spec.full_class is not None]
    return {family: tiny_checkpoint(family, root / family, thinker_only=True) for family in omni}


@pytest.fixture
def hub():
    """A local Hugging Face hub (``hub_server.Hub``) on 127.0.0.1, empty until the test commits files to it."""
    from hub_server import Hub

    server = Hub("hongzz-18/AudioICL-Bench")
    server.start()
    yield server
    server.stop()


NINE_TASK_EPISODES = 3


@pytest.fixture(scope="session")
def nine_tasks(tmp_path_factory) -> Path:
    """All nine tasks as the builder makes them, 3 episodes each, k = 1..5; built once per session (per xdist
    worker) and shared read-only by the label-truth, perceiving, controls, probes and study tests."""
    from audioicl import BuildOptions, build

    out = tmp_path_factory.getbasetemp() / f"nine-tasks-{NINE_TASK_EPISODES}"
    build(out, BuildOptions(episodes=NINE_TASK_EPISODES), workers=2)
    return out


@pytest.fixture(scope="session")
def family_checkpoints(tmp_path_factory) -> dict[str, Path]:
    """Family → tiny checkpoint folder of every family of ``audioicl.testing.families`` (the non-Qwen ones),
    built once per session (per xdist worker); read-only."""
    for module in ("torch", "transformers", "torchvision"):
        pytest.importorskip(module)
    from audioicl.testing.families import TINY

    root = tmp_path_factory.mktemp("family_checkpoints")
    return {name: TINY.get(name).write(root / name, 0) for name in TINY.names()}
