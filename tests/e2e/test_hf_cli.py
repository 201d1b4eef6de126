"""A user's path with a checkpoint folder: ``audioicl run --model hf:DIR`` over a fresh build (every task,
k = 1..5), then ``score`` and ``report``, for each tiny family in the real checkpoint layout."""

from __future__ import annotations

import csv
import json
import shutil
from functools import partial

import cli
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("torchvision")

# The folder names of the real checkpoints: results files are named after the last path component (SPEC §3).
REAL_NAMES = {
    "qwen2-audio": "Qwen2-Audio-7B-Instruct",
    "qwen2.5-omni": "Qwen2.5-Omni-7B",
    "qwen3-omni": "Qwen3-Omni-30B-A3B-Instruct",
}
TASKS = 9


audioicl = partial(cli.audioicl, timeout=900, rc=0)


@pytest.mark.parametrize("family", sorted(REAL_NAMES))
def test_run_score_report(one_episode_each, tiny_checkpoints, tmp_path, family):
    checkpoint = tmp_path / REAL_NAMES[family]
    shutil.copytree(tiny_checkpoints[family], checkpoint)
    out = tmp_path / "results"
    model = f"hf:{checkpoint}"
    run = (
        "run",
        "--data",
        one_episode_each,
        "--model",
        model,
        "--out",
        out,
        "-o",
        "dtype=fp32",
        "-o",
        "device=cpu",
    )
    proc = audioicl(*run)
    name = REAL_NAMES[family]
    for k in range(1, 6):
        assert f"k={k}: {TASKS} written (0 errors)" in proc.stdout
        lines = [json.loads(x) for x in (out / f"{name}_results_k{k}.jsonl").read_text().splitlines()]
        assert len(lines) == TASKS and {x["status"] for x in lines} == {"ok"}
        assert all(isinstance(x["response"], str) and x["usage"]["audio_tokens"] > 0 for x in lines)
    record = json.loads((out / f"{name}_run.json").read_text())
    info = record["runs"][-1]["backend_info"]
    assert info["dtype"] == "float32" and info["device"] == "cpu" and info["transformers"]
    assert info["allocator"] == {"asked": "auto", "used": "default"}  # expandable segments are for CUDA
    # issue 41: transformers' hub kernels are off unless asked (no network fetch at load), and recorded
    assert info["hub_kernels"] in ("off", None)  # None: a transformers without them
    # the reuse path's switches, as the CPU resolves them: each batch decoded alone, clips encoded in generate
    assert info["decode_batches"] == {"asked": "auto", "used": 1}
    assert info["encode_ahead"] == {"asked": "auto", "used": False}
    spent = record["runs"][-1]["timing"]["backend_spent"]  # where this run's time went, what it computed
    assert spent["work"]["out_of_memory"] == 0 and spent["work"]["lm_tokens"] > 0
    assert spent["seconds"]["features"] > 0 and spent["seconds"]["generate"] > 0

    again = audioicl(*run)
    assert f"k=5: 0 written (0 errors), {TASKS} skipped" in again.stdout

    summary = tmp_path / "scores" / "summary.csv"
    audioicl("score", "--in", out, "--out", summary)
    with summary.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["model"], r["shots"]) for r in rows} == {(name, str(k)) for k in range(1, 6)}
    assert len(rows) == 5 * TASKS and all(r["n"] == "1" for r in rows)

    report = tmp_path / "report"
    audioicl("report", "--scores", summary, "--results", out, "--data", one_episode_each, "--out", report)
    assert name in (report / "report.md").read_text(encoding="utf-8")


