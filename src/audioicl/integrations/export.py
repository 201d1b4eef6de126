"""A dataset as Parquet for Hugging Face ``datasets`` and the hub's viewer (``audioicl export``; extra ``datasets``).

``export_dataset(ROOT, OUT)`` writes one configuration per meta file (``k1`` .. ``k5``, and ``k0`` when the
dataset has a k = 0 file), each with one split, ``test``, of one row per episode in meta order, as
``OUT/k<k>/test-NNNNN-of-NNNNN.parquet``; the Morse alphabet bank, when the dataset has it, is the
configuration ``morse_bank`` (26 rows, ``letter`` and ``audio``). ``OUT/README.md`` is the dataset card
(``ROOT/README.md``) under a YAML header whose ``configs:`` list names those files, as the hub's viewer and
``datasets.load_dataset(OUT, "k2")`` read it; ``OUT/export.json`` records what was exported from where.

A row (features in ``episode_features``):

- ``id``, ``task``, ``k``, ``label`` (the query's label), ``object`` (AnomalyDetect's machine, else None);
- ``episode``: the meta record, the very line of the meta file (``dataset.meta.dumps_episode``), from which
  ``dataset.meta.episode_from_json`` gives the ``Episode`` back;
- the episode's clips in presentation order (every demo's clips, then the query's): ``audio`` (the ``Audio``
  feature: the WAV file's bytes, unchanged, and its meta path), ``audio_path``, ``part`` (``demo`` or
  ``query``), ``demo`` (1..k; 0 for the query), ``role`` (multi-clip tasks' roles, else None) and
  ``shown_label`` (the label the prompt shows; None for the clip to answer).

Audio is stored as the files' bytes, so decoding a row's clip gives the samples ``audioicl run`` reads from
the file. A clip used by several episodes is stored in each of their rows (Parquet's compression does not
remove WAV duplicates): the export of k = 1..5 is about 2.5 times the dataset's size.

``materialize_export(EXPORT)`` turns an export back into a dataset folder, ``EXPORT/.audioicl-dataset/``, for
``audioicl run --data EXPORT``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from audioicl import __version__
from audioicl.dataset.download import SOURCE_FILE
from audioicl.dataset.manifest import read_fingerprint
from audioicl.dataset.meta import dumps_episode, find_meta_files, iter_meta, resolve_audio_path
from audioicl.errors import AudioICLError
from audioicl.files import check_output, write_atomic, writing
from audioicl.prompts.clips import MORSE_LETTERS, morse_bank_paths
from audioicl.records import Clip, Episode

SPLIT = "test"
MORSE_BANK_CONFIG = "morse_bank"
EXPORT_RECORD = "export.json"
EXPORT_FORMAT = "audioicl-export/1"
ROWS_PER_FILE = 250  # rows per Parquet file: a k = 5 row of long clips is a few MB


def config_name(k: int) -> str:
    return f"k{k}"


def episode_features() -> Any:
    """The ``datasets.Features`` of an episode row (see the module docstring)."""
    from datasets import Audio, Features, List, Value

    return Features(
        {
            "id": Value("string"),
            "task": Value("string"),
            "k": Value("int32"),
            "label": Value("string"),
            "object": Value("string"),
            "episode": Value("string"),
            "audio": List(Audio()),
            "audio_path": List(Value("string")),
            "part": List(Value("string")),
            "demo": List(Value("int32")),
            "role": List(Value("string")),
            "shown_label": List(Value("string")),
        }
    )


def bank_features() -> Any:
    from datasets import Audio, Features, Value

    return Features({"letter": Value("string"), "audio": Audio(), "audio_path": Value("string")})


def _clip_bytes(root: Path, audio_path: str) -> bytes:
    path = resolve_audio_path(root, audio_path)
    if not path.is_file():
        raise AudioICLError(f"clip {audio_path} is missing", file=str(path))
    return path.read_bytes()


def _bank_row(root: Path, letter_path: tuple[str, str]) -> dict[str, Any]:
    letter, path = letter_path
    return {"letter": letter, "audio": {"bytes": _clip_bytes(root, path), "path": path}, "audio_path": path}


def episode_row(root: Path, k: int, episode: Episode) -> dict[str, Any]:
    """The row of ``episode`` at ``k`` (see the module docstring)."""
    clips: list[tuple[str, int, Clip, str | None]] = []
    for number, demo in enumerate(episode.demos, start=1):
        clips += [("demo", number, clip, clip.label) for clip in demo.clips]
    target = len(episode.query.clips) - 1
    clips += [
        ("query", 0, clip, None if position == target else clip.label)
        for position, clip in enumerate(episode.query.clips)
    ]
    return {
        "id": episode.id,
        "task": episode.task,
        "k": k,
        "label": episode.query.label,
        "object": episode.object,
        "episode": dumps_episode(episode),
        "audio": [{"bytes": _clip_bytes(root, c.audio_path), "path": c.audio_path} for _, _, c, _ in clips],
        "audio_path": [c.audio_path for _, _, c, _ in clips],
        "part": [part for part, _, _, _ in clips],
        "demo": [number for _, number, _, _ in clips],
        "role": [c.role for _, _, c, _ in clips],
        "shown_label": [shown for _, _, _, shown in clips],
    }


@dataclass
class ExportSummary:
    out: Path
    configs: dict[str, int] = field(default_factory=dict)  # config → rows
    files: list[Path] = field(default_factory=list)
    bytes: int = 0


def _card_with_configs(card: str | None, configs: Sequence[str]) -> str:
    """``card`` (a README, maybe with its own YAML header) under a header whose ``configs:`` names each
    configuration's files; other header keys are kept."""
    header: dict[str, Any] = {}
    body = card or "# AudioICL-Bench\n"
    if body.startswith("---\n"):
        end = body.find("\n---", 4)
        if end != -1:
            loaded = yaml.safe_load(body[4:end])
            if isinstance(loaded, dict):
                header = loaded
            body = body[end + 4 :].lstrip("\n")
    header["configs"] = [
        {
            "config_name": name,
            "data_files": [{"split": SPLIT, "path": f"{name}/{SPLIT}-*.parquet"}],
            **({"default": True} if name == configs[0] else {}),
        }
        for name in configs
    ]
    note = (
        "\n\n## This export\n\nParquet written by `audioicl export` (one configuration per k, "
        f'`{MORSE_BANK_CONFIG}` for the Morse alphabet bank); `datasets.load_dataset(PATH, "k2")` loads one. '
        "Each row is an episode: `episode` is its meta record, `audio` its clips in presentation order (the WAV "
        "files' bytes), `shown_label` the label the prompt shows for each.\n"
    )
    dumped = yaml.safe_dump(header, sort_keys=False, allow_unicode=True)
    return f"---\n{dumped}---\n\n{body.rstrip()}{note}"


