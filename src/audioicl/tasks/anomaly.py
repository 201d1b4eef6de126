"""AnomalyDetect: is a machine recording normal or anomalous, learned from normal/anomalous pairs."""

from __future__ import annotations

from .base import TaskSpec, label_set, register

MACHINE_TYPES = ("ToyCar", "ToyTrain", "bearing", "fan", "gearbox", "slider", "valve")
ANOMALY_LABELS = label_set({"Normal", "Anomalous"}, "Normal or Anomalous")

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
    )
)
