"""``manifest.json``: what a build wrote, with a hash for every file and one fingerprint for the dataset.

No timestamps or machine-dependent values beyond the options themselves, so that the same build gives the
same bytes. The fingerprint is the SHA-256 of the ``sha256sum``-style lines ``<sha256>  <path>\\n`` of every
listed file (``data/`` and ``meta/``), sorted by path: ``sha256sum`` can check the files, and renaming a
file changes the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from audioicl import __version__
from audioicl.errors import AudioICLError
from audioicl.files import write_atomic

MANIFEST_NAME = "manifest.json"


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the dataset root, with "/" separators
    sha256: str
    bytes: int


def fingerprint(entries: Iterable[FileEntry]) -> str:
    lines = "".join(f"{e.sha256}  {e.path}\n" for e in sorted(entries, key=lambda e: e.path))
    return hashlib.sha256(lines.encode()).hexdigest()


def file_entry(root: Path, path: str) -> FileEntry:
    data = (root / path).read_bytes()
    return FileEntry(path, hashlib.sha256(data).hexdigest(), len(data))


def write_manifest(
    root: Path, options: dict, entries: Iterable[FileEntry], totals: dict, corpora: dict | None = None
) -> str:
    """Write ``ROOT/manifest.json`` atomically; returns the dataset fingerprint. ``corpora``: the real corpora
    the build drew from (kind → record with licence and checksums), when it drew from any."""
    entries = sorted(entries, key=lambda e: e.path)
    digest = fingerprint(entries)
    document = {
        "tool": "audioicl",
        "version": __version__,
        "seed": options.get("seed"),
        "options": options,
        **({"corpora": corpora} if corpora else {}),
        "fingerprint": digest,
        "totals": totals,
        "files": [{"path": e.path, "sha256": e.sha256, "bytes": e.bytes} for e in entries],
    }
    write_atomic(root / MANIFEST_NAME, json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    return digest


def read_fingerprint(root: str | os.PathLike) -> str | None:
    """The fingerprint recorded in ``ROOT/manifest.json``, or None when the dataset has no manifest."""
    path = Path(root) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("fingerprint")
    except (json.JSONDecodeError, AttributeError) as exc:
        raise AudioICLError(
            f"manifest is not a JSON object with a fingerprint: {exc}", file=str(path)
        ) from exc
    return value if isinstance(value, str) else None
