"""Meta files (``*_k{k}.jsonl``) exactly as the original writes them, and finding them in a dataset.

Reading then writing an original file reproduces it byte for byte: keys in the order id, task, extra
(e.g. ``object``), demos, query; ``ensure_ascii=False``; default separators; one record per line.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audioicl.errors import AudioICLError
from audioicl.files import write_atomic
from audioicl.records import Clip, Demo, Episode, Query

K_PATTERN = re.compile(r"_k(\d+)\.jsonl$")
META_DIRS = ("meta", ".")
NAME_MAX_BYTES = 255  # the longest file name (one path component) Linux, macOS and Windows allow
PATH_MAX_BYTES = 4096  # Linux's PATH_MAX: no longer path can be opened


@dataclass(frozen=True)
class MetaLine:
    """An episode with where it came from, for messages that name file and line."""

    episode: Episode
    file: Path
    line: int


# --------------------------------------------------------------------------- parsing


def _require(obj: dict, key: str, kind: type | tuple[type, ...], what: str, loc: dict) -> Any:
    if key not in obj:
        raise AudioICLError(f"{what} has no {key!r}", **loc)
    value = obj[key]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise AudioICLError(f"{what}: {key!r} must be {names}, got {type(value).__name__}", **loc)
    return value


def _optional_str(obj: dict, key: str, what: str, loc: dict) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise AudioICLError(f"{what}: {key!r} must be a string, got {type(value).__name__}", **loc)
    return value


def _clip(obj: Any, what: str, loc: dict) -> Clip:
    if not isinstance(obj, dict):
        raise AudioICLError(f"{what} must be an object, got {type(obj).__name__}", **loc)
    path = _require(obj, "audio_path", str, what, loc)
    label = _optional_str(obj, "label", what, loc)
    role = _optional_str(obj, "role", what, loc)
    extra = {k: v for k, v in obj.items() if k not in ("audio_path", "label", "role")}
    return Clip(audio_path=path, label=label, role=role, extra=extra)


def _clips(obj: dict, what: str, loc: dict) -> tuple[Clip, ...]:
    items = _require(obj, "clips", list, what, loc)
    if not items:
        raise AudioICLError(f"{what} has an empty 'clips' list", **loc)
    return tuple(_clip(c, f"{what} clip {i + 1}", loc) for i, c in enumerate(items))


def _demo(obj: Any, index: int, loc: dict) -> Demo:
    what = f"demo {index + 1}"
    if not isinstance(obj, dict):
        raise AudioICLError(f"{what} must be an object, got {type(obj).__name__}", **loc)
    if "clips" in obj:
        clips = _clips(obj, what, loc)
        if clips[-1].label is None:
            raise AudioICLError(f"{what}: its last clip has no label", **loc)
        return Demo(clips, multi=True, extra={k: v for k, v in obj.items() if k != "clips"})
    clip = _clip(obj, what, loc)
    if clip.label is None:
        raise AudioICLError(f"{what} has no 'label'", **loc)
    return Demo((clip,), multi=False)


def _query(obj: Any, loc: dict) -> Query:
    if not isinstance(obj, dict):
        raise AudioICLError(f"query must be an object, got {type(obj).__name__}", **loc)
    if "clips" in obj:
        clips = _clips(obj, "query", loc)
        label = _require(obj, "label", str, "query", loc)
        extra = {k: v for k, v in obj.items() if k not in ("clips", "label")}
        return Query(clips, label=label, multi=True, extra=extra)
    clip = _clip(obj, "query", loc)
    if clip.label is None:
        raise AudioICLError("query has no 'label'", **loc)
    return Query((clip,), label=clip.label, multi=False)


def episode_from_json(obj: Any, *, file: str | None = None, line: int | None = None) -> Episode:
    """Parse one decoded meta record; raises ``AudioICLError`` naming file, line and id."""
    loc: dict[str, Any] = {"file": file, "line": line}
    if not isinstance(obj, dict):
        raise AudioICLError(f"record must be a JSON object, got {type(obj).__name__}", **loc)
    raw_id = obj.get("id")
    if isinstance(raw_id, str):
        loc["id"] = raw_id
    ep_id = _require(obj, "id", str, "record", loc)
    task = _require(obj, "task", str, "record", loc)
    demos_raw = _require(obj, "demos", list, "record", loc)
    if "query" not in obj:
        raise AudioICLError("record has no 'query'", **loc)
    demos = tuple(_demo(d, i, loc) for i, d in enumerate(demos_raw))
    query = _query(obj["query"], loc)
    extra = {k: v for k, v in obj.items() if k not in ("id", "task", "demos", "query")}
    return Episode(id=ep_id, task=task, demos=demos, query=query, extra=extra)


# --------------------------------------------------------------------------- writing


def _clip_json(clip: Clip) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if clip.role is not None:
        out["role"] = clip.role
    out["audio_path"] = clip.audio_path
    if clip.label is not None:
        out["label"] = clip.label
    out.update(clip.extra)
    return out


def _demo_json(demo: Demo) -> dict[str, Any]:
    if demo.multi:
        return {"clips": [_clip_json(c) for c in demo.clips], **demo.extra}
    return _clip_json(demo.clips[0])


def _query_json(query: Query) -> dict[str, Any]:
    if query.multi:
        return {"clips": [_clip_json(c) for c in query.clips], "label": query.label, **query.extra}
    return _clip_json(query.clips[0])


def episode_to_json(ep: Episode) -> dict[str, Any]:
    return {
        "id": ep.id,
        "task": ep.task,
        **ep.extra,
        "demos": [_demo_json(d) for d in ep.demos],
        "query": _query_json(ep.query),
    }


def dumps_episode(ep: Episode) -> str:
    """One meta line without its newline, formatted exactly as the original."""
    return json.dumps(episode_to_json(ep), ensure_ascii=False)


# --------------------------------------------------------------------------- files


def k_of(path: str | os.PathLike) -> int:
    """The number of shots a meta file holds, from its name (``meta_k3.jsonl`` → 3)."""
    match = K_PATTERN.search(Path(path).name)
    if not match:
        raise AudioICLError("meta file name does not end in _k<k>.jsonl", file=str(path))
    return int(match.group(1))


def _parse_lines(path: Path) -> Iterator[MetaLine | AudioICLError]:
    """Each non-blank line of a meta file as an episode or as the problem that stops it from being one."""
    try:
        handle = path.open("rb")
    except OSError as exc:
        yield AudioICLError(f"cannot open meta file: {exc.strerror}", file=str(path))
        return
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError as exc:
                yield AudioICLError(f"not UTF-8 text: {exc.reason}", file=str(path), line=number)
                continue
            except json.JSONDecodeError as exc:
                text = raw.decode("utf-8")
                where = (
                    "at the end of the line (cut short?)"
                    if exc.pos >= len(text.rstrip())
                    else f"at column {exc.pos + 1}"
                )
                yield AudioICLError(
                    f"malformed JSON: {exc.msg} {where}",
                    file=str(path),
                    line=number,
                    id=id_in_broken_line(text),
                )
                continue
            except (ValueError, RecursionError) as exc:  # a number past 4,300 digits, nesting past the stack
                yield AudioICLError(
                    f"unreadable JSON: {json_limit_problem(exc)}",
                    file=str(path),
                    line=number,
                    id=id_in_broken_line(raw.decode("utf-8")),
                )
                continue
            try:
                yield MetaLine(episode_from_json(obj, file=str(path), line=number), path, number)
            except AudioICLError as exc:
                yield exc


def json_limit_problem(exc: Exception) -> str:
    """What stops the standard library from decoding valid-looking JSON (its ``ValueError`` or
    ``RecursionError``, not a ``JSONDecodeError``), in a few words."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if "digits" in str(exc):
        return "a number with more than 4,300 digits"
    return str(exc)