def test_batches_decoded_together_and_clips_encoded_ahead_answer_as_the_defaults(
    one_episode_each, tiny_checkpoints, tmp_path
):
    """``-o decode_batches=3 -o encode_ahead=on`` through the CLI (on a GPU, what auto picks): the same answers
    as the CPU's defaults, and the run record says what ran."""
    checkpoint = tmp_path / REAL_NAMES["qwen2.5-omni"]
    shutil.copytree(tiny_checkpoints["qwen2.5-omni"], checkpoint)
    answers = {}
    for name, options in (("default", []), ("fast", ["-o", "decode_batches=3", "-o", "encode_ahead=on"])):
        out = tmp_path / name
        common = ["-o", "dtype=fp32", "-o", "device=cpu", "--batch-size", "4"]
        audioicl(
            "run", "--data", one_episode_each, "--model", f"hf:{checkpoint}", "--out", out, *common, *options
        )
        answers[name] = {
            (json.loads(line)["id"], k): json.loads(line)["response"]
            for k in range(1, 6)
            for line in (out / f"Qwen2.5-Omni-7B_results_k{k}.jsonl").read_text().splitlines()
        }
    assert answers["fast"] == answers["default"] and len(answers["default"]) == 5 * TASKS
    info = json.loads((tmp_path / "fast" / "Qwen2.5-Omni-7B_run.json").read_text())["runs"][-1][
        "backend_info"
    ]
    assert info["decode_batches"] == {"asked": 3, "used": 3}
    assert info["encode_ahead"] == {"asked": "on", "used": True}


def test_fused_kernels_give_the_answers_of_the_eager_ones(one_episode_each, tiny_checkpoints, tmp_path):
    """``-o fused=on``: the decoder's norms and MLPs through the Triton kernels (on the CPU through Triton's
    interpreter, which tests/conftest.py chooses where there is no GPU); the run record says which modules."""
    pytest.importorskip("triton")
    model = f"hf:{tiny_checkpoints['qwen2-audio']}"
    common = (
        "--data",
        one_episode_each,
        "--model",
        model,
        "--tasks",
        "AudioCount,AudioRemap",
        "-o",
        "dtype=fp32",
    )
    responses = {}
    for fused in ("off", "on"):
        out = tmp_path / fused
        audioicl("run", *common, "--out", out, "-o", "device=cpu", "-o", f"fused={fused}")
        name = tiny_checkpoints["qwen2-audio"].name
        responses[fused] = [
            json.loads(line)["response"]
            for k in range(1, 6)
            for line in (out / f"{name}_results_k{k}.jsonl").read_text().splitlines()
        ]
        info = json.loads((out / f"{name}_run.json").read_text())["runs"][-1]["backend_info"]
    assert len(responses["on"]) == 10 and responses["on"] == responses["off"]
    assert info["fused"]["asked"] == "on" and info["fused"]["used"] is True
    assert info["fused"]["modules"]["Qwen2MLP"] > 0 and info["fused"]["modules"]["Qwen2RMSNorm"] > 0


def test_fp8_is_its_own_condition_beside_the_native_run(one_episode_each, tiny_checkpoints, tmp_path):
    """``-o precision=fp8`` (issue 41): its lines are ``<model>+fp8``'s, in the same folder as the native run's,
    its run record says what ran, and ``score`` keeps the two apart; a resumed fp8 run finds its own lines."""
    model = f"hf:{tiny_checkpoints['qwen2-audio']}"
    name = tiny_checkpoints["qwen2-audio"].name
    out = tmp_path / "results"
    common = ("--data", one_episode_each, "--model", model, "--out", out, "--tasks", "AudioCount,MorseCode")
    cpu = ("-o", "dtype=fp32", "-o", "device=cpu")
    audioicl("run", *common, *cpu)
    fp8 = audioicl("run", *common, *cpu, "-o", "precision=fp8")
    assert "k=5: 2 written (0 errors)" in fp8.stdout
    for k in range(1, 6):
        assert len((out / f"{name}+fp8_results_k{k}.jsonl").read_text().splitlines()) == 2
        assert len((out / f"{name}_results_k{k}.jsonl").read_text().splitlines()) == 2
    info = json.loads((out / f"{name}+fp8_run.json").read_text())["runs"][-1]["backend_info"]
    assert info["precision"] == "fp8" and info["fp8_kernel"] == "scaled_mm" and info["fp8_layers"] > 0
    native = json.loads((out / f"{name}_run.json").read_text())["runs"][-1]["backend_info"]
    assert native["precision"] == "native" and "fp8_kernel" not in native
    again = audioicl("run", *common, *cpu, "-o", "precision=fp8")
    assert "k=5: 0 written (0 errors), 2 skipped" in again.stdout

    summary = tmp_path / "summary.csv"
    audioicl("score", "--in", out, "--out", summary)
    with summary.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["model"] for r in rows} == {name, f"{name}+fp8"}
    assert all(r["n"] == "1" for r in rows) and len(rows) == 2 * 5 * 2