def _write_parquet(
    items: Sequence[Any], row: Callable[[Any], dict[str, Any]], features: Any, folder: Path, per_file: int
) -> list[Path]:
    """``row(item)`` for each item as Parquet files of ``per_file`` rows (only one file's rows in memory),
    with ``features`` in the schema's metadata as ``datasets`` writes them. Written through pyarrow:
    ``datasets``' own encoder would need torchcodec for audio it only has to store."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = features.arrow_schema
    folder.mkdir(parents=True, exist_ok=True)
    count = max(1, -(-len(items) // per_file))
    paths: list[Path] = []
    for index in range(count):
        chunk = [row(item) for item in items[index * per_file : (index + 1) * per_file]]
        path = folder / f"{SPLIT}-{index:05d}-of-{count:05d}.parquet"
        temporary = path.with_name(path.name + ".tmp")
        pq.write_table(pa.Table.from_pylist(chunk, schema=schema), str(temporary))
        os.replace(temporary, path)
        paths.append(path)
    return paths


def export_dataset(
    root: str | os.PathLike,
    out: str | os.PathLike,
    *,
    shots: Sequence[int] | None = None,
    rows_per_file: int = ROWS_PER_FILE,
    overwrite: bool = False,
) -> ExportSummary:
    """Write the dataset at ``root`` (its ``shots``' meta files; None: all) as Parquet into ``out``."""
    root, out = Path(root), Path(out)
    found = find_meta_files(root)
    if not found:
        raise AudioICLError("no meta file (meta/*_k<k>.jsonl) in the dataset", file=str(root))
    ks = sorted(found) if shots is None else sorted(set(shots))
    missing = [k for k in ks if k not in found]
    if missing:
        raise AudioICLError(
            f"the dataset has no meta file for k={', '.join(map(str, missing))} "
            f"(has k={', '.join(map(str, sorted(found)))})",
            file=str(root),
        )
    check_output(out, "--out", folder=True)
    if out.resolve().is_relative_to(root.resolve()):
        raise AudioICLError(f"--out {out} is inside the dataset root {root}; export into a folder outside it")
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise AudioICLError(f"--out {out} is not empty; give an empty folder (or --overwrite)")
        for name in [*map(config_name, ks), MORSE_BANK_CONFIG]:
            shutil.rmtree(out / name, ignore_errors=True)
    summary = ExportSummary(out)
    configs: list[str] = []
    features = episode_features()
    for k in ks:
        episodes = [line.episode for line in iter_meta(found[k])]
        paths = _write_parquet(
            episodes, partial(episode_row, root, k), features, out / config_name(k), rows_per_file
        )
        summary.configs[config_name(k)] = len(episodes)
        summary.files += paths
        configs.append(config_name(k))
    bank = list(zip(MORSE_LETTERS, morse_bank_paths(), strict=True))
    if all(resolve_audio_path(root, path).is_file() for _, path in bank):
        summary.files += _write_parquet(
            bank, partial(_bank_row, root), bank_features(), out / MORSE_BANK_CONFIG, rows_per_file
        )
        summary.configs[MORSE_BANK_CONFIG] = len(bank)
        configs.append(MORSE_BANK_CONFIG)
    card_path = root / "README.md"
    card = card_path.read_text(encoding="utf-8") if card_path.is_file() else None
    write_atomic(out / "README.md", _card_with_configs(card, configs))
    record = {
        "format": EXPORT_FORMAT,
        "audioicl": __version__,
        "source": str(root.resolve()),
        "source_fingerprint": read_fingerprint(root),
        "split": SPLIT,
        "configs": summary.configs,
        "meta_files": {config_name(k): found[k].relative_to(root).as_posix() for k in ks},
    }
    write_atomic(out / EXPORT_RECORD, json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    summary.bytes = sum(path.stat().st_size for path in summary.files)
    return summary


# --------------------------------------------------------------------------- an export back into a dataset folder

DATASET_CACHE = (
    ".audioicl-dataset"  # EXPORT/.audioicl-dataset/: the dataset folder an export materialises into
)
COMPLETE_MARKER = ".complete"  # written last, holding the sha256 of the export.json it was made from


def is_export(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder ``export_dataset`` wrote (it holds ``export.json``)."""
    return (Path(path) / EXPORT_RECORD).is_file()


def _read_export_record(export: Path) -> tuple[dict[str, Any], str]:
    raw = (export / EXPORT_RECORD).read_bytes()
    try:
        record = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AudioICLError(f"malformed export record: {exc}", file=str(export / EXPORT_RECORD)) from None
    if not isinstance(record, dict) or record.get("format") != EXPORT_FORMAT:
        raise AudioICLError(
            f"not an export of format {EXPORT_FORMAT} (format {record.get('format') if isinstance(record, dict) else None!r})",
            file=str(export / EXPORT_RECORD),
        )
    if not isinstance(record.get("meta_files"), dict) or not record["meta_files"]:
        raise AudioICLError("export record names no meta file", file=str(export / EXPORT_RECORD))
    return record, hashlib.sha256(raw).hexdigest()


def _parquet_rows(folder: Path, columns: Sequence[str]) -> Any:
    """The rows (as dicts of ``columns``) of ``folder``'s Parquet files, one file's at a time, in order."""
    import pyarrow.parquet as pq

    files = sorted(folder.glob(f"{SPLIT}-*.parquet"))
    if not files:
        raise AudioICLError(f"no {SPLIT}-*.parquet file in the export's {folder.name}", file=str(folder))
    for path in files:
        yield from pq.read_table(str(path), columns=list(columns)).to_pylist()


def _write_clip(root: Path, audio_path: str, data: bytes, written: dict[str, bytes]) -> None:
    """Write a clip once at its meta path (refused, by ``resolve_audio_path``'s rules, if it leaves ``root``);
    a clip stored in several rows must hold the same bytes in each."""
    if audio_path in written:
        if written[audio_path] != data:
            raise AudioICLError(f"the export holds two different clips for {audio_path}")
        return
    path = resolve_audio_path(root, audio_path)
    with writing(path):  # a full disk's error from write_bytes names no file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    written[audio_path] = data


def materialize_export(export: str | os.PathLike) -> Path:
    """The dataset folder of the export at ``export``: ``EXPORT/.audioicl-dataset/``, made once (reused while
    its marker names this ``export.json``). It holds each meta file byte for byte from the rows' ``episode``
    lines, each clip's bytes at its meta path, the Morse bank, the card as ``README.md``, and ``download.json``
    naming the export (its folder as ``repo``, the sha256 of its ``export.json`` as ``commit``), so the run
    record's ``dataset_source`` says where the data came from."""
    export = Path(export).resolve()
    record, digest = _read_export_record(export)
    target = export / DATASET_CACHE
    marker = target / COMPLETE_MARKER
    if marker.is_file() and marker.read_text(encoding="utf-8").strip() == digest:
        return target
    partial_folder = export / f"{DATASET_CACHE}.partial-{os.getpid()}"
    shutil.rmtree(partial_folder, ignore_errors=True)
    partial_folder.mkdir()
    try:
        written: dict[str, bytes] = {}
        for config, meta_path in record["meta_files"].items():
            if not isinstance(meta_path, str) or not re.fullmatch(r"k\d+", str(config)):
                raise AudioICLError(
                    f"bad meta file entry {config!r}: {meta_path!r}", file=str(export / EXPORT_RECORD)
                )
            lines = []
            for row in _parquet_rows(export / str(config), ("episode", "audio")):
                lines.append(row["episode"] + "\n")
                for clip in row["audio"]:
                    _write_clip(partial_folder, clip["path"], clip["bytes"], written)
            meta = resolve_audio_path(partial_folder, meta_path)
            meta.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(meta, "".join(lines))
        if (export / MORSE_BANK_CONFIG).is_dir():
            for row in _parquet_rows(export / MORSE_BANK_CONFIG, ("audio",)):
                _write_clip(partial_folder, row["audio"]["path"], row["audio"]["bytes"], written)
        if (export / "README.md").is_file():
            shutil.copyfile(export / "README.md", partial_folder / "README.md")
        source = {"repo": str(export), "commit": digest, "export": record, "complete": True}
        write_atomic(partial_folder / SOURCE_FILE, json.dumps(source, indent=2, ensure_ascii=False) + "\n")
        write_atomic(partial_folder / COMPLETE_MARKER, digest + "\n", durable=True)
        shutil.rmtree(target, ignore_errors=True)  # an incomplete one, or one of an earlier export.json
        try:
            partial_folder.rename(target)
        except OSError:  # another run made it meanwhile
            if not (marker.is_file() and marker.read_text(encoding="utf-8").strip() == digest):
                raise
    finally:
        shutil.rmtree(partial_folder, ignore_errors=True)
    return target
