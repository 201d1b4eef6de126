"""The builder's validity flaws (docs/validity.md), measured on built datasets: one column per dataset root.

Every figure is read from what a build wrote (meta files and WAVs), not from the builder's internals, so the
same script measures a build of any version, or any dataset in the original layout whose audio is on disk:

- AudioRemap: accuracy of a solver that sees only clip durations (A, B, MIX; the demos tell it the gap),
  guessing uniformly among the patterns whose predicted MIX length fits; chance is 1/6.
- AnomalyDetect: accuracy of answering the last label shown before the query (recency), mean over k.
- AnomalyDetect: energy below 20 Hz (share of the clip's energy, dB) per machine type: the share of
  anomalous clips outside the range of that type's normal clips, and the ROC area (folded to 50-100 %).
- Recurring queries per task: query clips (by path, and by audio content) that serve two or more episodes,
  or that another episode of the task shows as a demo; distinct query labels for MorseCode.
- Label prior: the largest share of one query label per task.
- AudioCountHard: the background level of each clip (5th percentile of 20 ms frame RMS, dB) against its
  count: mean per-episode Pearson correlation and the regression slope over counts 1 -> 8.
- AudioLength / AudioLengthHard: clips with samples at full scale, the largest step into or out of a block
  of digital silence (a click where a cut has no fade), clips that start or end without a fade.
- Labels readable from file names: clips whose file name holds the label (or a remap pattern, or
  normal/anomaly words) and tasks whose folders sort the clips by label.

With ``--kinds N`` it also renders N takes of every anomaly kind with the checkout's machine synthesizer and
prints, per kind, how well energy below 20 Hz alone separates it from normal takes (ROC area folded to 50-100 %;
with 12 takes each, noise alone gives 50-70 %) and how often the oracle's
deviation rule (which measures nothing below 40 Hz) flags it.

    python benchmarks/validity_flaws.py BEFORE_ROOT AFTER_ROOT [--kinds 12]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from audioicl.dataset.meta import find_meta_files, read_meta
from audioicl.records import Clip, Episode

PATTERNS = ("AAB", "ABA", "BAB", "BAA", "ABB", "BBA")
FULL_SCALE = 32767
SILENCE_RUN = 160  # samples (10 ms) of exact zeros: a silence block, not a zero crossing
LOW_HZ = 20.0


@dataclass
class Dataset:
    root: Path
    by_k: dict[int, list[Episode]]

    @classmethod
    def open(cls, root: str) -> Dataset:
        metas = find_meta_files(root)
        return cls(Path(root), {k: read_meta(path) for k, path in metas.items()})

    def task(self, name: str, k: int | None = None) -> list[Episode]:
        k = max(self.by_k) if k is None else k
        return [e for e in self.by_k.get(k, []) if e.task == name]


_CACHE: dict[Path, np.ndarray] = {}


def pcm(path: Path) -> np.ndarray:
    """The file's samples as int16 (cached: several measurements read the same clips)."""
    if path not in _CACHE:
        _CACHE[path] = sf.read(str(path), dtype="int16", always_2d=False)[0]
    return _CACHE[path]


def seconds(root: Path, clip: Clip) -> float:
    return sf.info(str(root / clip.audio_path)).frames / 16000


# --------------------------------------------------------------------------------------------- measurements


def remap_duration_solver(ds: Dataset) -> float:
    """Expected accuracy of the duration-only solver at the largest k."""
    scores = []
    for ep in ds.task("AudioRemap"):
        a, b, mix = ep.query.clips
        da, db, dm = seconds(ds.root, a), seconds(ds.root, b), seconds(ds.root, mix)
        gaps = []
        for demo in ep.demos:
            ca, cb, cm = demo.clips
            pattern = "".join("A" if c == ca.label else "B" for c in cm.label or "")
            gaps.append(
                seconds(ds.root, cm)
                - pattern.count("A") * seconds(ds.root, ca)
                - pattern.count("B") * seconds(ds.root, cb)
            )
        gap = statistics.median(gaps) if gaps else 0.0
        error = {p: abs(p.count("A") * da + p.count("B") * db + gap - dm) for p in PATTERNS}
        best = min(error.values())
        fits = [p for p in PATTERNS if error[p] <= best + 1e-3]
        truth = "".join("A" if c == a.label else "B" for c in ep.query.label)
        scores.append(1.0 / len(fits) if truth in fits else 0.0)
    return float(np.mean(scores)) if scores else float("nan")


