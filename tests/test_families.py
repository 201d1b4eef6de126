"""Every model family beyond the three Qwen ones, through the ``hf`` backend, on its tiny checkpoint
(``audioicl.testing.families``): what the model receives equals what the family's processor makes as its model
card does it (token for token, value for value); answers do not depend on the batch or its order; the stop
tokens hold the template's end of turn; an over-long and a corrupt clip are each their own error line; and a
user's ``build`` → ``run --model hf:DIR`` (every task, k = 1..5) → ``score`` → ``report`` has 0 error lines.

The Qwen families have their own (``test_hf_backend``, ``test_reuse``, ``e2e/test_hf_cli``).
"""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path

import cli
import numpy as np
import pytest

for _module in ("torch", "transformers", "torchvision"):
    pytest.importorskip(_module)

import torch  # noqa: E402

from audioicl import ModelSpec, RunOptions, load_backend, read_meta, run  # noqa: E402
from audioicl.backends.base import GenerationConfig, Request  # noqa: E402
from audioicl.backends.families import FAMILIES  # noqa: E402
from audioicl.backends.rendering import end_of_turn_token  # noqa: E402
from audioicl.prompts.build import build_prompt  # noqa: E402
from audioicl.prompts.clips import ClipStore  # noqa: E402
from audioicl.testing.families import TINY  # noqa: E402

NAMES = TINY.names()
TASKS = 9
audioicl = partial(cli.audioicl, timeout=900, rc=0)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("family-checkpoints")
    return {name: TINY.get(name).write(root / name, 0) for name in NAMES}


@pytest.fixture(scope="module")
def backends(checkpoints):
    loaded = {
        name: load_backend(ModelSpec("hf", str(path)), dtype="fp32", device="cpu")
        for name, path in checkpoints.items()
    }
    yield loaded
    for backend in loaded.values():
        backend.close()


def _requests(data: Path, family: str, k: int = 2, limit: int = 6) -> list[Request]:
    """The first ``limit`` episodes' prompts at ``k``, as the runner lays them out for ``family``."""
    store = ClipStore(data)
    episodes = read_meta(data / "meta" / f"meta_k{k}.jsonl")[:limit]
    return [
        Request(f"{ep.id}@k{k}", ep.id, ep.task, k, build_prompt(ep, store, family=family).chat)
        for ep in episodes
    ]


def _card_conversation(family, chat) -> list[dict]:
    """The chat as a model card writes it: content parts, each audio part carrying its samples."""
    waves = iter(part.wave for part in chat.audio_parts())
    messages = family.template_messages(chat)
    for message in messages:
        if isinstance(message["content"], list):
            message["content"] = [
                {**part, "audio": next(waves)} if part["type"] == "audio" else part
                for part in message["content"]
            ]
    return messages


@pytest.mark.parametrize("name", NAMES)
def test_inputs_equal_the_model_cards_processor_call(backends, tiny_dataset, name):
    backend = backends[name]
    family = backend.model_family
    for request in _requests(tiny_dataset, backend.family, limit=4):
        (rendered,), failed = backend.prepare([request])
        assert not failed
        ours = backend.model_inputs([rendered])
        reference = TINY.get(name).model_card_inputs(
            backend.processor, _card_conversation(family, request.chat)
        )
        shared = sorted(set(reference) & backend.forward_names)
        assert {"input_ids", "attention_mask"} <= set(shared)
        assert set(ours) == set(shared), f"{name}: passed {sorted(ours)}, the card's call makes {shared}"
        for key in shared:
            expected = reference[key]
            if isinstance(expected, torch.Tensor):
                expected = expected.to(ours[key].dtype) if expected.is_floating_point() else expected
                assert torch.equal(ours[key], expected), f"{name}: {key} differs from the model card's"
            else:
                assert ours[key] == expected, f"{name}: {key} differs from the model card's"
        assert int((ours["input_ids"] == backend.audio_token_id).sum()) >= len(rendered.clips)


