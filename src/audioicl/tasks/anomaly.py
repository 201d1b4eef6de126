"""AnomalyDetect: is a machine recording normal or anomalous, learned from normal/anomalous pairs."""

from __future__ import annotations

import functools

from ..errors import AudioICLError
from ..records import Clip, Demo, Episode, Query
from ..sources import MachineClip
from .base import TaskSpec, episode_id, label_set, register
from .context import GenContext, PlannedEpisode, PlannedFile, TaskGenerator

MACHINE_TYPES = ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")
ANOMALY_LABELS = label_set({"Normal", "Anomalous"}, "Normal or Anomalous")


def _episode(ctx: GenContext, spec: TaskSpec, index: int) -> PlannedEpisode:
    """One machine type; k (normal, anomalous) demo pairs and one query clip, all distinct recordings."""
    rng = ctx.rng(spec.name, index, "episode")
    machines = ctx.sources.machines
    machine = machines.types[int(rng.integers(len(machines.types)))]
    pool = machines.pool(machine)
    k = ctx.options.max_shots
    ep_id = episode_id(spec, index, ctx.options.episodes)
    if min(len(pool.normals), len(pool.anomalies)) < k + 1:
        raise AudioICLError(
            f"machine type {machine} has {len(pool.normals)} normal and {len(pool.anomalies)} anomalous "
            f"recordings; k = {k} needs {k + 1} of each",
            id=ep_id,
        )
    normals = [pool.normals[int(i)] for i in rng.choice(len(pool.normals), k + 1, replace=False)]
    anomalies = [pool.anomalies[int(i)] for i in rng.choice(len(pool.anomalies), k + 1, replace=False)]
    query_clip = anomalies[k] if rng.random() < 0.5 else normals[k]

    def file(clip: MachineClip) -> PlannedFile:
        return PlannedFile(clip.path, functools.partial(machines.render, machine, clip))

    demos = tuple(
        Demo((Clip(n.path, "Normal", "Normal"), Clip(a.path, "Anomalous", "Anomalous")), multi=True)
        for n, a in zip(normals[:k], anomalies[:k], strict=True)
    )
    label = "Anomalous" if query_clip.anomalous else "Normal"
    query = Query((Clip(query_clip.path, None, "Query"),), label=label, multi=True)
    files = [file(c) for pair in zip(normals[:k], anomalies[:k], strict=True) for c in pair] + [
        file(query_clip)
    ]
    episode = Episode(ep_id, spec.name, demos, query, extra={"object": machine})
    return PlannedEpisode(episode, tuple(files))


_RECIPE = (
    "Multi-clip: 10 s recordings of one machine type per episode (ToyCar, ToyTrain, bearing, fan, gearbox, "
    "slider, valve; the record's `object`). Every demo is a pair (a Normal clip, an Anomalous clip); the query "
    "is one clip, Normal or Anomalous with probability 1/2, labelled by how it was made. Recordings come from a "
    "fixed pool per machine type (normals under `train/`, anomalies under `test/`, DCASE-style names) and are "
    "distinct within an episode."
)
_DIFFERENCES = (
    "Machine sounds are synthesized (one machine unit per type, several anomaly kinds) unless "
    "`--source machines=DIR` (DCASE 2024 Task 2 layout) is given. Episodes are nested across k and a query "
    "never repeats a demo clip (the original drew each k afresh)."
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
        generator=TaskGenerator(_episode, _RECIPE, _DIFFERENCES, cost_ms=20.0),
    )
)