def anomaly_recency(ds: Dataset) -> float:
    hits = [
        ep.demos[-1].clips[-1].label == ep.query.label
        for k, episodes in ds.by_k.items()
        if k > 0
        for ep in episodes
        if ep.task == "AnomalyDetect"
    ]
    return float(np.mean(hits)) if hits else float("nan")


def anomaly_orders(ds: Dataset) -> str:
    orders = Counter(tuple(c.role for c in d.clips) for ep in ds.task("AnomalyDetect") for d in ep.demos)
    return ", ".join(f"{'-'.join(o)} {n}" for o, n in sorted(orders.items())) or "-"


def pcm16(wave: np.ndarray) -> np.ndarray:
    """A wave as a build writes it (16-bit PCM)."""
    return np.rint(np.clip(wave, -1.0, 1.0) * 32767.0)


def low_energy_db(wave: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(wave.astype(np.float64))) ** 2
    freqs = np.fft.rfftfreq(len(wave), 1 / 16000)
    return float(10 * np.log10(spectrum[freqs < LOW_HZ].sum() / spectrum.sum() + 1e-20))


def anomaly_low_frequency(ds: Dataset) -> tuple[float, float, str]:
    """(largest share of anomalous clips outside the normal range, its ROC area, that machine type)."""
    labels: dict[str, dict[str, str]] = defaultdict(dict)
    for episodes in ds.by_k.values():
        for ep in episodes:
            if ep.task != "AnomalyDetect":
                continue
            for demo in ep.demos:
                for clip in demo.clips:
                    labels[ep.object][clip.audio_path] = clip.label
            labels[ep.object][ep.query.target.audio_path] = ep.query.label
    worst = (0.0, 0.0, "-")
    for machine, clips in sorted(labels.items()):
        values = {path: low_energy_db(pcm(ds.root / path)) for path in clips}
        normal = np.array([v for p, v in values.items() if clips[p] == "Normal"])
        anomal = np.array([v for p, v in values.items() if clips[p] == "Anomalous"])
        if not normal.size or not anomal.size:
            continue
        outside = float(np.mean((anomal > normal.max()) | (anomal < normal.min())))
        accuracy = separability(normal, anomal)
        worst = max(worst, (outside, accuracy, machine))
    return worst


def separability(a: np.ndarray, b: np.ndarray) -> float:
    """How well one threshold on a value separates samples ``a`` from ``b``, either way round: the area
    under the ROC curve folded to 0.5..1 (1 = perfectly separated, 0.5 = not at all)."""
    greater = (b[:, None] > a[None, :]).mean() + 0.5 * (b[:, None] == a[None, :]).mean()
    return float(max(greater, 1.0 - greater))


def recurring_queries(ds: Dataset, task: str) -> tuple[int, int, int]:
    """(query clips serving two or more episodes by path; query clips whose audio another episode of the
    task also plays, as its query or a demo; distinct query clips)."""
    episodes = ds.task(task)
    by_path = Counter(ep.query.target.audio_path for ep in episodes)
    digest: dict[str, str] = {}

    def content(path: str) -> str:
        if path not in digest:
            digest[path] = hashlib.sha256(pcm(ds.root / path).tobytes()).hexdigest()
        return digest[path]

    users: dict[str, set[str]] = defaultdict(set)
    for ep in episodes:
        for clip in ep.clips():
            if clip.role in (None, "MIX", "Normal", "Anomalous", "Query"):
                users[content(clip.audio_path)].add(ep.id)
    shared = sum(1 for path in by_path if len(users[content(path)]) > 1)
    return sum(1 for n in by_path.values() if n > 1), shared, len(by_path)


