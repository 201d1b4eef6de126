"""AudioICL-Bench as lmms-eval tasks (extra ``lmms-eval``; docs/lmms-eval.md).

The task files live in the package, in ``lmms_eval_tasks/`` (``audioicl lmms-eval-path`` prints the folder,
for ``lmms-eval --include_path``): one task per benchmark task and k, ``audioicl_<task>_k<k>``
(``audioicl_audiocount_k2``), a group ``audioicl_k<k>`` of the nine tasks at one k, a template they include
and ``utils.py``, which holds what the YAML files name (``!function utils....``) and reads the export's folder
from ``$AUDIOICL_LMMS_EVAL_DATA`` (the output of ``audioicl export``: the tasks read its Parquet configs
``k1`` .. ``k5``; k = 0 asks the queries of ``k1`` without demos, as ``audioicl run --k 0`` does).

A document is one episode (a row of the export). ``doc_to_messages`` gives it as one multi-audio chat: the
chat ``audioicl run`` sends, built by ``prompts.build.build_prompt`` from the row's meta record and the clips'
bytes (so the samples are those ``audioicl run`` reads from the files), each clip an audio part whose ``url``
is ``{"array": float32 samples, "sampling_rate": 16000}`` (the ``datasets`` convention lmms-eval's audio
models read). ``process_results`` scores the answer with audioicl's rule for the task (SPEC §5) into the
metric ``audioicl_accuracy``, whose per-sample value also carries the id, task, k, ground truth and response,
so that the logged samples (``--log_samples``) can be turned into results files
(``audioicl import-lmms-eval``). The prompt settings come from ``lmms_eval_specific_kwargs``: ``style``,
``layout``, ``family`` (the system prompt: a family name, or ``auto``: ``system_family`` of the ``model``
key), ``system`` (false: leave the system message out, for models that add their own), ``seed``,
``morse_bank`` (``auto``/``on``/``off``), ``control`` (``random-labels``, ``no-audio`` or ``noise-query``; the
conditions that need the whole file or transcripts are not offered) and ``prompts`` (a prompt set file).
"""

from __future__ import annotations

import io
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from audioicl import audio
from audioicl.dataset.meta import dumps_episode, episode_from_json
from audioicl.errors import AudioICLError
from audioicl.inference.runner import PromptMaker, StudySetup, Work
from audioicl.prompts.chat import AudioPart, Chat, TextPart, message_text
from audioicl.prompts.clips import MORSE_TASK, ClipStore
from audioicl.prompts.controls import CONTROLS
from audioicl.prompts.sets import PromptSet, load_prompt_set, system_family
from audioicl.records import Episode
from audioicl.scoring.rules import judge
from audioicl.tasks import TASKS
from audioicl.tasks.chance import order_tasks

from .episodes import run_options
from .lmms_eval_paths import DATA_ENV, TASKS_FOLDER

METRIC = "audioicl_accuracy"
SHOTS = (0, 1, 2, 3, 4, 5)
# The conditions a document can be asked under on its own (swapped-query needs the other episodes of its
# file, transcript the dataset's transcripts).
ROW_CONTROLS = ("random-labels", "no-audio", "noise-query")
DEFAULTS: Mapping[str, Any] = {
    "style": "specific",
    "layout": "original",
    "family": "default",
    "system": True,
    "seed": 0,
    "morse_bank": "auto",
    "control": None,
    "prompts": None,
}


def task_slug(task: str) -> str:
    """``AudioCountHard`` → ``audiocounthard`` (lmms-eval task names are lower case)."""
    return re.sub(r"[^a-z0-9]+", "_", task.lower()).strip("_")


def task_name(task: str, k: int) -> str:
    return f"audioicl_{task_slug(task)}_k{k}"


def benchmark_tasks() -> tuple[str, ...]:
    return order_tasks(set(TASKS.names()))


def dataset_path() -> str:
    """The export folder the tasks read: ``$AUDIOICL_LMMS_EVAL_DATA`` (checked: it must be an export)."""
    folder = os.environ.get(DATA_ENV)
    if not folder:
        raise AudioICLError(
            f"set {DATA_ENV} to the folder written by 'audioicl export ROOT --out FOLDER' "
            "(the audioicl lmms-eval tasks read its Parquet files)"
        )
    if not (Path(folder) / "README.md").is_file():
        raise AudioICLError(f"${DATA_ENV}={folder} is not an 'audioicl export' folder (no README.md in it)")
    return str(Path(folder).resolve())


# --------------------------------------------------------------------------- documents


