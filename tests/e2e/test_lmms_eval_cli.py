"""The lmms-eval tasks shipped in the package (``audioicl lmms-eval-path``): the files are current and load; a
document's ``doc_to_messages`` is the chat ``audioicl run`` sends; a real lmms-eval run over an export, with a
chat model of the test's own, logs samples that ``audioicl import-lmms-eval`` turns into results files scoring
as lmms-eval's own metric.

The first tests need only PyYAML; the document tests need ``datasets`` (the ``datasets`` extra); the run needs
lmms-eval (the ``lmms-eval`` extra, in the environment ``scripts/integrations_env.sh`` makes). Each skips
without what it needs.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
from functools import partial
from pathlib import Path

import cli
import numpy as np
import pytest
import yaml
from helpers import read_jsonl

from audioicl.errors import AudioICLError
from audioicl.integrations import lmms_eval as ours
from audioicl.integrations.episodes import episode_prompts, run_options
from audioicl.integrations.lmms_eval_paths import DATA_ENV, TASKS_FOLDER
from audioicl.prompts.chat import TextPart, message_text

audioicl = partial(cli.audioicl, timeout=300)
TINY_TASKS = ("AudioCount", "MorseCode", "AudioRemap", "AnomalyDetect")


class _Loader(yaml.SafeLoader):
    """YAML as lmms-eval reads it, ``!function utils.NAME`` kept as the name."""


_Loader.add_constructor("!function", lambda loader, node: ("function", loader.construct_scalar(node)))


def _utils(monkeypatch, folder: Path):
    """The shipped ``utils.py`` imported as lmms-eval imports it (by file), reading ``folder``."""
    monkeypatch.setenv(DATA_ENV, str(folder))
    spec = importlib.util.spec_from_file_location("utils", TASKS_FOLDER / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lmms_eval_path_and_the_task_files(tmp_path, monkeypatch):
    proc = audioicl("lmms-eval-path", rc=0)
    assert Path(proc.stdout.strip()) == TASKS_FOLDER
    # the shipped files are what task_files() writes (regenerate with ours.write_task_files())
    files = ours.task_files()
    assert sorted(p.name for p in TASKS_FOLDER.iterdir() if p.is_file()) == sorted(files)
    for name, text in files.items():
        assert (TASKS_FOLDER / name).read_text(encoding="utf-8") == text, name
    assert len([n for n in files if re.fullmatch(r"audioicl_[a-z]+_k\d\.yaml", n)]) == 9 * 6
    assert len([n for n in files if re.fullmatch(r"audioicl_k\d\.yaml", n)]) == 6

    (tmp_path / "README.md").write_text("# export\n")
    utils = _utils(monkeypatch, tmp_path)
    assert str(tmp_path.resolve()) == utils.DATASET_PATH
    template = yaml.load((TASKS_FOLDER / ours.TEMPLATE).read_text(), Loader=_Loader)
    assert template["dataset_path"] == ("function", "utils.DATASET_PATH")
    assert template["generation_kwargs"]["max_new_tokens"] == 16
    assert template["metric_list"][0]["metric"] == ours.METRIC
    for key in ("doc_to_messages", "doc_to_visual", "doc_to_text", "doc_to_target", "process_results"):
        assert callable(getattr(utils, template[key][1].split(".", 1)[1]))
    for task in ours.benchmark_tasks():
        for k in ours.SHOTS:
            config = yaml.load((TASKS_FOLDER / f"{ours.task_name(task, k)}.yaml").read_text(), Loader=_Loader)
            assert config["include"] == ours.TEMPLATE
            assert config["dataset_name"] == (f"k{k}" if k else "k1")
            assert callable(getattr(utils, config["process_docs"][1].split(".", 1)[1]))
        group = yaml.load((TASKS_FOLDER / "audioicl_k2.yaml").read_text(), Loader=_Loader)
        assert ours.task_name(task, 2) in group["task"]

    monkeypatch.delenv(DATA_ENV)
    with pytest.raises(AudioICLError, match=DATA_ENV):
        ours.dataset_path()


@pytest.fixture(scope="module")
def exported(tiny_dataset, tmp_path_factory):
    pytest.importorskip("datasets")
    pytest.importorskip("pyarrow")
    from audioicl.integrations.export import export_dataset

    out = tmp_path_factory.mktemp("lmms") / "export"
    export_dataset(tiny_dataset, out)
    return out


def _docs(utils, folder: Path, task: str, k: int, cache: Path):
    import datasets

    raw = datasets.load_dataset(str(folder), f"k{k}" if k else "k1", split="test", cache_dir=str(cache))
    return getattr(utils, f"{ours.task_slug(task)}_docs_k{k}")(raw)


def _same_chat(messages, chat, system=True):
    want = [m for m in chat.messages if system or m.role != "system"]
    assert [m["role"] for m in messages] == [m.role for m in want]
    for got, wanted in zip(messages, want, strict=True):
        assert len(got["content"]) == len(wanted.content)
        for part, wanted_part in zip(got["content"], wanted.content, strict=True):
            if isinstance(wanted_part, TextPart):
                assert part == {"type": "text", "text": wanted_part.text}
            else:
                assert part["type"] == "audio"
                assert part["url"]["sampling_rate"] == 16_000
                assert np.array_equal(part["url"]["array"], wanted_part.wave)


def test_documents_are_the_run_chats(exported, tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))  # the Morse bank's load
    utils = _utils(monkeypatch, exported)
    for k in (0, 1, 3):
        expected = {item.episode.id: item for item in episode_prompts(run_options(tiny_dataset, shots=[k]))}
        for task in TINY_TASKS:
            docs = _docs(utils, exported, task, k, tmp_path / "cache")
            assert len(docs) == 3 and {d["task"] for d in docs} == {task}
            for doc in docs:
                item = expected[doc["id"]]
                assert doc["k"] == k and utils.doc_to_target(doc) == item.episode.query.label
                _same_chat(utils.doc_to_messages(doc, {}), item.prompt.chat)
                visual = utils.doc_to_visual(doc, {})
                assert len(visual) == len(list(item.prompt.chat.audio_parts()))
                text = utils.doc_to_text(doc, {})
                assert text.count("<audio>") == len(visual) and text.endswith("Label:")
                assert text == message_text(item.prompt.chat.messages[1])
    # the settings: no system message for models that bring their own; another family's system prompt
    doc = _docs(utils, exported, "AudioCount", 2, tmp_path / "cache")[0]
    item = next(i for i in episode_prompts(run_options(tiny_dataset, shots=[2])) if i.episode.id == doc["id"])
    _same_chat(utils.doc_to_messages(doc, {"system": False}), item.prompt.chat, system=False)
    qwen = utils.doc_to_messages(doc, {"family": "qwen2.5-omni"})
    assert qwen[0]["content"][0]["text"].startswith("You are Qwen, a virtual human")
    auto = utils.doc_to_messages(doc, {"family": "auto", "model": "Qwen/Qwen2-Audio-7B-Instruct"})
    assert auto[0]["content"][0]["text"] == "You are a helpful assistant."
    # lmms-eval's table of per-model settings, the default merged in, is read as the default
    table = {**ours.MODEL_SETTINGS, **ours.MODEL_SETTINGS["default"]}
    _same_chat(utils.doc_to_messages(doc, table), item.prompt.chat)
    no_audio = utils.doc_to_messages(doc, {"control": "no-audio"})
    assert all(part["type"] == "text" for m in no_audio for part in m["content"])
    with pytest.raises(AudioICLError, match="needs more than one document"):
        utils.doc_to_messages(doc, {"control": "swapped-query"})
    with pytest.raises(AudioICLError, match="unknown lmms_eval_specific_kwargs"):
        utils.doc_to_messages(doc, {"stlye": "general"})
    verdict = utils.process_results(doc, [f"  {doc['label']} "])[ours.METRIC]
    assert verdict == {
        "id": doc["id"],
        "task": "AudioCount",
        "k": 2,
        "gt": doc["label"],
        "response": doc["label"],
        "correct": True,
        "parsed": True,
    }
    assert utils.process_results(doc, ["three"])[ours.METRIC]["parsed"] is False


def test_lmms_eval_run_imports_and_scores_as_lmms_eval(exported, tiny_dataset, tmp_path, monkeypatch):
    pytest.importorskip("lmms_eval")
    monkeypatch.setenv(DATA_ENV, str(exported))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from lmms_eval import evaluator
    from lmms_eval.api.model import lmms
    from lmms_eval.loggers import EvaluationTracker
    from lmms_eval.protocol import ChatMessages
    from lmms_eval.tasks import TaskManager

    class LastLabel(lmms):
        """A chat model: answers the label shown last (right now and then)."""

        is_simple = False

        def __init__(self):
            super().__init__()
            self.asked: dict[tuple[str, str], list] = {}

        def generate_until(self, requests):
            answers = []
            for request in requests:
                _, doc_to_messages, gen_kwargs, doc_id, task, split = request.args
                doc = self.task_dict[task][split][doc_id]
                raw = doc_to_messages(doc)
                ChatMessages(messages=raw)  # lmms-eval's protocol accepts them
                self.asked[(task, doc["id"])] = raw
                assert gen_kwargs["max_new_tokens"] == 16 and gen_kwargs["until"] == []
                text = "".join(p["text"] for m in raw for p in m["content"] if p["type"] == "text")
                labels = re.findall(r"Label: (\S+)", text)
                answers.append(labels[-1] if labels else "")
            return answers

        def loglikelihood(self, requests):
            raise NotImplementedError

        def generate_until_multi_round(self, requests):
            raise NotImplementedError

    tasks = [ours.task_name(t, k) for t in TINY_TASKS for k in (0, 2)]
    model = LastLabel()
    tracker = EvaluationTracker(output_path=str(tmp_path / "lmms"))
    results = evaluator.simple_evaluate(
        model=model,
        model_args="pretrained=test-org/last-label",
        tasks=tasks,
        task_manager=TaskManager(include_path=str(TASKS_FOLDER)),
        log_samples=True,
        evaluation_tracker=tracker,
        datetime_str="2026-01-01T00-00-00",
    )
    samples = results.pop("samples")
    tracker.save_results_aggregated(results=results, samples=samples, datetime_str="2026-01-01T00-00-00")
    for name in results["configs"]:
        tracker.save_results_samples(task_name=name, samples=samples[name])

    # what the model was asked: the run's chats
    for k in (0, 2):
        for item in episode_prompts(run_options(tiny_dataset, shots=[k], tasks=list(TINY_TASKS))):
            _same_chat(model.asked[(ours.task_name(item.episode.task, k), item.episode.id)], item.prompt.chat)

    out = tmp_path / "results"
    audioicl("import-lmms-eval", tmp_path / "lmms", "--out", out, rc=0)
    assert sorted(p.name for p in out.iterdir()) == [
        "last-label_results_k0.jsonl",
        "last-label_results_k2.jsonl",
    ]
    lines = read_jsonl(out / "last-label_results_k2.jsonl")
    assert len(lines) == 12 and {x["source"] for x in lines} == {"lmms-eval"}
    audioicl("score", "--in", out, "--out", tmp_path / "summary.csv", "--data", tiny_dataset, rc=0)
    rows = list(csv.DictReader((tmp_path / "summary.csv").open(newline="")))
    assert len(rows) == len(tasks)
    for row in rows:
        task = ours.task_name(row["task"], int(row["shots"]))
        assert row["model"] == "last-label" and row["n"] == "3"
        assert row["accuracy"] == f"{results['results'][task][ours.METRIC + ',none']:.6f}"
    assert any(float(r["accuracy"]) > 0 for r in rows) and any(float(r["accuracy"]) < 1 for r in rows)


def test_import_lmms_eval_reads_samples_files_alone(tmp_path):
    """Without lmms-eval: samples files as lmms-eval 0.7.3 writes them (the metric's record in each line)."""
    run = tmp_path / "lmms" / "org__model"
    run.mkdir(parents=True)
    (run / "2026_results.json").write_text(
        json.dumps({"model_name": "org/model-x", "config": {"model": "m"}})
    )
    lines = [
        {"doc_id": i, "target": gt, "filtered_resps": resp, ours.METRIC: {"id": f"AudioICL0000{i + 1}",
         "task": "AudioCount", "k": 1, "gt": gt, "response": resp, "correct": gt == resp, "parsed": True}}
        for i, (gt, resp) in enumerate([("3", "3"), ("5", "2"), ("1", "1")])
    ]  # fmt: skip
    (run / "2026_samples_audioicl_audiocount_k1.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines)
    )
    (run / "2026_samples_other_task.jsonl").write_text('{"doc_id": 0}\n')  # another task's file: passed over
    out = tmp_path / "out"
    audioicl("import-lmms-eval", tmp_path / "lmms", "--out", out, rc=0)
    got = read_jsonl(out / "model-x_results_k1.jsonl")
    assert [(x["id"], x["task"], x["response"], x["gt"]) for x in got] == [
        ("AudioICL00001", "AudioCount", "3", "3"),
        ("AudioICL00002", "AudioCount", "2", "5"),
        ("AudioICL00003", "AudioCount", "1", "1"),
    ]
    audioicl("score", "--in", out, "--out", tmp_path / "s.csv", rc=0)
    assert "model-x,1,AudioCount,0.666667,3" in (tmp_path / "s.csv").read_text()
    refused = audioicl(
        "import-lmms-eval", run / "2026_samples_other_task.jsonl", "--out", tmp_path / "o2", rc=2
    )
    assert "not a sample of an audioicl task" in refused.stderr


def test_lmms_eval_command_with_its_dummy_model(exported, tmp_path):
    """``lmms-eval --include_path "$(audioicl lmms-eval-path)" ...`` as a user types it (lmms-eval's own
    ``dummy`` model: a simple model, which gets ``doc_to_visual`` and ``doc_to_text``), then import and score."""
    pytest.importorskip("lmms_eval")
    import os
    import shutil
    import subprocess
    import sys

    command = shutil.which("lmms-eval", path=str(Path(sys.executable).parent))
    assert command, "the lmms-eval command is not installed beside this python"
    env = {
        **os.environ,
        DATA_ENV: str(exported),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(tmp_path / "cache"),
    }
    args = [
        command, "--model", "dummy", "--model_args", "response=Anomalous",
        "--tasks", "audioicl_anomalydetect_k1,audioicl_audiocount_k0",
        "--include_path", audioicl("lmms-eval-path", rc=0).stdout.strip(),
        "--log_samples", "--output_path", str(tmp_path / "lmms"),
    ]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    (report,) = (tmp_path / "lmms").rglob("*_results.json")
    theirs = json.loads(report.read_text())["results"]
    out = tmp_path / "results"
    audioicl("import-lmms-eval", tmp_path / "lmms", "--out", out, "--name", "dummy", rc=0)
    audioicl("score", "--in", out, "--out", tmp_path / "summary.csv", rc=0)
    rows = {(r["task"], r["shots"]): r for r in csv.DictReader((tmp_path / "summary.csv").open(newline=""))}
    assert set(rows) == {("AnomalyDetect", "1"), ("AudioCount", "0")}
    assert rows[("AnomalyDetect", "1")]["accuracy"] == "0.333333"  # one query of three is anomalous
    for (task, k), row in rows.items():
        assert float(row["accuracy"]) == pytest.approx(
            theirs[ours.task_name(task, int(k))][ours.METRIC + ",none"]
        )
