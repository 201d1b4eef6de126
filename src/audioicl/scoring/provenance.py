"""Where each entry's numbers come from: ``<summary stem>_runs.json`` beside the summary, one object per entry
(model name as scored) with what its run records say: the model spec, the dataset's root and fingerprint, the
seed, the audioicl version and commit of its runs, its condition and the folders its lines came from. The report
shows it on its face (``analysis.report``); the leaderboard has its own reproducibility blocks. Results without a
run record (the original's files) get an entry that says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from audioicl.files import write_atomic
from audioicl.inference.options import CONDITION_MARK
from audioicl.inference.record import model_run_record

from .lines import ResultFile, entry_folders


@dataclass(frozen=True)
class Provenance:
    """One entry's origin: None where its records do not say (or disagree: then each value, joined)."""

    model: str
    spec: str | None
    data: str | None
    dataset_fingerprint: str | None
    seed: str | None
    audioicl_version: str | None
    git_commit: str | None
    condition: str
    folders: tuple[str, ...]

    def describe(self) -> str:
        """One line: ``hf:Qwen/... over /data/bench (fingerprint 3f2a9c1b…), seed 0, audioicl 0.1.0 (2381646)``."""
        if self.spec is None and self.data is None:
            return f"no run record (results from {', '.join(self.folders)})"
        data = self.data or "an unknown dataset"
        fingerprint = f" (fingerprint {self.dataset_fingerprint[:12]}…)" if self.dataset_fingerprint else ""
        commit = f" ({self.git_commit[:7]})" if self.git_commit else ""
        condition = f", condition {self.condition}" if self.condition else ""
        return (
            f"{self.spec or '?'} over {data}{fingerprint}, seed {self.seed if self.seed is not None else '?'}, "
            f"audioicl {self.audioicl_version or '?'}{commit}{condition}"
        )


def runs_path(summary: Path) -> Path:
    """Where the provenance goes: ``<summary stem>_runs.json`` next to the summary."""
    return Path(summary).with_name(f"{Path(summary).stem}_runs.json")


def _one(values: Sequence[Any]) -> str | None:
    """The value the records agree on; several joined with `` / ``; None when none says."""
    found = list(dict.fromkeys(str(v) for v in values if v is not None))
    return " / ".join(found) if found else None


def provenance(files: Sequence[ResultFile]) -> list[Provenance]:
    """Each entry's ``Provenance``, in the order entries are first met."""
    found = []
    for entry, held in entry_folders(files).items():
        records = [rec for folder, name in held if (rec := model_run_record(folder, name)) is not None]
        runs = [run for _, record in records for run in record.get("runs") or [] if isinstance(run, dict)]
        environments = [run.get("environment") or {} for run in runs]
        found.append(
            Provenance(
                model=entry,
                spec=_one([record.get("model") for _, record in records]),
                data=_one([record.get("data") for _, record in records]),
                dataset_fingerprint=_one([record.get("dataset_fingerprint") for _, record in records]),
                seed=_one([(record.get("settings") or {}).get("seed") for _, record in records]),
                audioicl_version=_one([run.get("audioicl_version") for run in runs]),
                git_commit=_one([env.get("git_commit") for env in environments]),
                condition=entry.partition(CONDITION_MARK)[2],
                folders=tuple(str(folder) for folder, _ in held),
            )
        )
    return found


def write_provenance(path: Path, entries: Sequence[Provenance]) -> None:
    write_atomic(path, json.dumps([asdict(e) for e in entries], indent=2, ensure_ascii=False) + "\n")


def read_provenance(path: Path) -> dict[str, Provenance]:
    """The provenance beside a summary, by entry; empty where there is none or it cannot be read."""
    try:
        listed = json.loads(Path(path).read_text(encoding="utf-8"))
        return {e["model"]: Provenance(**{**e, "folders": tuple(e["folders"])}) for e in listed}
    except (OSError, ValueError, TypeError, KeyError):
        return {}