def without_decoding(docs: Any) -> Any:
    """``docs`` (a ``datasets.Dataset`` of the export) with its audio kept as bytes: lmms-eval hands rows
    to the functions below, which decode the WAV bytes themselves (as ``audioicl run`` decodes the files)."""
    from datasets import Audio, List

    if "audio" in docs.features and getattr(docs.features["audio"], "feature", None) is not None:
        return docs.cast_column("audio", List(Audio(decode=False)))
    return docs


def task_docs(task: str, k: int) -> Callable[[Any], Any]:
    """``process_docs`` of one task at k: the task's rows, audio as bytes; at k = 0 (read from ``k1``)
    the episodes without their demos."""

    def process(docs: Any) -> Any:
        docs = without_decoding(docs).filter(lambda name: name == task, input_columns="task")
        if k == 0:
            docs = docs.map(_zero_shot, input_columns="episode")
        return docs

    process.__name__ = f"{task_slug(task)}_docs_k{k}"
    return process


def _zero_shot(record: str) -> dict[str, Any]:
    episode = episode_from_json(json.loads(record)).with_shots(0)
    return {"episode": dumps_episode(episode), "k": 0}


class RowClips(ClipStore):
    """The clips of one document: its WAV bytes by meta path, decoded as ``audio.load`` decodes a file
    (soundfile, float32, mono, resampled to 16 kHz with soxr)."""

    def __init__(self, files: Mapping[str, bytes]):
        super().__init__(".")
        self.files = files

    def load(self, audio_path: str) -> AudioPart:
        data = self.files.get(audio_path)
        if data is None:
            raise AudioICLError(f"the document has no clip {audio_path}")
        import soundfile as sf

        wave, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=False)
        wave = np.ascontiguousarray(audio.to_mono(wave), dtype=np.float32)
        return AudioPart.of(audio.resample(wave, rate, audio.SAMPLE_RATE), audio.SAMPLE_RATE)


