"""Small helpers that several test modules share: ``from helpers import tone``.

pytest puts ``tests/`` on ``sys.path`` (its conftest.py sits in a folder without ``__init__.py``), as it does for
``reference_data`` and the servers; conftest modules themselves are not importable by name, so what a test module
calls directly lives here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np

from audioicl.audio import SAMPLE_RATE


def tone(
    seconds: float,
    hz: float = 440.0,
    sr: int = SAMPLE_RATE,
    *,
    amplitude: float = 0.3,
    decay: float = 0.0,
    noise_seed: int | None = None,
) -> np.ndarray:
    """A float32 sine of ``hz`` for ``seconds`` at ``sr``: ``amplitude`` times ``exp(-decay * t)``, plus white noise
    of standard deviation 0.01 drawn from ``noise_seed`` when one is given."""
    t = np.arange(round(seconds * sr)) / sr
    wave = amplitude * np.sin(2 * np.pi * hz * t)
    if decay:
        wave = wave * np.exp(-decay * t)
    if noise_seed is not None:
        wave = wave + np.random.default_rng(noise_seed).standard_normal(t.size) * 0.01
    return wave.astype(np.float32)


def noise_clip(seconds: float, seed: int):
    """A clip of white noise at 16 kHz (``AudioPart``), ``seconds`` long, the same for the same seed."""
    from audioicl.prompts.chat import AudioPart

    rng = np.random.default_rng(seed)
    return AudioPart.of((0.1 * rng.standard_normal(round(seconds * 16_000))).astype(np.float32), 16_000)


def quiet(_message: str) -> None:
    """A report callback (``run``'s second argument) that keeps messages for nobody."""


def read_jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file (a results file, a meta file), one a line."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_bare_meta(root: Path, per_task: int, ks: tuple[int, ...] = (1,)) -> list[tuple[str, str, str]]:
    """A dataset of meta files only, no audio (the scorer never reads any): ``per_task`` episodes of each of
    the nine tasks, ids in the released blocks (``AudioICL00001``, ``AudioICL00301``, ...), in benchmark order,
    one query label per task (``"3"``, ``"plant"``, ``"ABA"``, ``"Normal"``). Returns (id, task, label)."""
    from audioicl.tasks import TASKS, episode_id, task_names

    labels = {"MorseCode": "plant", "AudioRemap": "ABA", "AnomalyDetect": "Normal"}
    episodes = [
        (episode_id(TASKS.get(task), index), task, labels.get(task, "3"))
        for task in task_names()
        for index in range(per_task)
    ]
    for k in ks:
        path = root / "meta" / f"meta_k{k}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        demos = [{"audio_path": f"data/d{i}.wav", "label": "3"} for i in range(k)]
        path.write_text(
            "".join(
                json.dumps(
                    {"id": i, "task": t, "demos": demos, "query": {"audio_path": f"data/{i}.wav", "label": g}}
                )
                + "\n"
                for i, t, g in episodes
            ),
            encoding="utf-8",
        )
    return episodes


def write_results(path: Path, episodes: list[tuple[str, str, str]], respond=lambda gt: gt) -> Path:
    """One result line per episode (id, task, label), the response made from the label by ``respond``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps({"id": i, "task": t, "response": respond(g), "gt": g}) + "\n" for i, t, g in episodes
        ),
        encoding="utf-8",
    )
    return path


def write_run_record(
    folder: Path, model: str, data: Path, runs: list[dict], shard: str | None = None
) -> Path:
    """A minimal ``<model>_run.json``: the data root, each run's selection (``shots``, ``tasks``, ``limit``)."""
    path = folder / f"{model}_run.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"data": str(data), "model_name": model, "shard": shard, "runs": runs}
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium_dom(page: Path, profile: Path, *extra: str, budget_ms: int = 30000, timeout: int = 300) -> str:
    """The DOM of ``page`` after load, once headless Chromium has run ``budget_ms`` of virtual time (load,
    error and timer handlers included)."""
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            *extra,
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    ).stdout


def share_features(backend, other) -> None:
    """``other`` (an ``hf`` backend around ``backend``'s model) takes ``backend``'s feature cache where both cut
    features alike: a reuse path's cache holds features trimmed to their valid frames, which ``reuse=off``
    (Qwen2-Audio's forward wants the whole 30 s window) cannot take. Sharing regardless made tests that ran
    after a reuse path on the same clips fail, in whichever order pytest put them."""
    if other.clips.trim_to == backend.clips.trim_to:
        other.clips.features = backend.clips.features