def id_in_broken_line(text: str, key: str = "id") -> str | None:
    """Best effort: the id of a line that is not valid JSON, so that its error message can name it."""
    match = re.search(re.escape(json.dumps(key)) + r'\s*:\s*"([^"\\]{1,200})"', text)
    return match[1] if match else None


def iter_meta(path: str | os.PathLike) -> Iterator[MetaLine]:
    """Episodes of one meta file, in order; blank lines are skipped, anything malformed raises."""
    for item in _parse_lines(Path(path)):
        if isinstance(item, AudioICLError):
            raise item
        yield item


def scan_meta(path: str | os.PathLike) -> tuple[list[MetaLine], list[AudioICLError]]:
    """Every good episode of a meta file and every bad line's problem: one bad line hides nothing else."""
    lines: list[MetaLine] = []
    problems: list[AudioICLError] = []
    for item in _parse_lines(Path(path)):
        (problems if isinstance(item, AudioICLError) else lines).append(item)
    return lines, problems


def read_meta(path: str | os.PathLike) -> list[Episode]:
    return [m.episode for m in iter_meta(path)]


def write_meta(path: str | os.PathLike, episodes: Iterable[Episode]) -> None:
    """Write a meta file atomically (temporary file, fsync, rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(dumps_episode(ep) + "\n" for ep in episodes), durable=True)


def find_meta_files(root: str | os.PathLike) -> dict[int, Path]:
    """The meta files of a dataset by k: ``ROOT/meta/*_k{k}.jsonl``, else ``ROOT/*_k{k}.jsonl``."""
    root = Path(root)
    if not root.is_dir():
        raise AudioICLError("dataset root is not a folder", file=str(root))
    for sub in META_DIRS:
        folder = root / sub
        if not folder.is_dir():
            continue
        found: dict[int, Path] = {}
        for path in sorted(folder.glob("*_k*.jsonl")):
            if not K_PATTERN.search(path.name):
                continue
            k = k_of(path)
            if k in found:
                raise AudioICLError(
                    f"two meta files for k={k}: {found[k].name} and {path.name}", file=str(folder)
                )
            found[k] = path
        if found:
            return dict(sorted(found.items()))
    hint = meant_root(root)
    raise AudioICLError(
        "no meta files (*_k<k>.jsonl) in the dataset root or its meta/ folder"
        + (f"; did you mean {hint}?" if hint is not None else ""),
        file=str(root),
    )


def _holds_meta(folder: Path) -> bool:
    """Whether ``folder`` has meta files (``*_k<k>.jsonl``) in it or in its ``meta/``."""
    return any(
        K_PATTERN.search(path.name)
        for sub in META_DIRS
        if (folder / sub).is_dir()
        for path in (folder / sub).glob("*_k*.jsonl")
    )


def meant_root(given: str | os.PathLike) -> Path | None:
    """The dataset root a user most likely meant by ``given``, which is not one or not the whole of one: the
    folder above ``ROOT/meta`` (whose clips lie beside it) or ``ROOT/data``, a folder above those, or the one
    folder inside ``given`` that is a dataset root (``--data .`` beside it). None: no such folder."""
    given = Path(given)
    for parent in list(given.parents)[:2]:
        if _holds_meta(parent) and (parent / "data").is_dir():
            return parent
    try:
        inside = [child for child in sorted(given.iterdir()) if child.is_dir() and _holds_meta(child)]
    except OSError:
        return None
    return inside[0] if len(inside) == 1 else None


def check_dataset_root(root: Path, metas: Mapping[int, Path]) -> None:
    """Refuse ``ROOT/meta`` given as the root (its meta files are found, but the clips lie beside it, not in
    it): ``run`` and ``validate`` alike, with the folder meant."""
    folder = root.resolve()
    at_top = any(path.parent.resolve() == folder for path in metas.values())
    if folder.name == "meta" and at_top and not (folder / "data").is_dir():
        meant = root.parent if root.name == "meta" else folder.parent
        raise AudioICLError(
            f"{root} is the meta/ folder of a dataset, whose clips lie beside it; did you mean {meant}?"
        )


def resolve_audio_path(root: str | os.PathLike, audio_path: str) -> Path:
    """The file a meta ``audio_path`` names, refusing absolute paths and paths that leave ``root``, and
    paths no file system can hold (a NUL, a name past 255 bytes, text that is no file name)."""
    if not isinstance(audio_path, str):
        raise AudioICLError(f"audio_path must be a string, got {type(audio_path).__name__}")
    if not audio_path:
        raise AudioICLError("empty audio_path")
    if os.path.isabs(audio_path) or audio_path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", audio_path):
        raise AudioICLError(f"audio_path is absolute: {audio_path}")
    parts = Path(audio_path).parts
    if ".." in parts:
        raise AudioICLError(f"audio_path leaves the dataset root: {audio_path}")
    if "\x00" in audio_path:
        raise AudioICLError(f"audio_path holds a NUL character: {audio_path!r}")
    try:
        names = [os.fsencode(name) for name in parts]
    except UnicodeEncodeError:
        raise AudioICLError(
            f"audio_path is not a file name here (unencodable text): {audio_path!r}"
        ) from None
    if any(len(name) > NAME_MAX_BYTES for name in names):
        raise AudioICLError(f"audio_path holds a name longer than 255 bytes: {audio_path[:100]}...")
    root = Path(root).resolve()
    full = (root / audio_path).resolve()
    if not full.is_relative_to(root):
        raise AudioICLError(f"audio_path leaves the dataset root through a link: {audio_path}")
    if len(os.fsencode(full)) >= PATH_MAX_BYTES:
        raise AudioICLError(f"audio_path is longer than a file system allows: {audio_path[:100]}...")
    return full
