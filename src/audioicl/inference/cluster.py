"""Data-parallel runs on a Ray cluster (``audioicl run ... --ray``): the run's shards as Ray tasks, then merged.

Each shard ``i/N`` is one Ray task calling ``runner.run`` with ``shard=i/N`` and its own backend (a model
per GPU: the task asks Ray for ``gpus`` GPUs; a built-in solver or an API client asks for one CPU). The
shards write into ``<OUT>.shards/<model>/shard-i-of-N/``, a folder beside OUT (not inside: the scorer
counts every results file under the folder it is given), and, once every shard is done, are merged as
``audioicl merge`` does into OUT, replacing the files an earlier ``--ray`` run of the same shards wrote there.
The shard folders stay: they are the run's logs. Running the same command again resumes each shard from
its log (Ray also reruns the task of a worker that died, which resumes the same way) and merges again; it
can add k or tasks like any run.

The cluster: ``RAY_ADDRESS`` (or ``address``) names an existing one (``ray start --head`` on the head node,
``ray start --address ...`` on the others; the dataset, the output folder and the model must be at the same
paths on every node, e.g. a shared file system); without it a local cluster is started for the run. Needs the
``ray`` extra.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from audioicl.backends.base import kind_of
from audioicl.errors import AudioICLError

from .options import RunOptions, Shard
from .record import model_run_record, run_record_name
from .results import MergedFile, merge_shards
from .runner import RunSummary, preflight, run


@dataclass(frozen=True)
class RayPlan:
    """``shards``: how many (None: one per GPU of the cluster for a GPU backend, else one per CPU);
    ``gpus``: GPUs per shard (None: 1 for a GPU backend on a cluster with GPUs, else 0);
    ``address``: the cluster (None: ``RAY_ADDRESS``, else a new local cluster of ``local_cpus`` CPUs)."""

    shards: int | None = None
    gpus: float | None = None
    address: str | None = None
    local_cpus: int | None = None


@dataclass(frozen=True)
class RayRun:
    summaries: tuple[RunSummary, ...]
    merged: tuple[MergedFile, ...]
    shard_root: Path

    @property
    def errors(self) -> int:
        return sum(summary.errors for summary in self.summaries)


def shard_root(options: RunOptions) -> Path:
    """Where the shards of ``options``' model live: beside OUT, never inside it."""
    out = options.out.resolve()
    return out.parent / f"{out.name}.shards" / options.model_name


def _run_shard(options: RunOptions) -> RunSummary:
    return run(options, report=lambda message: print(f"[shard {options.shard}] {message}", flush=True))


def _connect(ray: Any, plan: RayPlan) -> None:
    address = plan.address or os.environ.get("RAY_ADDRESS") or None
    if address:
        ray.init(address=address, log_to_driver=True)
    else:
        ray.init(num_cpus=plan.local_cpus, include_dashboard=False, log_to_driver=True)


def _shape(options: RunOptions, plan: RayPlan, resources: dict[str, float]) -> tuple[int, float]:
    gpu_backend = kind_of(options.model.backend).gpu  # a kind that wants a GPU per shard
    cluster_gpus = int(resources.get("GPU", 0))
    gpus = plan.gpus if plan.gpus is not None else (1.0 if gpu_backend and cluster_gpus else 0.0)
    if plan.shards is not None:
        shards = plan.shards
    elif gpus:
        shards = max(int(cluster_gpus // gpus), 1)
    else:
        shards = max(int(resources.get("CPU", 1)), 1)
    if shards < 1:
        raise AudioICLError(f"--ray-shards must be at least 1, got {shards}")
    return shards, gpus


def _folders(root: Path, shards: int) -> list[Path]:
    return [root / Shard(i, shards).folder for i in range(1, shards + 1)]


def _check_out(options: RunOptions, folders: list[Path]) -> None:
    """OUT may hold this model's files only from a merge of these same shard folders."""
    found = model_run_record(options.out, options.model_name) if options.out.is_dir() else None
    if found is None:
        return
    path, record = found
    merged_from = sorted(record.get("merged_from") or [])
    if merged_from != sorted(str(f.resolve()) for f in folders):
        raise AudioICLError(
            f"holds results of model {options.model_name!r} that are not a merge of the --ray shards in "
            f"{shard_root(options)} (a run without --ray, or with another number of shards); use another "
            "--out, or --name for a separate set of files",
            file=str(path),
        )


def merge_into(folders: list[Path], out: Path) -> list[MergedFile]:
    """``merge_shards`` into a fresh folder beside ``out`` (never inside: a merge cut short must leave no second
    copy for the scorer to count), then each file moved over its old version."""
    out.mkdir(parents=True, exist_ok=True)
    staging = out.resolve().parent / f".{out.resolve().name}.merging-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        merged = merge_shards(folders, staging)
        for path in sorted(staging.iterdir()):
            os.replace(path, out / path.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return [replace(m, path=out / m.path.name) for m in merged]


def run_on_ray(options: RunOptions, plan: RayPlan, report: Callable[[str], None] = print) -> RayRun:
    """Run ``options`` as shards on Ray and merge them into ``options.out``; see the module docstring."""
    if options.shard is not None:
        raise AudioICLError("--ray makes the shards itself; leave out --shard")
    preflight(options, report, model="name")  # the shards check again, each its share, and load the model
    try:
        import ray
    except ModuleNotFoundError as exc:
        raise AudioICLError("--ray needs the ray package: pip install 'audioicl[ray]'") from exc
    root = shard_root(options)
    if plan.shards is not None:  # refuse before starting anything
        _check_out(options, _folders(root, plan.shards))
    _connect(ray, plan)
    try:
        shards, gpus = _shape(options, plan, ray.cluster_resources())
        folders = _folders(root, shards)
        _check_out(options, folders)
        report(f"ray: {shards} shard(s), {gpus:g} GPU(s) each, logs in {root}")
        task = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=2)(_run_shard)
        refs = [task.remote(replace(options, out=root, shard=Shard(i, shards))) for i in range(1, shards + 1)]
        try:
            summaries = tuple(ray.get(refs))
        except ray.exceptions.RayTaskError as exc:  # a shard's own error, as one line
            if isinstance(exc.cause, AudioICLError):
                raise exc.cause from None
            raise
    finally:
        ray.shutdown()
    present = [folder for folder in folders if (folder / run_record_name(options.model_name)).is_file()]
    merged = merge_into(present, options.out) if present else []
    return RayRun(summaries, tuple(merged), root)