def test_a_base_checkpoint_runs_by_continuation_beside_the_instruct_models_chat_run(
    one_episode_each, tiny_checkpoints, family_checkpoints, tmp_path
):
    """Issue 42: a tiny Qwen2-Audio base checkpoint (the family's real classes, no chat template in its files,
    named as the public base model) runs every task at k = 1..5 with ``--layout continuation``, 0 error lines,
    as ``<model>+continuation`` beside the instruct checkpoint's chat run in the same folder, through score and
    report; a chat layout on it is said to be the wrong format; a Gemma 4 checkpoint with no template is
    refused a chat layout before its weights load, naming the layout that runs it."""
    base = tmp_path / "Qwen2-Audio-7B"
    shutil.copytree(tiny_checkpoints["qwen2-audio"], base)
    (base / "chat_template.jinja").unlink()
    instruct = tmp_path / REAL_NAMES["qwen2-audio"]
    shutil.copytree(tiny_checkpoints["qwen2-audio"], instruct)
    out = tmp_path / "results"
    cpu = ("-o", "dtype=fp32", "-o", "device=cpu")
    # the instruct model's chat run beside it, at k = 1 (its every task and k are test_run_score_report's)
    audioicl("run", "--data", one_episode_each, "--model", f"hf:{instruct}", "--out", out, "--k", "1", *cpu)
    made = audioicl(
        "run",
        "--data",
        one_episode_each,
        "--model",
        f"hf:{base}",
        "--out",
        out,
        "--layout",
        "continuation",
        *cpu,
    )
    for k in range(1, 6):
        assert f"k={k}: {TASKS} written (0 errors)" in made.stdout
        lines = [
            json.loads(x)
            for x in (out / f"Qwen2-Audio-7B+continuation_results_k{k}.jsonl").read_text().splitlines()
        ]
        assert len(lines) == TASKS and {x["status"] for x in lines} == {"ok"}
        assert all("\n" not in x["response"] for x in lines)  # the answer ends with its label line
        assert all(x["prompt"].endswith("\nLabel:") and not x["prompt"].startswith("system") for x in lines)
    record = json.loads((out / "Qwen2-Audio-7B+continuation_run.json").read_text())
    assert record["settings"]["layout"] == record["settings"]["condition"] == "continuation"
    summary = tmp_path / "summary.csv"
    audioicl("score", "--in", out, "--out", summary)
    with summary.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["model"] for r in rows} == {REAL_NAMES["qwen2-audio"], "Qwen2-Audio-7B+continuation"}
    assert len(rows) == (1 + 5) * TASKS and all(r["n"] == "1" for r in rows)
    audioicl(
        "report",
        "--scores",
        summary,
        "--results",
        out,
        "--data",
        one_episode_each,
        "--out",
        tmp_path / "report",
    )
    assert "Qwen2-Audio-7B+continuation" in (tmp_path / "report" / "report.md").read_text(encoding="utf-8")

    chat = audioicl(
        "run",
        "--data",
        one_episode_each,
        "--model",
        f"hf:{base}",
        "--out",
        tmp_path / "chat",
        "--tasks",
        "AudioCount",
        "--k",
        "1",
        *cpu,
    )
    assert "is Qwen/Qwen2-Audio-7B, a base model" in chat.stderr and "--layout continuation" in chat.stderr

    gemma = tmp_path / "gemma-4-base"
    shutil.copytree(family_checkpoints["gemma4"], gemma)
    for template in gemma.glob("chat_template.*"):
        template.unlink()
    refused = cli.audioicl(
        "run", "--data", one_episode_each, "--model", f"hf:{gemma}", "--out", tmp_path / "g", *cpu
    )
    assert refused.returncode != 0 and not (tmp_path / "g").exists()
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("has no chat template (a pretrained base model?): run it with --layout continuation")
    )
