"""The fast path reads a checkpoint's audio tokens from its processor (issue 53, item 2): a checkpoint built
independently may name its special tokens otherwise than the family's published checkpoints do (a Gemma 4
whose tokenizer, template and processor say ``<audio_soft_token>`` for ``<|audio|>``). Before, the fast path
wrote its family's literal token and every prompt became an error line that ``-o reuse=off`` answered; now
each fast-path family's tiny checkpoint with renamed tokens answers with every default what it answers with
``-o reuse=off``, and a checkpoint the fast path cannot serve falls back to ``generate``, recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

from audioicl import AudioICLError, ModelSpec, load_backend  # noqa: E402
from audioicl.backends.base import GenerationConfig  # noqa: E402
from audioicl.testing.build import tiny_checkpoint  # noqa: E402
from audioicl.testing.requests import episode_major_requests  # noqa: E402

# family → (its audio token as its published checkpoints name it, the name this checkpoint gives it)
RENAMED = {
    "qwen2-audio": ("<|AUDIO|>", "<|SOUND|>"),
    "qwen2.5-omni": ("<|AUDIO|>", "<|SOUND|>"),
    "qwen3-omni": ("<|audio_pad|>", "<|sound_pad|>"),
    "apertus1p5": ("<|audio|>", "<|sound|>"),
    "gemma4": ("<|audio|>", "<audio_soft_token>"),
    "gemma4_unified": ("<|audio|>", "<audio_soft_token>"),
}
# Voxtral, the seventh fast-path family, takes its audio token's id and each clip's count from mistral-common's
# encoder in the checkpoint (``VoxtralFamily.clip_inputs``): it writes no token name of its own.


def renamed_checkpoint(family: str, folder: Path, old: str, new: str) -> Path:
    """A tiny checkpoint of ``family`` whose tokenizer, chat template and processor call its audio token
    ``new``: every text file of the folder with ``old`` rewritten (the token keeps its id)."""
    tiny_checkpoint(family, folder)
    for path in folder.iterdir():
        if path.suffix in (".json", ".jinja"):
            path.write_text(path.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    return folder


def answers(folder: Path, requests, **options) -> tuple[list[tuple[str | None, str | None]], dict]:
    backend = load_backend(ModelSpec("hf", str(folder)), dtype="fp32", device="cpu", **options)
    try:
        made = backend.generate(requests, GenerationConfig(max_new_tokens=3))
        return [(r.text, r.error) for r in made], backend.info
    finally:
        backend.close()


@pytest.mark.parametrize("family", sorted(RENAMED))
def test_renamed_audio_tokens_answer_on_the_fast_path_as_generate_does(family, one_episode_each, tmp_path):
    old, new = RENAMED[family]
    folder = renamed_checkpoint(family, tmp_path / family, old, new)
    requests = episode_major_requests(one_episode_each, family, per_task=1)[:3]
    fast, info = answers(folder, requests)
    plain, _ = answers(folder, requests, reuse="off")
    assert info["reuse"] == "prefix"  # the fast path served them
    assert new in info["audio_tokens"]["placeholder"] and info["audio_tokens"]["audio_token"] == new
    assert all(error is None for _, error in plain), plain
    assert fast == plain


def test_a_checkpoint_the_fast_path_cannot_serve_falls_back_and_says_why(tiny_checkpoints, tmp_path):
    """A config whose audio token id is not its tokenizer's: the default is ``generate``, recorded as
    ``reuse: off (why)``; ``-o reuse=prefix`` asked for the fast path and is refused, saying why."""
    import json

    folder = tmp_path / "qwen2-audio"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], folder)
    config = json.loads((folder / "config.json").read_text())
    config["audio_token_id"] = config.get("audio_token_id", config.get("audio_token_index")) + 1
    (folder / "config.json").write_text(json.dumps(config))
    backend = load_backend(ModelSpec("hf", str(folder)), dtype="fp32", device="cpu")
    try:
        assert backend.info["reuse"].startswith("off (its config's audio_token_id is ")
        assert backend.path is None
    finally:
        backend.close()
    with pytest.raises(AudioICLError, match="reuse=prefix: .*its config's audio_token_id"):
        load_backend(ModelSpec("hf", str(folder)), dtype="fp32", device="cpu", reuse="prefix")