@pytest.mark.parametrize("name", NAMES)
def test_answers_do_not_depend_on_the_batch_or_its_order(backends, tiny_dataset, name):
    backend = backends[name]
    requests = _requests(tiny_dataset, backend.family)
    alone = [backend.generate([r], GenerationConfig(max_new_tokens=6))[0] for r in requests]
    together = backend.generate(requests, GenerationConfig(max_new_tokens=6, batch_size=4))
    backwards = backend.generate(requests[::-1], GenerationConfig(max_new_tokens=6, batch_size=3))[::-1]
    assert all(r.error is None for r in alone), [r.error for r in alone]
    assert [r.text for r in together] == [r.text for r in alone]
    assert [r.text for r in backwards] == [r.text for r in alone]
    assert all(r.usage.audio_tokens > 0 for r in alone)


@pytest.mark.parametrize("name", NAMES)
def test_stop_tokens_hold_the_templates_end_of_turn(backends, name):
    backend = backends[name]
    end = end_of_turn_token(backend.processor, backend.model_family)
    assert end is not None, f"{name}: no end-of-turn token found in its chat template"
    assert backend.processor.tokenizer.convert_tokens_to_ids(end) in backend.stop_ids


@pytest.mark.parametrize("name", NAMES)
def test_an_overlong_and_a_corrupt_clip_are_each_their_own_error_line(
    backends, fresh_dataset, tmp_path, name
):
    backend = backends[name]
    limit = backend.max_clip_seconds
    meta = fresh_dataset / "meta" / "meta_k1.jsonl"
    episodes = read_meta(meta)
    corrupt = fresh_dataset / episodes[1].query.clips[0].path
    corrupt.write_bytes(b"RIFF not a wave")
    overlong = None
    if limit is not None:
        import soundfile

        overlong = fresh_dataset / episodes[0].query.clips[0].path
        soundfile.write(overlong, np.zeros(int((limit + 1) * 16_000), dtype=np.float32), 16_000)
    out = tmp_path / "results"
    run(RunOptions(data=fresh_dataset, model=f"hf:{name}", out=out, k=(1,)), backend=backend)
    lines = [json.loads(x) for x in next(out.glob("*_results_k1.jsonl")).read_text().splitlines()]
    by_id = {line["id"]: line for line in lines}
    assert len(by_id) == len(episodes)
    assert by_id[episodes[1].id]["status"] == "error"
    if overlong is not None:
        error = by_id[episodes[0].id]["error"]
        assert by_id[episodes[0].id]["status"] == "error" and f"{limit:g}" in error, error
    answered = [line for line in lines if line["id"] not in {episodes[0].id, episodes[1].id}]
    assert answered and all(line["status"] == "ok" for line in answered)


@pytest.mark.parametrize("name", NAMES)
def test_every_family_is_registered_for_the_backend(name):
    family = FAMILIES.get(name)
    assert family.rendering == "parts" and family.checkpoints


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("families-e2e") / "bench"
    audioicl("build", "--out", root, "--episodes", 1, "--quiet", "--workers", 1)
    return root


@pytest.mark.parametrize("name", NAMES)
def test_run_score_report_every_task_and_k(built, checkpoints, tmp_path, name):
    checkpoint = tmp_path / name
    shutil.copytree(checkpoints[name], checkpoint)
    out = tmp_path / "results"
    proc = audioicl(
        "run",
        "--data",
        built,
        "--model",
        f"hf:{checkpoint}",
        "--out",
        out,
        "-o",
        "dtype=fp32",
        "-o",
        "device=cpu",
    )
    for k in range(1, 6):
        assert f"k={k}: {TASKS} written (0 errors)" in proc.stdout, proc.stdout
    scores = tmp_path / "scores" / "summary.csv"
    audioicl("score", "--in", out, "--out", scores)
    audioicl("report", "--scores", scores, "--results", out, "--data", built, "--out", tmp_path / "report")
    assert checkpoint.name in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
