"""AnomalyDetect: is a machine recording normal or anomalous, learned from normal/anomalous pairs."""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass

from audioicl.errors import AudioICLError
from audioicl.records import Clip, Demo, Episode, Query
from audioicl.sources.banks import MachineClip

from .base import TASKS, TaskSpec, episode_id, label_set, register
from .context import GenContext, PlannedEpisode, PlannedFile, TaskGenerator

MACHINE_TYPES = ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")
ANOMALY_LABELS = label_set({"Normal", "Anomalous"}, "Normal or Anomalous")
DEMO_POOL = (40, 20)  # normal and anomalous recordings per machine type that demos are drawn from


def _query_plan(ctx: GenContext, task: str) -> tuple[tuple[str, bool], ...]:
    """(machine type, anomalous?) of every episode's query: balanced over types and over Normal/Anomalous
    (``--label-prior balanced``) or drawn per episode with probability 1/2 (the original's rule)."""
    types = ctx.sources.machines.types
    plan = []
    for index in range(ctx.options.episodes):
        if ctx.options.label_prior == "balanced":
            machine = ctx.balanced(task, "machine", types, index)
            anomalous = ctx.balanced(task, "query", (False, True), index)
        else:
            rng = ctx.rng(task, index, "query")
            machine, anomalous = types[int(rng.integers(len(types)))], bool(rng.random() < 0.5)
        plan.append((machine, anomalous))
    return tuple(plan)


@dataclass(frozen=True)
class _DistinctPools:
    """``--queries distinct``: per (machine type, anomalous?) the recordings demos are drawn from, and each
    episode's query recording, reserved for it alone (never a demo, never another episode's query)."""

    demos: dict[tuple[str, bool], tuple[MachineClip, ...]]
    queries: dict[int, MachineClip]


@functools.lru_cache(maxsize=4)
def _distinct_pools(ctx: GenContext, task: str) -> _DistinctPools:
    plan = _query_plan(ctx, task)
    wanted = Counter(plan)
    demos: dict[tuple[str, bool], tuple[MachineClip, ...]] = {}
    queries: dict[int, MachineClip] = {}
    k = ctx.options.max_shots
    for machine in ctx.sources.machines.types:
        need = (wanted[machine, False], wanted[machine, True])
        pool = ctx.sources.machines.pool(machine, (DEMO_POOL[0] + need[0], DEMO_POOL[1] + need[1]))
        users = [i for i, (m, _) in enumerate(plan) if m == machine]
        if users and (len(pool.normals) < k + need[0] or len(pool.anomalies) < k + need[1]):
            raise AudioICLError(
                f"machine type {machine} has {len(pool.normals)} normal and {len(pool.anomalies)} anomalous "
                f"recordings; k = {k} demos and a query recording of its own for each of its episodes "
                f"(--queries distinct) need {k + need[0]} normal and {k + need[1]} anomalous ones "
                "(or use --queries original, fewer --episodes or a smaller k)",
                id=episode_id(TASKS.get(task), users[0], ctx.options.episodes),
            )
        for anomalous, clips in ((False, pool.normals), (True, pool.anomalies)):
            order = [int(i) for i in ctx.rng(task, "queries", machine, anomalous).permutation(len(clips))]
            episodes = [i for i, p in enumerate(plan) if p == (machine, anomalous)]
            queries.update((i, clips[j]) for i, j in zip(episodes, order, strict=False))
            demos[machine, anomalous] = tuple(clips[j] for j in sorted(order[len(episodes) :]))
    return _DistinctPools(demos, queries)


def _path(ctx: GenContext, machine: str, clip: MachineClip) -> str:
    """The clip's path: the pool's DCASE-style name (normals under ``train/``, ``..._normal_...``), or with
    neutral names an opaque one under ``test/`` (DCASE's test folder holds both kinds)."""
    if ctx.options.file_names == "original":
        return clip.path
    return f"data/anomalous/{machine}/test/section_00_{ctx.token('AnomalyDetect', clip.path)}.wav"


