"""What every backend kind must do, checked the same way for each (the ``BACKENDS`` fixture lists them):
one response per request in order, whatever the batch; no file path or query label in what reaches it; and
through the runner, a failed prompt becomes an error line while its neighbours are answered.

``openai:`` runs against the tests' chat server on 127.0.0.1 (``chat_server.py``). ``vllm:`` needs vLLM's own
environment (torch 2.13), so its checks run there, through the CLI: ``tests/e2e/test_vllm_cli.py`` (answers in
order and equal to ``hf:``'s, a prompt the engine refuses as an error line beside answered ones)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import quiet

from audioicl import RunOptions, read_meta, run
from audioicl.backends import ModelSpec, load_backend
from audioicl.backends.base import GenerationConfig, Request, Response
from audioicl.prompts.build import build_prompt
from audioicl.prompts.chat import AudioPart, Chat, TextPart
from audioicl.prompts.clips import ClipStore

BUILTIN = ["builtin:random", "builtin:majority", "builtin:oracle", "builtin:icl"]
MODEL_FAMILIES = ["qwen2-audio", "qwen2.5-omni", "qwen3-omni"]


@pytest.fixture(scope="module", params=BUILTIN + [f"hf:{f}" for f in MODEL_FAMILIES] + ["openai:conformance"])
def backend_spec(request) -> str:
    if request.param.startswith("hf:"):
        for module in ("torch", "transformers", "torchvision"):
            pytest.importorskip(module)
    if request.param.startswith("openai:"):
        pytest.importorskip("httpx")
    return request.param


def spec_for(backend_spec: str, checkpoints: dict[str, Path] | None, server) -> tuple[str, dict[str, str]]:
    if backend_spec.startswith("hf:"):
        assert checkpoints is not None
        return f"hf:{checkpoints[backend_spec[3:]]}", {"dtype": "fp32", "device": "cpu"}
    if backend_spec.startswith("openai:"):
        return backend_spec, {"base_url": server.url, "max_clip_seconds": "30"}
    return backend_spec, {}


@pytest.fixture(scope="module")
def checkpoints(request, backend_spec):
    return request.getfixturevalue("tiny_checkpoints") if backend_spec.startswith("hf:") else None


@pytest.fixture(scope="module")
def server(backend_spec):
    """The chat server an ``openai:`` backend talks to (None for the other kinds)."""
    if not backend_spec.startswith("openai:"):
        yield None
        return
    from chat_server import ChatServer

    running = ChatServer().start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def backend(backend_spec, checkpoints, server):
    spec, options = spec_for(backend_spec, checkpoints, server)
    loaded = load_backend(ModelSpec.parse(spec), **options)
    yield loaded
    loaded.close()


def requests_of(dataset: Path, k: int, family: str) -> list[Request]:
    store = ClipStore(dataset)
    out = []
    for ep in read_meta(dataset / "meta" / f"meta_k{k}.jsonl"):
        chat = build_prompt(ep, store, family=family).chat
        out.append(Request(f"{ep.id}@k{k}", ep.id, ep.task, k, chat))
    return out


def texts(responses: list[Response]) -> list[str | None]:
    return [r.text for r in responses]


def test_one_response_per_request_in_order_whatever_the_batch(backend, tiny_dataset):
    requests = requests_of(tiny_dataset, 2, backend.family)
    config = GenerationConfig(max_new_tokens=3, batch_size=3)
    forward = backend.generate(requests, config)
    assert len(forward) == len(requests) and all(isinstance(r, Response) for r in forward)
    assert all(r.error is None and isinstance(r.text, str) for r in forward)
    backward = backend.generate(list(reversed(requests)), replace(config, batch_size=1))
    assert texts(forward) == list(reversed(texts(backward)))
    assert backend.generate([], config) == []


def test_no_path_or_query_label_reaches_the_backend(tiny_dataset):
    """What a backend gets is the chat: text and sound. No meta path in any text, none on any audio part
    (it carries samples and a content digest only), and the query's own clip has no label."""
    episodes = read_meta(tiny_dataset / "meta" / "meta_k3.jsonl")
    store = ClipStore(tiny_dataset)
    for ep in episodes:
        prompt = build_prompt(ep, store)
        chat: Chat = prompt.chat
        text = "".join(p.text for m in chat.messages for p in m.content if isinstance(p, TextPart))
        for path in prompt.audio_paths:
            assert path not in text and Path(path).name not in text
        for part in chat.audio_parts():
            assert isinstance(part, AudioPart)
            assert set(vars(part)) == {"wave", "sr", "digest"}
        target = chat.items[-1]
        assert target.kind == "query" and target.label is None
        assert text.rstrip().endswith("Label:")


def test_a_failed_prompt_is_an_error_line_and_the_others_are_answered(
    backend, backend_spec, checkpoints, server, tiny_dataset, tmp_path
):
    """One episode's query is a clip the backend refuses (longer than its window) or cannot decode: that
    episode gets an error line naming the problem; every other episode is answered."""
    import shutil

    from audioicl.audio import write_wav

    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    episodes = read_meta(data / "meta" / "meta_k1.jsonl")
    broken = episodes[1].query.target.audio_path
    (data / broken).write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")  # a corrupt file
    too_long = episodes[2].query.target.audio_path
    spec, options = spec_for(backend_spec, checkpoints, server)
    if spec.startswith("builtin:"):
        options = {"max_clip_seconds": "30"}
    window = backend.max_clip_seconds or 30.0
    write_wav(data / too_long, np.zeros(round(16_000 * (window + 1)), dtype=np.float32))
    summary = run(
        RunOptions(
            data=data, model=spec, out=tmp_path / "out", shots=(1,), backend_options=options, batch_size=2
        ),
        report=quiet,
    )
    lines = {x["id"]: x for s in summary.ks for x in map(json.loads, s.path.read_text().splitlines())}
    assert set(lines) == {ep.id for ep in episodes}
    assert lines[episodes[1].id]["status"] == "error" and broken in lines[episodes[1].id]["error"]
    assert (
        lines[episodes[2].id]["status"] == "error"
        and f"{window + 1:.2f} s long" in lines[episodes[2].id]["error"]
    )
    others = [x for i, x in lines.items() if i not in (episodes[1].id, episodes[2].id)]
    assert others and all(x["status"] == "ok" and isinstance(x["response"], str) for x in others)
    assert summary.errors == 2
