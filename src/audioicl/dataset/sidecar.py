"""The transcript sidecar: a built dataset's transcripts, in ``meta/transcripts.jsonl`` beside the meta files.

The builder writes one line per audio file, ``{"audio_path": ..., "transcript": ...}``, sorted by path, from
what it placed (the forms are ``audioicl.tasks.transcripts``'); the meta format is unchanged. A run under the
``transcript`` condition (or a probe) reads it back; a clip it lacks (the released dataset has no sidecar) is
perceived from the audio instead (``audioicl.perception.transcribe``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from audioicl.errors import AudioICLError
from audioicl.files import write_atomic

from .meta import META_DIRS

TRANSCRIPTS_NAME = "transcripts.jsonl"
TRANSCRIPTS_PATH = f"meta/{TRANSCRIPTS_NAME}"


# --------------------------------------------------------------------------- the sidecar file


def sidecar_path(root: str | os.PathLike) -> Path | None:
    """``transcripts.jsonl`` in the dataset's meta folder (or root), where there is one."""
    for sub in META_DIRS:
        path = Path(root) / sub / TRANSCRIPTS_NAME
        if path.is_file():
            return path
    return None


def dumps_sidecar(transcripts: Mapping[str, str]) -> str:
    """The sidecar's text: one ``{"audio_path", "transcript"}`` line per file, sorted by path."""
    return "".join(
        json.dumps({"audio_path": path, "transcript": transcripts[path]}, ensure_ascii=False) + "\n"
        for path in sorted(transcripts)
    )


def write_sidecar(root: Path, transcripts: Mapping[str, str]) -> str:
    """Write ``ROOT/meta/transcripts.jsonl``; returns its path relative to ``root``."""
    (root / TRANSCRIPTS_PATH).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(root / TRANSCRIPTS_PATH, dumps_sidecar(transcripts))
    return TRANSCRIPTS_PATH


@dataclass(frozen=True)
class Sidecar:
    """A dataset's built transcripts by audio path, and the file's sha256 (for run records)."""

    path: Path
    sha256: str
    transcripts: Mapping[str, str]


def load_sidecar(root: str | os.PathLike) -> Sidecar | None:
    """The dataset's sidecar, or None when it has none; a malformed line is an error naming it."""
    path = sidecar_path(root)
    if path is None:
        return None
    data = path.read_bytes()
    transcripts: dict[str, str] = {}
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            transcripts[str(entry["audio_path"])] = str(entry["transcript"])
        except (ValueError, KeyError, TypeError) as exc:
            raise AudioICLError(f"malformed transcript line: {exc}", file=str(path), line=number) from None
    return Sidecar(path, hashlib.sha256(data).hexdigest(), transcripts)
