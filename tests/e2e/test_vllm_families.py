"""The ``vllm`` backend on the families beyond Qwen2-Audio (``tests/e2e/test_vllm_cli.py`` has that one), on the
CPU engine of ``scripts/vllm_env.sh`` (``AUDIOICL_VLLM_PYTHON``; skipped elsewhere).

Audio Flamingo 3 is the family whose tiny checkpoint vLLM-CPU loads: vLLM takes one clip per prompt of it
(``get_supported_mm_limits``), so a run in the single-clip layout answers every prompt, as ``hf:`` does in fp32,
and a run in the original layout makes each prompt an error line naming that limit, with the engine started for
one clip. The others cannot run there: Gemma 3n's vLLM model builds its timm vision tower (timm needs the
torchvision that ``.venv-vllm`` lacks) and its processor needs ``\\n\\n``-style tokens the tiny vocabulary lacks;
Gemma 4's and the Omni families' processors need torchvision; the vLLM-only families are remote code.
"""

from __future__ import annotations

import json
import os
import subprocess
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

NAME = "audio-flamingo-3-hf"
ENV = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
VLLM_ENV = {**ENV, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
audioicl = partial(cli.audioicl, timeout=900, env=ENV, rc=0)
VLLM_OPTIONS = ("-o", "dtype=fp32", "-o", "enforce_eager=true")


def lines(folder: Path) -> dict[str, dict]:
    """Every results line of the run in ``folder``, by file name and episode id."""
    found = {}
    for path in sorted(folder.glob("*_results_k*.jsonl")):
        for line in map(json.loads, path.read_text(encoding="utf-8").splitlines()):
            found[f"{path.name}/{line['id']}"] = line
    return found


def backend_info(folder: Path) -> dict:
    (record,) = folder.glob("*_run.json")
    return json.loads(record.read_text())["runs"][-1]["backend_info"]


@pytest.fixture(scope="module")
def flamingo(tmp_path_factory) -> Path:
    """The tiny Audio Flamingo 3 checkpoint with one 64-wide attention head (vLLM's CPU attention takes head
    sizes of 32 multiples from 64), its weights drawn again from the seed for that shape."""
    import transformers

    from audioicl.testing.families import TINY
    from audioicl.testing.weights import config_from, seeded_model

    folder = TINY.get("audioflamingo3").write(tmp_path_factory.mktemp("af3") / NAME, 0)
    data = json.loads((folder / "config.json").read_text())
    text = data["text_config"]
    text["num_attention_heads"] = text["num_key_value_heads"] = text["hidden_size"] // 64
    model = seeded_model(transformers.AudioFlamingo3ForConditionalGeneration, config_from(data), 0)
    model.generation_config = transformers.GenerationConfig.from_pretrained(folder)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def single_clip_runs(flamingo, tiny_dataset, tmp_path_factory) -> tuple[Path, Path]:
    hf, vllm = tmp_path_factory.mktemp("af3-hf"), tmp_path_factory.mktemp("af3-vllm")
    audioicl("run", "--data", tiny_dataset, "--model", f"hf:{flamingo}", "--out", hf, "--layout", "single-clip",
             "-o", "dtype=fp32", "-o", "device=cpu")  # fmt: skip
    audioicl("run", "--data", tiny_dataset, "--model", f"vllm:{flamingo}", "--out", vllm,
             "--layout", "single-clip", *VLLM_OPTIONS, python=VLLM_PYTHON, env=VLLM_ENV)  # fmt: skip
    return hf, vllm


def test_flamingo_single_clip_answers_equal_hf(single_clip_runs):
    hf, vllm = map(lines, single_clip_runs)
    assert list(vllm) == list(hf) and len(vllm) == 36  # 12 episodes at each of k = 1, 2, 3
    for key, line in vllm.items():
        assert line["status"] == "ok", line["error"]
        assert line["response"] == hf[key]["response"], key
        assert line["usage"]["input_tokens"] == hf[key]["usage"]["input_tokens"], key
        assert line["usage"]["audio_tokens"] == hf[key]["usage"]["audio_tokens"] > 0, key
    info = backend_info(single_clip_runs[1])
    assert info["model_clip_limit"] == 1 and info["limit_audio"] == 1


def test_flamingo_prompts_over_its_clip_limit_are_error_lines(flamingo, tiny_dataset, tmp_path):
    out = tmp_path / "original"
    proc = audioicl("run", "--data", tiny_dataset, "--model", f"vllm:{flamingo}", "--out", out, "--k", "1",
                    "--tasks", "AudioCount", *VLLM_OPTIONS, python=VLLM_PYTHON, env=VLLM_ENV, rc=None)  # fmt: skip
    assert proc.returncode == 1, proc.stderr[-4000:]
    found = lines(out)
    assert len(found) == 3  # the tiny dataset's AudioCount episodes at k = 1
    for line in found.values():
        assert line["status"] == "error"
        assert "the prompt holds 2 clips; Audio Flamingo 3 takes at most 1 per prompt" in line["error"], line
    assert (
        backend_info(out)["limit_audio"] == 1
    )  # the engine started for the model's one clip, not the run's two


RENDERING_CHECK = """
import numpy as np
from audioicl.backends.families import family_of
from audioicl.backends.rendering import TooManyClips
from audioicl.backends.vllm.backend import clips_per_prompt_limit, render_vllm_chat
from audioicl.prompts.chat import AudioPart, Chat, Message, TextPart

clip = AudioPart.of(np.zeros(160, dtype=np.float32), 16000)
chat = Chat("T", (Message("system", (TextPart("Be brief."),)),
                  Message("user", (TextPart("A: "), clip, TextPart(" B: "), clip, TextPart(" which?")))), ())
def template(messages, tokenize, add_generation_prompt):
    return "".join(f"<|{m['role']}|>{m['content']}<|end|>" for m in messages) + "<|assistant|>"
phi = family_of("phi4mm")
text, clips = render_vllm_chat(chat, phi, template, phi.vllm.placeholder, None)
assert text == "<|system|>Be brief.<|end|><|user|>A: <|audio_1|> B: <|audio_2|> which?<|end|><|assistant|>", text
assert len(clips) == 2 and clips_per_prompt_limit(phi) is None
kimi = family_of("kimi_audio")
assert clips_per_prompt_limit(kimi) == 1 and clips_per_prompt_limit(family_of("audioflamingo3")) == 1
try:
    render_vllm_chat(chat, kimi, template, kimi.vllm.placeholder, 1)
except TooManyClips as exc:
    assert "holds 2 clips; Kimi-Audio takes at most 1" in str(exc), exc
else:
    raise AssertionError("two clips passed a limit of one")
print("rendering ok")
"""


def test_numbered_placeholders_and_clip_limits():
    """vLLM's own rendering of a family with a numbered placeholder (Phi-4-multimodal's ``<|audio_1|>``), and
    the clip limits, in the vLLM environment (the backend module imports vllm)."""
    proc = subprocess.run(
        [VLLM_PYTHON, "-c", RENDERING_CHECK], capture_output=True, text=True, env=ENV, timeout=300
    )
    assert proc.returncode == 0 and "rendering ok" in proc.stdout, proc.stderr[-3000:]
