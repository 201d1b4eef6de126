"""The real vLLM engine on a tiny random Qwen2-Audio (head_dim 64, fp32, CPU), three ways to one answer:

- ``audioicl run --model hf:DIR`` (transformers, this environment);
- ``audioicl run --model vllm:DIR`` (vLLM's offline engine, in the environment ``scripts/vllm_env.sh`` makes:
  vllm-cpu pins torch 2.13, so it cannot share this one);
- ``vllm serve`` of the same folder on 127.0.0.1 (with ``audioicl chat-template``'s template) and
  ``audioicl run --model openai:NAME --base-url ...`` against it.

Every answer of the three runs is the same. Runs where ``AUDIOICL_VLLM_PYTHON`` names that environment's
python (``scripts/test.sh`` sets it), and is skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from functools import partial
from pathlib import Path

import cli
import pytest

VLLM_PYTHON = os.environ.get("AUDIOICL_VLLM_PYTHON", "")
pytestmark = pytest.mark.skipif(
    not Path(VLLM_PYTHON).is_file(),
    reason="AUDIOICL_VLLM_PYTHON names no vLLM environment (scripts/vllm_env.sh)",
)
pytest.importorskip("torch")
pytest.importorskip("transformers")
httpx = pytest.importorskip("httpx")

NAME = "Qwen2-Audio-7B-Instruct"
SERVER_START_S = 480  # a bound on the server's start (it takes 30-90 s on 2 busy cores)
VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for the tiny model
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


ENV = {**os.environ, **VLLM_ENV}
audioicl = partial(cli.audioicl, timeout=900, env=ENV, rc=0)


def answers(folder: Path, k: int) -> dict[str, dict]:
    path = folder / f"{NAME}_results_k{k}.jsonl"
    return {line["id"]: line for line in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from audioicl.testing import tiny_checkpoint

    # written here (transformers 5.24): the transformers that vllm-cpu pins (5.19) saves Qwen2-Audio's language
    # model under language_model.model.model.*, which vLLM cannot load
    return tiny_checkpoint("qwen2-audio", tmp_path_factory.mktemp("vllm") / NAME, head_dim=64)


@pytest.fixture(scope="module")
def hf_run(checkpoint, tiny_dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hf-results")
    audioicl("run", "--data", tiny_dataset, "--model", f"hf:{checkpoint}", "--out", out,
             "-o", "dtype=fp32", "-o", "device=cpu")  # fmt: skip
    return out


@pytest.fixture(scope="module")
def vllm_run(checkpoint, tiny_dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vllm-results")
    started = time.perf_counter()
    audioicl("run", "--data", tiny_dataset, "--model", f"vllm:{checkpoint}", "--out", out,
             "-o", "dtype=fp32", "-o", "enforce_eager=true",
             python=VLLM_PYTHON, env={**ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})  # fmt: skip
    print(f"vllm run: {time.perf_counter() - started:.1f} s")
    return out


def test_vllm_answers_equal_hf(hf_run, vllm_run):
    for k in (1, 2, 3):
        ours, theirs = answers(vllm_run, k), answers(hf_run, k)
        assert list(ours) == list(theirs) and len(ours) == 12
        for episode, line in ours.items():
            assert line["status"] == "ok", line["error"]
            assert line["response"] == theirs[episode]["response"], episode
            assert line["usage"]["input_tokens"] == theirs[episode]["usage"]["input_tokens"]
            assert line["usage"]["audio_tokens"] == theirs[episode]["usage"]["audio_tokens"] > 0
            assert line["prompt_sha256"] == theirs[episode]["prompt_sha256"]
    record = json.loads((vllm_run / f"{NAME}_run.json").read_text())
    info = record["runs"][-1]["backend_info"]
    # clips per prompt, counted from the episodes run: MorseCode at k=3 has 26 letters + 3 demos + 1 query
    assert info["vllm"] == "0.32.0" and info["limit_audio"] == 30 and info["dtype"] == "float32"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    """``vllm serve`` of the checkpoint on 127.0.0.1 with audioicl's served chat template; its base URL."""
    folder = tmp_path_factory.mktemp("serve")
    template = folder / "chat_template.jinja"
    audioicl("chat-template", checkpoint, "--out", template)
    port = _free_port()
    log = (folder / "server.log").open("w")
    # The module form of ``vllm serve``: vllm-cpu's ``vllm`` command asks for the metadata of a package named
    # vllm, which vllm-cpu is not.
    proc = subprocess.Popen(
        [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint),
         "--served-model-name", NAME, "--host", "127.0.0.1", "--port", str(port),
         "--chat-template", str(template), "--chat-template-content-format", "openai",
         "--dtype", "float32", "--enforce-eager", "--max-model-len", "8192", "--seed", "0",
         "--limit-mm-per-prompt", '{"audio": 32}', "--enable-prefix-caching"],
        stdout=log, stderr=subprocess.STDOUT, env=ENV,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + SERVER_START_S
        while True:
            assert proc.poll() is None, (folder / "server.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "vllm serve did not start in time"
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(1)
        yield f"{url}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_served_answers_equal_the_offline_engine(server, vllm_run, tiny_dataset, tmp_path):
    out = tmp_path / "served"
    audioicl("run", "--data", tiny_dataset, "--model", f"openai:{NAME}", "--base-url", server,
             "--out", out, "-o", "concurrency=8")  # fmt: skip
    for k in (1, 2, 3):
        served, offline = answers(out, k), answers(vllm_run, k)
        assert list(served) == list(offline)
        for episode, line in served.items():
            assert line["status"] == "ok", line["error"]
            assert line["response"] == offline[episode]["response"], episode
            assert line["usage"]["input_tokens"] == offline[episode]["usage"]["input_tokens"]


def test_a_prompt_the_engine_refuses_is_an_error_line(checkpoint, hf_run, tiny_dataset, tmp_path):
    # 180 tokens: the AudioCount prompts at k=2 fit, the AudioRemap ones (nine clips) do not
    out = tmp_path / "short"
    proc = audioicl(
        "run", "--data", tiny_dataset, "--model", f"vllm:{checkpoint}", "--out", out, "--k", "2",
        "--tasks", "AudioCount,AudioRemap", "-o", "dtype=fp32", "-o", "enforce_eager=true",
        "-o", "max_model_len=180",
        python=VLLM_PYTHON, env={**ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}, rc=None,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-4000:]
    lines = answers(out, 2)
    reference = answers(hf_run, 2)
    assert len(lines) == 6
    for episode, line in lines.items():
        if line["task"] == "AudioCount":
            assert line["status"] == "ok" and line["response"] == reference[episode]["response"]
        else:
            assert line["status"] == "error" and "vllm refused the prompt" in line["error"], line


def test_continuation_answers_equal_hf(checkpoint, tiny_dataset, tmp_path):
    """``--layout continuation`` (issue 42) through vLLM's engine: the text with the family's placeholders and
    no chat template, the same answers as the hf backend's, each cut at the end of its label line."""
    common = ("--data", tiny_dataset, "--model", "--k", "1,2", "--tasks", "AudioCount,AudioRemap",
              "--layout", "continuation", "-o", "dtype=fp32")  # fmt: skip
    runs = {}
    for kind, extra, python, env in (
        ("hf", ("-o", "device=cpu"), None, ENV),
        ("vllm", ("-o", "enforce_eager=true"), VLLM_PYTHON, {**ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}),
    ):
        out = tmp_path / kind
        args = [*common[:3], f"{kind}:{checkpoint}", *common[3:], "--out", out, *extra]
        audioicl("run", *args, **({"python": python} if python else {}), env=env)
        runs[kind] = {
            (line["id"], k): line["response"]
            for k in (1, 2)
            for line in map(
                json.loads, (out / f"{NAME}+continuation_results_k{k}.jsonl").read_text().splitlines()
            )
        }
    assert len(runs["hf"]) == 12 and runs["vllm"] == runs["hf"]  # 3 episodes of 2 tasks at k = 1, 2
    assert all("\n" not in answer for answer in runs["hf"].values())