def _episode(ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    """One machine type; k (normal, anomalous) demo pairs and one query clip, all distinct recordings."""
    rng = ctx.rng(spec.name, index, "episode")
    machines = ctx.sources.machines
    original = ctx.options.label_prior == "original" and ctx.options.queries == "original"
    if original:
        machine, anomalous = machines.types[int(rng.integers(len(machines.types)))], None
    else:
        machine, anomalous = _query_plan(ctx, spec.name)[index]
    k = ctx.options.max_shots
    ep_id = episode_id(spec, index, ctx.options.episodes)
    if ctx.options.queries == "distinct":
        pools = _distinct_pools(ctx, spec.name)
        normal_pool, anomaly_pool = pools.demos[machine, False], pools.demos[machine, True]
        normals = [normal_pool[int(i)] for i in rng.choice(len(normal_pool), k, replace=False)]
        anomalies = [anomaly_pool[int(i)] for i in rng.choice(len(anomaly_pool), k, replace=False)]
        query_clip = pools.queries[index]
    else:
        pool = machines.pool(machine)
        if min(len(pool.normals), len(pool.anomalies)) < k + 1:
            raise AudioICLError(
                f"machine type {machine} has {len(pool.normals)} normal and {len(pool.anomalies)} anomalous "
                f"recordings; k = {k} needs {k + 1} of each",
                id=ep_id,
            )
        normals = [pool.normals[int(i)] for i in rng.choice(len(pool.normals), k + 1, replace=False)]
        anomalies = [pool.anomalies[int(i)] for i in rng.choice(len(pool.anomalies), k + 1, replace=False)]
        if anomalous is None:
            anomalous = rng.random() < 0.5
        query_clip = anomalies[k] if anomalous else normals[k]

    def file(clip: MachineClip) -> PlannedFile:
        return PlannedFile(_path(ctx, machine, clip), functools.partial(machines.render, machine, clip))

    order = ctx.rng(spec.name, index, "order")  # --anomaly-order shuffled: which clip of a pair comes first
    demos, files = [], []
    for n, a in zip(normals[:k], anomalies[:k], strict=True):
        pair = [(n, "Normal"), (a, "Anomalous")]
        if ctx.options.anomaly_order == "shuffled" and order.random() < 0.5:
            pair.reverse()
        demos.append(Demo(tuple(Clip(_path(ctx, machine, c), label, label) for c, label in pair), multi=True))
        files += [file(c) for c, _ in pair]
    label = "Anomalous" if query_clip.anomalous else "Normal"
    query = Query((Clip(_path(ctx, machine, query_clip), None, "Query"),), label=label, multi=True)
    files.append(file(query_clip))
    episode = Episode(ep_id, spec.name, tuple(demos), query, extra={"object": machine})
    return PlannedEpisode(episode, tuple(files))


_RECIPE = (
    "Multi-clip: 10 s recordings of one machine type per episode (ToyCar, ToyTrain, bearing, fan, gearbox, "
    "slider, valve; the record's `object`). Every demo is a pair (a Normal clip and an Anomalous clip) shown in "
    "an order drawn per demo (`--anomaly-order original`: always Normal first, so the last label before the "
    "query is always Anomalous); the query is one clip, labelled by how it was made. Machine types and query "
    "labels are balanced over the episodes (`--label-prior original`: drawn, Anomalous with probability 1/2). "
    f"Demos come from a pool of {DEMO_POOL[0]} normal and {DEMO_POOL[1]} anomalous recordings per type; each "
    "query recording is used by its episode alone (`--queries original`: queries come from the pool and recur)."
)
_DIFFERENCES = (
    "Machine sounds are synthesized (one machine unit per type, several anomaly kinds, nothing below 20 Hz: a "
    "fault is heard through audible sound, never as infrasound) unless `--source machines=DIR` (DCASE 2024 "
    "Task 2 layout) is given. Episodes are nested across k and a query never repeats a demo clip (the original "
    "drew each k afresh). Recordings have opaque names under `<type>/test/` (`--file-names original`: "
    "DCASE-style `..._normal_...` under `train/`, `..._anomaly_...` under `test/`)."
)

_INSTRUCTION = (
    "Each example below is a pair of recordings of the same kind of machine: one labelled Normal, one "
    "labelled Anomalous. Learn what distinguishes the anomalous sound from the normal one and label the "
    "query recording. Answer with exactly one word: Normal or Anomalous."
)

ANOMALY_DETECT = register(
    TaskSpec(
        "AnomalyDetect",
        8,
        "anomaly",
        ANOMALY_LABELS,
        "label",
        _INSTRUCTION,
        multi_clip=True,
        clip_labels={"Normal": ANOMALY_LABELS, "Anomalous": ANOMALY_LABELS, "Query": ANOMALY_LABELS},
        generator=TaskGenerator(_episode, _RECIPE, _DIFFERENCES, cost_ms=35.0),
    )
)