def label_prior(ds: Dataset, task: str) -> tuple[float, str, int]:
    counts = Counter(ep.query.label for ep in ds.task(task))
    if not counts:
        return float("nan"), "-", 0
    label, n = counts.most_common(1)[0]
    return n / sum(counts.values()), label, len(counts)


def background_vs_count(ds: Dataset) -> tuple[float, float]:
    """(mean per-episode correlation of background level with count, dB from count 1 to 8 by regression)."""
    correlations, xs, ys = [], [], []
    for ep in ds.task("AudioCountHard"):
        counts, levels = [], []
        for clip, label in [(d.clips[0], d.label) for d in ep.demos] + [(ep.query.target, ep.query.label)]:
            wave = pcm(ds.root / clip.audio_path).astype(np.float64) / 32768
            frames = wave[: len(wave) // 320 * 320].reshape(-1, 320)
            level = 20 * np.log10(np.percentile(np.sqrt((frames**2).mean(axis=1)), 5) + 1e-9)
            counts.append(int(label))
            levels.append(level)
        if len(set(counts)) > 1:
            correlations.append(float(np.corrcoef(counts, levels)[0, 1]))
        xs += counts
        ys += [v - np.mean(levels) for v in levels]
    slope = float(np.polyfit(xs, ys, 1)[0]) if xs else float("nan")
    return float(np.mean(correlations)) if correlations else float("nan"), 7 * slope


def single_clips(ds: Dataset, task: str) -> list[str]:
    paths = {c.audio_path for ep in ds.task(task) for c in ep.clips()}
    return sorted(paths)


def full_scale(ds: Dataset, task: str) -> tuple[int, int, int, str]:
    """(clips with a full-scale sample, clips, most such samples in one clip, that clip)."""
    clipped, most, where = 0, 0, "-"
    paths = single_clips(ds, task)
    for path in paths:
        n = int(np.count_nonzero(np.abs(pcm(ds.root / path).astype(np.int32)) >= FULL_SCALE))
        clipped += n > 0
        if n > most:
            most, where = n, path
    return clipped, len(paths), most, where


def cut_steps(ds: Dataset, task: str) -> tuple[float, int, int, int]:
    """(largest step into/out of digital silence, clips with such a step > 0.1, clips whose first or last
    sample is above 0.01 (no fade at an edge), clips)."""
    largest, loud, unfaded = 0.0, 0, 0
    paths = single_clips(ds, task)
    for path in paths:
        x = pcm(ds.root / path).astype(np.float64) / 32767
        zero = np.concatenate([[False], x == 0, [False]])
        edges = np.flatnonzero(np.diff(zero.astype(np.int8)))
        steps = [0.0]
        for start, stop in zip(edges[::2], edges[1::2], strict=True):
            if stop - start >= SILENCE_RUN:
                if start > 0:
                    steps.append(abs(x[start - 1]))
                if stop < len(x):
                    steps.append(abs(x[stop]))
        largest = max(largest, max(steps))
        loud += max(steps) > 0.1
        unfaded += bool(len(x)) and max(abs(x[0]), abs(x[-1])) > 0.01
    return largest, loud, unfaded, len(paths)


def _tokens(path: str) -> set[str]:
    return {t.lower() for t in re.split(r"[^A-Za-z0-9]+", Path(path).stem) if t}


def labelled_clips(ep: Episode) -> list[tuple[Clip, str, Clip | None, Clip | None]]:
    """(clip, its answer label, the A and B references for a remap MIX) for every answer-bearing clip."""
    out = []
    for clips, label in [(d.clips, d.label) for d in ep.demos] + [(ep.query.clips, ep.query.label)]:
        if ep.task == "AnomalyDetect":
            out += [(c, c.label or label, None, None) for c in clips if c.role != "Query"]
            if clips[-1].role == "Query":
                out.append((clips[-1], label, None, None))
        elif ep.task == "AudioRemap":
            out.append((clips[-1], label or "", clips[0], clips[1]))
        else:
            out.append((clips[-1], label or "", None, None))
    return out


def readable_from_names(ds: Dataset, task: str) -> tuple[int, int, float]:
    """(clips whose name holds their label, clips, accuracy of guessing a clip's label from its folder)."""
    seen: dict[str, str] = {}
    readable = 0
    for ep in ds.task(task):
        for clip, label, a, b in labelled_clips(ep):
            if clip.audio_path in seen:
                continue
            seen[clip.audio_path] = label
            tokens = _tokens(clip.audio_path)
            name = clip.audio_path.lower()
            if a is not None and b is not None:
                pattern = "".join("A" if c == a.label else "B" for c in label)
                hit = pattern.lower() in tokens
            elif task == "AnomalyDetect":
                hit = (
                    ("anomal" in Path(name).name) if label == "Anomalous" else ("_normal" in Path(name).name)
                )
            else:
                hit = label.lower() in tokens
            readable += hit
    by_folder: dict[str, Counter] = defaultdict(Counter)
    for path, label in seen.items():
        by_folder[str(Path(path).parent)][label] += 1
    folder_guess = sum(c.most_common(1)[0][1] for c in by_folder.values()) / max(1, len(seen))
    overall = Counter(seen.values()).most_common(1)[0][1] / max(1, len(seen)) if seen else 0.0
    return readable, len(seen), folder_guess - overall


# --------------------------------------------------------------------------------------------- the table

SINGLE_QUERY_TASKS = ("AudioLength", "AudioLengthHard", "MorseCode", "AnomalyDetect")
ALL_TASKS = (
    "AudioCount",
    "AudioCountHard",
    "AudioOperator",
    "AudioLength",
    "AudioLengthHard",
    "AudioOperatorHard",
    "MorseCode",
    "AudioRemap",
    "AnomalyDetect",
)


def rows(ds: Dataset) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    add: Callable[[str, str], None] = lambda name, value: out.append((name, value))  # noqa: E731
    add("1. AudioRemap duration-only solver (chance 16.7 %)", f"{100 * remap_duration_solver(ds):.1f} %")
    add("2. AnomalyDetect recency solver (mean over k)", f"{100 * anomaly_recency(ds):.1f} %")
    add("2. AnomalyDetect demo orders (largest k)", anomaly_orders(ds))
    outside, accuracy, machine = anomaly_low_frequency(ds)
    add(
        "2. <20 Hz energy share: anomalies outside the normals' range (worst type)",
        f"{100 * outside:.0f} % ({machine}; AUC {100 * accuracy:.0f} %)",
    )
    for task in ALL_TASKS:
        by_path, shared, distinct = recurring_queries(ds, task)
        add(
            f"3. {task}: queries in >= 2 episodes (path / content) of distinct",
            f"{by_path} / {shared} of {distinct}",
        )
    morse = {ep.query.label for ep in ds.task("MorseCode")}
    add("3. MorseCode distinct query words", f"{len(morse)} of {len(ds.task('MorseCode'))}")
    for task in ALL_TASKS:
        share, label, n = label_prior(ds, task)
        add(f"4. {task}: max query label share (label; labels seen)", f"{100 * share:.1f} % ({label}; {n})")
    r, db = background_vs_count(ds)
    add("5. AudioCountHard background level vs count: r / dB 1->8", f"{r:.2f} / {db:+.1f} dB")
    for task in ("AudioLength", "AudioLengthHard"):
        clipped, n, most, where = full_scale(ds, task)
        add(
            f"6. {task}: clips at full scale (most samples)", f"{clipped} of {n} ({most}: {Path(where).name})"
        )
        largest, loud, unfaded, n = cut_steps(ds, task)
        add(
            f"6. {task}: max step at a cut / clips > 0.1 / unfaded edges",
            f"{largest:.2f} / {loud} / {unfaded} of {n}",
        )
    others = [full_scale(ds, t) for t in ALL_TASKS if t not in ("AudioLength", "AudioLengthHard")]
    add("6. other tasks: clips at full scale", f"{sum(o[0] for o in others)} of {sum(o[1] for o in others)}")
    for task in ALL_TASKS:
        readable, n, folder = readable_from_names(ds, task)
        add(f"7. {task}: label in file name / folder gain", f"{readable} of {n} / {100 * folder:+.0f} pts")
    return out


def synthesizer_kinds(per_kind: int, seed: int = 0) -> None:
    """Per anomaly kind of this checkout's machine synthesizer: how well energy below 20 Hz alone separates
    it from normal takes of the same unit, and how often the oracle's deviation rule (5 normal takes as the
    reference, measurements that start at 40-50 Hz) flags it: an anomaly it never flags is not heard."""
    from audioicl.perception.measure import ANOMALY_NORMAL_SPREAD, anomaly_features
    from audioicl.seeding import rng_for
    from audioicl.solvers.perceiving import DEVIATION_THRESHOLD, deviation_score
    from audioicl.synth import machines

    print(f"\n| machine | anomaly | <20 Hz AUC | flagged (normals flagged) |  ({per_kind} takes each)")
    print("|---|---|---|---|")
    for machine in machines.MACHINE_TYPES:
        unit = machines.machine_unit(machine, rng_for(seed, "machines", machine, "unit"))

        def takes(kind: str | None, unit=unit, machine=machine) -> list[np.ndarray]:
            return [
                machines.machine_clip(unit, rng_for(seed, "validity", machine, kind or "normal", i), kind)
                for i in range(per_kind + (5 if kind is None else 0))
            ]

        normals = takes(None)
        reference = np.stack([anomaly_features(w, 16000) for w in normals[:5]])
        test_normals = normals[5:]

        def flagged(waves: list[np.ndarray], reference=reference) -> float:
            return float(
                np.mean(
                    [
                        deviation_score(anomaly_features(w, 16000), reference, ANOMALY_NORMAL_SPREAD)
                        > DEVIATION_THRESHOLD
                        for w in waves
                    ]
                )
            )

        low_normal = np.array([low_energy_db(pcm16(w)) for w in test_normals])
        false_alarms = flagged(test_normals)
        for kind in machines.ANOMALY_KINDS[machine]:
            waves = takes(kind)
            accuracy = separability(low_normal, np.array([low_energy_db(pcm16(w)) for w in waves]))
            print(
                f"| {machine} | {kind} | {100 * accuracy:.0f} % | {100 * flagged(waves):.0f} % "
                f"({100 * false_alarms:.0f} %) |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("roots", nargs="*", help="dataset roots (audioicl build --out), one column each")
    parser.add_argument(
        "--kinds",
        type=int,
        default=0,
        metavar="N",
        help="also render N takes per anomaly kind with this checkout's synthesizer and measure each kind",
    )
    args = parser.parse_args()
    if args.kinds:
        synthesizer_kinds(args.kinds)
    if not args.roots:
        return
    columns = []
    for root in args.roots:
        columns.append(dict(rows(Dataset.open(root))))
        _CACHE.clear()
    names = list(columns[0])
    print("| measurement | " + " | ".join(Path(r).name for r in args.roots) + " |")
    print("|---|" + "---|" * len(args.roots))
    for name in names:
        print(f"| {name} | " + " | ".join(c.get(name, "-") for c in columns) + " |")


if __name__ == "__main__":
    main()