def _row_files(row: Mapping[str, Any]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for path, clip in zip(row["audio_path"], row["audio"], strict=True):
        data = clip.get("bytes") if isinstance(clip, Mapping) else None
        if data is None:
            raise AudioICLError(
                f"clip {path} of {row.get('id')} has no bytes: load the export with the audio undecoded "
                "(utils.without_decoding)"
            )
        files[path] = data
    return files


_BANKS: dict[str, tuple[AudioPart, ...]] = {}


def morse_bank(folder: str | None, mode: str) -> tuple[AudioPart, ...]:
    """The export's Morse alphabet bank (its ``morse_bank`` configuration), loaded once per folder; empty
    with ``off``, or with ``auto`` when the export has none."""
    if mode == "off" or folder is None:
        return ()
    if folder not in _BANKS:
        if not (Path(folder) / "morse_bank").is_dir():
            if mode == "on":
                raise AudioICLError(
                    "morse_bank on, but the export has no morse_bank configuration", file=folder
                )
            _BANKS[folder] = ()
        else:
            import datasets

            cache = os.environ.get("HF_DATASETS_CACHE")  # read now: datasets read it at its import
            loaded = datasets.load_dataset(folder, "morse_bank", split="test", cache_dir=cache)
            rows = without_bank_decoding(loaded)
            clips = RowClips({row["audio_path"]: row["audio"]["bytes"] for row in rows})
            _BANKS[folder] = tuple(clips.load(row["audio_path"]) for row in rows)
    return _BANKS[folder]


def without_bank_decoding(docs: Any) -> Any:
    from datasets import Audio

    return docs.cast_column("audio", Audio(decode=False))


@dataclass(frozen=True)
class Settings:
    style: str = "specific"
    layout: str = "original"
    family: str = "default"
    system: bool = True
    seed: int = 0
    morse_bank: str = "auto"
    control: str | None = None
    prompts: str | None = None

    @classmethod
    def of(cls, kwargs: Mapping[str, Any] | None) -> Settings:
        # lmms-eval hands the entry of the model's name, or (for another model) the whole table with the
        # ``default`` entry's keys merged in: the per-model entries are then passed over
        given = {key: value for key, value in (kwargs or {}).items() if not isinstance(value, Mapping)}
        unknown = sorted(set(given) - set(DEFAULTS) - {"model", "pre_prompt", "post_prompt"})
        if unknown:
            raise AudioICLError(
                f"unknown lmms_eval_specific_kwargs {', '.join(unknown)} (known: {', '.join(DEFAULTS)})"
            )
        family = str(given.get("family", DEFAULTS["family"]))
        if family == "auto":
            family = system_family(str(given.get("model", "")))
        control = given.get("control") or None
        if control is not None and control not in ROW_CONTROLS:
            CONTROLS.get(control)  # an unknown name raises, listing the known ones
            raise AudioICLError(
                f"control {control} needs more than one document (the other episodes, or transcripts); "
                f"the lmms-eval tasks offer {', '.join(ROW_CONTROLS)}: run it with audioicl run or inspect"
            )
        return cls(
            style=str(given.get("style", DEFAULTS["style"])),
            layout=str(given.get("layout", DEFAULTS["layout"])),
            family=family,
            system=bool(given.get("system", True)),
            seed=int(given.get("seed", 0)),
            morse_bank=str(given.get("morse_bank", "auto")),
            control=control,
            prompts=given.get("prompts") or None,
        )


def doc_episode(row: Mapping[str, Any]) -> Episode:
    return episode_from_json(json.loads(row["episode"]))


def doc_chat(
    row: Mapping[str, Any], settings: Settings = Settings(), folder: str | None = None
) -> tuple[Chat, tuple[str, ...]]:
    """The chat ``audioicl run`` sends for the document's episode (and the clips' meta paths in order)."""
    episode = doc_episode(row)
    k = int(row.get("k", episode.k))
    options = run_options(
        folder or ".",
        style=settings.style,
        layout=settings.layout,
        seed=settings.seed,
        control=settings.control,
        morse_bank=settings.morse_bank,
        prompts=settings.prompts,
    )
    prompt_set = load_prompt_set(settings.prompts) if settings.prompts else PromptSet()
    bank = morse_bank(folder, settings.morse_bank) if episode.task == MORSE_TASK else ()
    control = CONTROLS.get(settings.control) if settings.control else None
    maker = PromptMaker(
        options, prompt_set, settings.family, bank, RowClips(_row_files(row)), None, StudySetup(control)
    )
    prepared = maker.prepare(Work(k, episode))
    if prepared.prompt is None:
        raise AudioICLError(f"cannot make the prompt: {prepared.error}", id=episode.id)
    return prepared.prompt.chat, prepared.prompt.audio_paths


def lmms_messages(chat: Chat, *, system: bool = True) -> list[dict[str, Any]]:
    """The chat as lmms-eval's messages (``protocol.ChatMessages``): text parts and audio parts in order."""
    messages: list[dict[str, Any]] = []
    for message in chat.messages:
        if message.role == "system" and not system:
            continue
        content: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            else:
                content.append({"type": "audio", "url": {"array": part.wave, "sampling_rate": part.sr}})
        messages.append({"role": message.role, "content": content})
    return messages


def _folder() -> str | None:
    return os.environ.get(DATA_ENV) or None


def doc_to_messages(
    doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None
) -> list:
    settings = Settings.of(lmms_eval_specific_kwargs)
    chat, _ = doc_chat(doc, settings, _folder())
    return lmms_messages(chat, system=settings.system)


def doc_to_visual(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> list:
    """The clips in presentation order (for lmms-eval's simple models, which take the media apart)."""
    chat, _ = doc_chat(doc, Settings.of(lmms_eval_specific_kwargs), _folder())
    return [{"array": part.wave, "sampling_rate": part.sr} for part in chat.audio_parts()]


def doc_to_text(doc: Mapping[str, Any], lmms_eval_specific_kwargs: Mapping[str, Any] | None = None) -> str:
    """The user turn's text with ``<audio>`` where each clip stands, without the system message (for
    lmms-eval's simple models, which lay out the media and their own system prompt themselves: not the
    protocol's interleaved prompt). The multi-turn layout gives each turn as ``role: text``."""
    chat, _ = doc_chat(doc, Settings.of(lmms_eval_specific_kwargs), _folder())
    turns = [message for message in chat.messages if message.role != "system"]
    if len(turns) == 1:
        return message_text(turns[0])
    return "\n".join(f"{message.role}: {message_text(message)}" for message in turns)


def doc_to_target(doc: Mapping[str, Any]) -> str:
    return str(doc["label"])


def process_results(doc: Mapping[str, Any], results: Sequence[Any]) -> dict[str, Any]:
    """audioicl's verdict on the first response, with what a results line needs."""
    response = results[0] if results else None
    if isinstance(response, list):  # lmms-eval hands a list per request for some filters
        response = response[0] if response else None
    text = response.strip() if isinstance(response, str) else None
    verdict = judge(str(doc["task"]), text, doc["label"])
    return {
        METRIC: {
            "id": doc["id"],
            "task": doc["task"],
            "k": int(doc["k"]),
            "gt": doc["label"],
            "response": text,
            "correct": bool(verdict.correct),
            "parsed": bool(verdict.parsed),
        }
    }


def aggregate_accuracy(items: Sequence[Mapping[str, Any]]) -> float:
    """The share of correct answers (audioicl's accuracy for one task and k)."""
    return sum(1 for item in items if item["correct"]) / len(items) if items else 0.0


# --------------------------------------------------------------------------- the task files

TEMPLATE = "_audioicl_template_yaml"
# Per lmms-eval model name: the prompt settings (``lmms_eval_specific_kwargs``). The Omni chat models of
# lmms-eval put their model card's system prompt first themselves, so the chat goes without its own.
# (lmms-eval's simple models, qwen2_audio among them, get ``doc_to_text`` without a system message.)
MODEL_SETTINGS: Mapping[str, Mapping[str, Any]] = {
    "default": {"style": "specific", "layout": "original", "family": "default", "system": True, "seed": 0},
    "qwen2_5_omni_chat": {"family": "qwen2.5-omni", "system": False},
    "qwen3_omni_chat": {"family": "qwen3-omni", "system": False},
}
_HEAD = "# Written by audioicl.integrations.lmms_eval.task_files(); do not edit (tests compare them).\n"


def _template() -> str:
    default = dict(MODEL_SETTINGS["default"])
    kwargs = "\n".join(
        f"  {model}: {json.dumps({**default, **settings})}" for model, settings in MODEL_SETTINGS.items()
    )
    return (
        _HEAD
        + "# The export folder comes from $AUDIOICL_LMMS_EVAL_DATA (utils.DATASET_PATH).\n"
        + "dataset_path: !function utils.DATASET_PATH\n"
        + "test_split: test\n"
        + "output_type: generate_until\n"
        + "doc_to_messages: !function utils.doc_to_messages\n"
        + "doc_to_visual: !function utils.doc_to_visual\n"
        + "doc_to_text: !function utils.doc_to_text\n"
        + "doc_to_target: !function utils.doc_to_target\n"
        + "process_results: !function utils.process_results\n"
        + "# SPEC 4: greedy, at most 16 new tokens, no stop sequence\n"
        + "generation_kwargs:\n"
        + "  max_new_tokens: 16\n"
        + "  temperature: 0\n"
        + "  do_sample: false\n"
        + "  num_beams: 1\n"
        + "  until: []\n"
        + "metric_list:\n"
        + f"  - metric: {METRIC}\n"
        + "    aggregation: !function utils.aggregate_accuracy\n"
        + "    higher_is_better: true\n"
        + "lmms_eval_specific_kwargs:\n"
        + kwargs
        + "\n"
        + "metadata:\n"
        + "  version: 1.0\n"
    )


def _task_yaml(task: str, k: int) -> str:
    source = f"k{k}" if k else "k1"  # k = 0: the queries of k = 1, asked without demos
    return (
        _HEAD
        + f"include: {TEMPLATE}\n"
        + f"task: {task_name(task, k)}\n"
        + f"tag: audioicl_{task_slug(task)}\n"
        + f"dataset_name: {source}\n"
        + f"process_docs: !function utils.{task_slug(task)}_docs_k{k}\n"
    )


def _group_yaml(k: int) -> str:
    members = "".join(f"  - {task_name(task, k)}\n" for task in benchmark_tasks())
    return (
        _HEAD
        + f"group: audioicl_k{k}\n"
        + "task:\n"
        + members
        + "aggregate_metric_list:\n"
        + f"  - metric: {METRIC}\n"
        + "    aggregation: mean\n"
        + "    weight_by_size: false\n"
        + "metadata:\n"
        + "  version: 1.0\n"
    )


UTILS = '''"""What the audioicl task files name (``!function utils....``): audioicl.integrations.lmms_eval's functions,
the export folder (``$AUDIOICL_LMMS_EVAL_DATA``) and a ``process_docs`` per task and k."""

from audioicl.integrations import lmms_eval as _audioicl
from audioicl.integrations.lmms_eval import (  # noqa: F401  (named by the YAML files)
    aggregate_accuracy,
    doc_to_messages,
    doc_to_target,
    doc_to_text,
    doc_to_visual,
    process_results,
)

DATASET_PATH = _audioicl.dataset_path()

for _task in _audioicl.benchmark_tasks():
    for _k in _audioicl.SHOTS:
        globals()[f"{_audioicl.task_slug(_task)}_docs_k{_k}"] = _audioicl.task_docs(_task, _k)
'''


def task_files() -> dict[str, str]:
    """File name → text of every file of ``lmms_eval_tasks/``."""
    files = {TEMPLATE: _template(), "utils.py": UTILS}
    for k in SHOTS:
        files[f"audioicl_k{k}.yaml"] = _group_yaml(k)
        for task in benchmark_tasks():
            files[f"{task_name(task, k)}.yaml"] = _task_yaml(task, k)
    return files


def write_task_files(folder: Path = TASKS_FOLDER) -> list[Path]:
    """(Re)write the task files (run after changing the tasks or the settings above)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in task_files().items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
