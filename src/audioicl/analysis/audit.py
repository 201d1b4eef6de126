"""What a dataset gives away without listening to the rule: ``audioicl audit ROOT``.

Per task and k, on any dataset (ours, the released one, one built from real corpora), with or without its
audio:

- the **text-only floor**: the expected accuracy of ``builtin:text-only`` (everything a model sees but the
  audio) over its tie-breaks, run in-process on chats laid out without reading audio;
- the **label distribution** of the queries (entropy, majority label and share) and a **label prior**
  shortcut: each query answered with the most frequent query label of the other folds (5 folds, grouped
  by query clip, so a recurring clip never helps predict itself);
- **recurring clips**: query clips that serve several episodes (the episodes are then not independent),
  demo clips shown in several episodes, queries shown with their label as a demo (a **copy** shortcut
  when it is the episode's own demo), and **duplicate audio** under different names (by content hash);
- **labels in file names**: the query's label read from its file name by the best of a few rules (a token
  at a fixed position, the same spelled with the query's reference letters, naive Bayes over the path's
  tokens), chosen and scored by cross-validation grouped by query clip;
- **trivial audio features**: duration, RMS, background level and energy below 20 Hz of the query clip
  (``perception.measure.level_features``) as the only input, both inside the episode (the demos as training data:
  interpolation for numbers, nearest demo clip for categories, sum of the parts for AudioRemap's MIX) and
  across episodes (nearest neighbours, cross-validated and grouped by query clip).

A shortcut **fails** when it beats its baseline by more than ``margin`` points *and* significantly: an exact
one-sided binomial test of its hits against the baseline, with Holm's correction over every shortcut the
audit tests (family-wise error 5 %: a dataset without a shortcut fails with probability at most 5 %, however
small it is). A shortcut is tested only where it *could* be significant: a perfect score on its n episodes
(p = baseline^n) must pass the correction, so n must reach log(alpha / K) / log(baseline), K the number of
such shortcuts (Tarone's rule for discrete tests); below that it is reported as too few episodes to judge,
never failed. The baseline is uniform chance, except for the tasks whose published construction lets the
demo labels narrow the answer (AudioCount's distinct counts: elimination; the operator tasks: what the demo
values say about the operator and the value distribution of a op b): there the text-only floor is that
construction, reported as the floor and used as the baseline. A feature that is the task's own rule
(duration for the length tasks, RMS for the count tasks, whose total energy grows with every hit) is
reported, not judged.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from audioicl import audio
from audioicl.dataset.meta import find_meta_files, read_meta, resolve_audio_path
from audioicl.errors import AudioICLError
from audioicl.perception import measure as perception
from audioicl.prompts.build import build_prompt
from audioicl.prompts.clips import SilentClips
from audioicl.records import Episode
from audioicl.scoring.rules import judge
from audioicl.solvers.textonly import Seen, best_answers, weights_for
from audioicl.tasks import TASKS
from audioicl.tasks.chance import chance_level, order_tasks
from audioicl.tasks.remap import PATTERNS

from .compare import holm

DEFAULT_MARGIN = 5.0  # points above the baseline
ALPHA = 0.05  # family-wise: a dataset without a shortcut fails with probability at most 5 %
TEST = "exact one-sided binomial test against the baseline"
CORRECTION = "Holm, over every shortcut tested (family-wise error)"
FOLDS = 5
NEIGHBOURS = 9
NAME_POSITIONS = (0, 1, 2, 3, -1, -2, -3, -4)
FEATURES = ("duration", "rms", "floor", "low-freq")
PUBLISHED_FLOOR = {
    "AudioCount": "elimination: the query's count is one no demo has (distinct counts)",
    "AudioCountHard": "elimination: the query's count is one no demo has (distinct counts)",
    "AudioOperator": "the operator the demo values point to, and how often a op b takes each value",
    "AudioOperatorHard": "the operators the demo values point to, and how often the expressions take each value",
}
_ENERGY = "a clip's energy grows with every hit of the one sound"
_BALANCE = "every hit adds energy above 20 Hz, so the background's low share falls with the count"
_SILENCE = "silence is part of the rule (an all-silent clip is label 0)"
TASK_SIGNAL = {
    ("AudioLength", "duration"): "the rule itself (total duration)",
    ("AudioLengthHard", "duration"): "part of the rule (non-silent seconds)",
    **{("AudioLengthHard", name): _SILENCE for name in ("rms", "floor", "low-freq")},
    **{(task, "rms"): _ENERGY for task in ("AudioCount", "AudioCountHard")},
    **{(task, "low-freq"): _BALANCE for task in ("AudioCount", "AudioCountHard")},
}
REMAP_TASK = "AudioRemap"
SILENT = SilentClips()  # chats laid out without reading audio: the text-only solver needs none
MAX_EXAMPLES = 5


# --------------------------------------------------------------------------- the report's records


@dataclass(frozen=True)
class Shortcut:
    """One way to answer without learning the rule. ``accuracy`` None: not measurable here (no audio).

    Once the audit has tested it: ``baseline`` (what it is judged against), ``hits`` (its expected hits
    over tie-breaks, rounded down), ``p_value`` (exact one-sided binomial, hits against the baseline),
    ``adjusted_p`` (Holm), ``min_episodes`` (the n a perfect score needs to pass the correction; None: it
    cannot fail, the baseline plus the margin reaching 100 %) and ``status``: ``fail``, ``pass``, ``too
    few`` (fewer episodes than ``min_episodes``: not tested), ``not judged`` (the task's own signal or
    its published floor) or ``not measured``."""

    name: str
    accuracy: float | None
    n: int
    judged: bool
    note: str = ""
    baseline: float | None = None
    hits: int | None = None
    p_value: float | None = None
    adjusted_p: float | None = None
    min_episodes: int | None = None
    status: str = ""


@dataclass(frozen=True)
class LabelStats:
    entropy_bits: float
    max_bits: float | None  # log2 of the label space (None: open)
    majority: str
    majority_share: float
    distinct: int


@dataclass(frozen=True)
class Reuse:
    """How often clips serve several episodes: ``clips`` distinct of ``slots`` uses, ``recurring`` of them
    in two or more episodes, ``episodes`` that hold one, the most ``max_uses``, and an example."""

    clips: int
    slots: int
    recurring: int
    episodes: int
    max_uses: int
    example: str | None


@dataclass
class TaskAudit:
    task: str
    k: int
    episodes: int
    chance: float | None
    floor: float
    baseline: float
    floor_note: str  # why the floor is the baseline, or ""
    labels: LabelStats
    queries: Reuse
    demos: Reuse
    query_in_own_demos: int  # its own demos show the query clip with its label
    query_in_other_demos: int  # another episode of this k shows it as a labelled demo
    demo_order: str | None  # multi-clip demos: their most common order of labels, and how often
    beyond_normal: dict[str, str]  # AnomalyDetect, per feature: anomalous clips beyond every normal one
    shortcuts: list[Shortcut]
    failures: list[str] = field(default_factory=list)
    against: dict[str, float] = field(default_factory=dict)  # shortcut → what it is judged against
    min_episodes: int | None = None  # the n a perfect shortcut needs at this row's baseline
    verdict: str = ""  # FAIL, ok, or "too few" (no judged shortcut had enough episodes to be tested)

    def shortcut(self, name: str) -> Shortcut | None:
        return next((s for s in self.shortcuts if s.name == name), None)


@dataclass(frozen=True)
class Duplicates:
    """Audio files with the same content under different paths (decoded samples and rate hashed): how many,
    some examples with what each name is used as (``task role label``), the episodes whose query has the
    content of one of their own demos under another name (``own_demo``: the answer shown, a failure), and the
    contents that carry two labels in one task (``conflicts``: a failure)."""

    files: int
    contents: int
    groups: int
    examples: tuple[tuple[str, ...], ...]
    own_demo: tuple[str, ...] = ()  # "task k=K id: query = demo path"
    conflicts: tuple[str, ...] = ()  # "task: path (label a) = path (label b)"

    @property
    def failures(self) -> tuple[str, ...]:
        return (
            *(f"query has the content of its own demo: {found}" for found in self.own_demo),
            *(f"one content, two labels: {found}" for found in self.conflicts),
        )


@dataclass(frozen=True)
class Testing:
    """How the audit decides: the test, the correction, the family-wise level ``alpha``, how many
    shortcuts were ``tested`` of the ``judged`` ones measured, and the least p value a perfect score must
    be able to reach (``threshold`` = alpha / K, Tarone's K) to be tested at all."""

    test: str
    correction: str
    alpha: float
    judged: int
    tested: int
    too_few: int
    threshold: float
    minimum: str  # the rule for the minimum n, in words


@dataclass
class AuditReport:
    root: str
    margin: float
    clips: int
    decoded: int  # clips whose audio was read (0: paths only)
    tasks: list[TaskAudit]
    duplicates: Duplicates | None
    testing: Testing | None = None

    @property
    def ok(self) -> bool:
        return not any(t.failures for t in self.tasks) and not (self.duplicates and self.duplicates.failures)

    @property
    def paths_only(self) -> bool:
        return self.decoded == 0

    def to_json(self) -> dict:
        return {"ok": self.ok, "paths_only": self.paths_only, **asdict(self)}


# --------------------------------------------------------------------------- clips


@dataclass(frozen=True)
class ClipInfo:
    key: str  # content hash when decoded, else "path:<audio_path>"
    features: perception.LevelFeatures | None


def _measure(args: tuple[str, str]) -> ClipInfo:
    root, rel = args
    try:
        path = resolve_audio_path(root, rel)
        if not path.is_file():
            return ClipInfo("path:" + rel, None)
        wave, sr = audio.load(path, sr=None)
    except AudioICLError:
        return ClipInfo("path:" + rel, None)
    digest = hashlib.blake2b(sr.to_bytes(4, "little") + wave.astype("<f4").tobytes(), digest_size=16)
    return ClipInfo(digest.hexdigest(), perception.level_features(wave, sr))


def measure_clips(root: Path, paths: Sequence[str], workers: int | None = None) -> dict[str, ClipInfo]:
    """Content key and level features of every clip (paths-only keys where the audio is not there)."""
    root_s = str(Path(root))
    present = [p for p in paths if _exists(root_s, p)]
    found = set(present)
    infos = {p: ClipInfo("path:" + p, None) for p in paths if p not in found}
    workers = min(workers or os.cpu_count() or 1, max(1, len(present) // 64))
    jobs = [(root_s, p) for p in present]
    if workers < 2:
        measured = list(map(_measure, jobs))
    else:
        context = multiprocessing.get_context(
            "fork" if "fork" in multiprocessing.get_all_start_methods() else None
        )
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            measured = list(pool.map(_measure, jobs, chunksize=32))
    infos.update(zip(present, measured, strict=True))
    return infos


def _exists(root: str, rel: str) -> bool:
    try:
        return resolve_audio_path(root, rel).is_file()
    except AudioICLError:
        return False


# Task families whose clip's label depends on the rest of its episode (a remap's letters name the references'
# order), not on the clip alone: one content may rightly carry several labels there.
LABEL_FROM_CONTEXT = frozenset({"remap"})


def _uses(by_k: dict[int, list[Episode]]) -> dict[str, set[tuple[str, str, str]]]:
    """audio path → what it is used as: (task, role, label)."""
    uses: dict[str, set[tuple[str, str, str]]] = defaultdict(set)
    for episodes in by_k.values():
        for ep in episodes:
            for demo in ep.demos:
                for clip in demo.clips:
                    uses[clip.audio_path].add((ep.task, "demo", str(clip.label)))
            for clip in ep.query.clips:
                uses[clip.audio_path].add((ep.task, "query", str(clip.label)))
    return uses


def _own_demo_copies(by_k: dict[int, list[Episode]], infos: dict[str, ClipInfo]) -> list[str]:
    """Episodes whose query target has the bytes of one of their own demo clips under another name."""
    found = []
    for k, episodes in by_k.items():
        for ep in episodes:
            target = ep.query.target.audio_path
            key = infos[target].key if target in infos and infos[target].features is not None else None
            if key is None:
                continue
            for demo in ep.demos:
                for clip in demo.clips:
                    info = infos.get(clip.audio_path)
                    if clip.audio_path != target and info is not None and info.key == key:
                        found.append(f"{ep.task} k={k} {ep.id}: {target} = {clip.audio_path}")
    return found


def duplicates(infos: dict[str, ClipInfo], by_k: dict[int, list[Episode]] | None = None) -> Duplicates | None:
    groups: dict[str, list[str]] = defaultdict(list)
    for path, info in infos.items():
        if info.features is not None:
            groups[info.key].append(path)
    if not groups:
        return None
    shared = [tuple(sorted(paths)) for paths in groups.values() if len(paths) > 1]
    uses = _uses(by_k or {})

    def named(path: str) -> str:
        used = sorted(uses.get(path, ()))
        return f"{path} ({'; '.join(' '.join(use) for use in used)})" if used else path

    conflicts = []
    for group in shared:
        labels: dict[str, dict[str, str]] = defaultdict(dict)  # task → label → a path that has it
        for path in group:
            for task, _, label in uses.get(path, ()):
                if TASKS.get(task).family not in LABEL_FROM_CONTEXT:
                    labels[task].setdefault(label, path)
        conflicts += [
            f"{task}: " + " = ".join(f"{path} (label {label})" for label, path in sorted(held.items()))
            for task, held in sorted(labels.items())
            if len(held) > 1
        ]
    return Duplicates(
        files=sum(len(p) for p in groups.values()),
        contents=len(groups),
        groups=len(shared),
        examples=tuple(tuple(named(path) for path in group) for group in sorted(shared)[:MAX_EXAMPLES]),
        own_demo=tuple(_own_demo_copies(by_k or {}, infos)),
        conflicts=tuple(conflicts),
    )


# --------------------------------------------------------------------------- small statistics


def entropy_bits(labels: Iterable[str]) -> float:
    counts = np.array(list(Counter(labels).values()), dtype=float)
    if counts.size == 0:
        return 0.0
    p = counts / counts.sum()
    return float(-(p * np.log2(p)).sum())


def label_stats(keys: Sequence[str], space: int | None) -> LabelStats:
    counts = Counter(keys)
    majority, top = counts.most_common(1)[0] if counts else ("", 0)
    return LabelStats(
        entropy_bits=entropy_bits(keys),
        max_bits=math.log2(space) if space else None,
        majority=majority,
        majority_share=top / len(keys) if keys else 0.0,
        distinct=len(counts),
    )


def reuse(uses: Sequence[Sequence[str]], names: dict[str, str]) -> Reuse:
    """``uses``: per episode, the clip keys it shows (a key counts once per episode)."""
    per_clip: Counter[str] = Counter()
    for keys in uses:
        per_clip.update(set(keys))
    recurring = {key for key, n in per_clip.items() if n > 1}
    top = max(per_clip.items(), key=lambda item: (item[1], item[0]), default=("", 0))
    return Reuse(
        clips=len(per_clip),
        slots=sum(len(keys) for keys in uses),
        recurring=len(recurring),
        episodes=sum(1 for keys in uses if recurring & set(keys)),
        max_uses=top[1],
        example=f"{names.get(top[0], top[0])} ({top[1]} episodes)" if top[1] > 1 else None,
    )


def fold_of(group: str, folds: int = FOLDS) -> int:
    """A fold from the group's name alone: the same clip always lands in the same fold."""
    return int.from_bytes(hashlib.blake2b(group.encode(), digest_size=4).digest(), "little") % folds


def fold_majority(keys: Sequence[str], groups: Sequence[str]) -> list[set[str]]:
    """For each item, the most frequent key in the other folds (folds by group; ties: all of them)."""
    folds = [fold_of(g) for g in groups]
    total = Counter(keys)
    per_fold: dict[int, Counter[str]] = defaultdict(Counter)
    for key, fold in zip(keys, folds, strict=True):
        per_fold[fold][key] += 1
    best_of: dict[int, set[str]] = {}
    for fold, held_out in per_fold.items():
        counts = total - held_out
        best = max(counts.values(), default=0)
        best_of[fold] = {key for key, n in counts.items() if n == best} if best else set()
    return [best_of[fold] for fold in folds]


def knn_predict(train_x: np.ndarray, train_y: Sequence[str], x: float, neighbours: int = NEIGHBOURS) -> str:
    """The most frequent label among the nearest training points (ties: the nearer one's label)."""
    order = np.argsort(np.abs(train_x - x), kind="stable")[:neighbours]
    votes = Counter(train_y[i] for i in order)
    best = max(votes.values())
    return next(train_y[i] for i in order if votes[train_y[i]] == best)


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """y at x by piecewise-linear interpolation through the points (duplicated x averaged), extended
    outside them with the least-squares slope; one point (or one x): its y."""
    points: dict[float, list[float]] = defaultdict(list)
    for xi, yi in zip(xs, ys, strict=True):
        points[xi].append(yi)
    px = np.array(sorted(points))
    py = np.array([np.mean(points[v]) for v in px])
    if len(px) == 1:
        return float(py[0])
    slope = float(np.polyfit(px, py, 1)[0])
    if x < px[0]:
        return float(py[0] + slope * (x - px[0]))
    if x > px[-1]:
        return float(py[-1] + slope * (x - px[-1]))
    return float(np.interp(x, px, py))


# --------------------------------------------------------------------------- answers and labels


def remap_letters(ep: Episode) -> tuple[str, str] | None:
    letters = {clip.role: clip.label for clip in ep.query.clips[:-1] if clip.label}
    a, b = letters.get("A"), letters.get("B")
    return (a, b) if a and b and a != b else None


def spelled_pattern(label: str, letters: tuple[str, str]) -> str | None:
    """Which reference each letter of an AudioRemap label names (``"PBP"`` with P, B → ``"ABA"``); None
    when the label uses other letters or the two letters are the same."""
    a, b = letters
    pattern = "".join("A" if c == a else "B" if c == b else "?" for c in label)
    return None if "?" in pattern or a == b else pattern


def label_key(ep: Episode) -> str:
    """What is being predicted: the label, or for AudioRemap its pattern over the references (ABA)."""
    if ep.task == REMAP_TASK and (letters := remap_letters(ep)):
        return spelled_pattern(ep.query.label, letters) or ep.query.label
    return ep.query.label


def answer_for(ep: Episode, key: str) -> str:
    """A predicted label key as the answer text (AudioRemap: the pattern spelled with the query's letters)."""
    if ep.task == REMAP_TASK and (letters := remap_letters(ep)) and set(key) <= {"A", "B"}:
        return "".join(letters[0] if c == "A" else letters[1] for c in key)
    return key


def correct(ep: Episode, answer: str) -> bool:
    return judge(ep.task, answer, ep.query.label).correct


def expected(ep: Episode, answers: Iterable[str]) -> float:
    """Accuracy of a uniform pick among ``answers`` (0 for none)."""
    answers = list(answers)
    return sum(correct(ep, a) for a in answers) / len(answers) if answers else 0.0


# --------------------------------------------------------------------------- shortcuts


@dataclass(frozen=True)
class TextOnly:
    """What ``builtin:text-only`` makes of an episode: its best answers (it picks one of them) and every
    answer the text admits (weight > 0)."""

    best: tuple[str, ...]
    admissible: tuple[str, ...]


def text_only(ep: Episode) -> TextOnly:
    weights = weights_for(Seen.of(build_prompt(ep, SILENT).chat))
    return TextOnly(tuple(best_answers(weights)), tuple(a for a, w in weights.items() if w > 0))


def _shown_demo_labels(ep: Episode) -> dict[str, str]:
    """Demo clips shown with a label: audio path → label."""
    return {clip.audio_path: clip.label for demo in ep.demos for clip in demo.clips if clip.label is not None}


def copy_scores(episodes: Sequence[Episode], keys: dict[str, str], floor: Sequence[float]) -> list[float]:
    """Copy the label of an own demo clip that is the query clip (same content); else the floor's answer."""
    out = []
    for ep, fallback in zip(episodes, floor, strict=True):
        target = keys[ep.query.target.audio_path]
        shown = [label for path, label in _shown_demo_labels(ep).items() if keys[path] == target]
        out.append(expected(ep, shown) if shown else fallback)
    return out


def name_tokens(path: str) -> list[str]:
    """The file name's tokens: the stem split at ``_``, ``-``, ``.`` and spaces."""
    stem = path.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return [t for t in re.split(r"[_\-.\s]+", stem) if t]


def path_tokens(path: str) -> set[str]:
    folders = path.replace("\\", "/").split("/")[:-1]
    return {t.lower() for t in folders + name_tokens(path)}


NameRule = Callable[[Episode], str | None]


def position_rule(index: int, spell: bool) -> NameRule:
    def predict(ep: Episode) -> str | None:
        tokens = name_tokens(ep.query.target.audio_path)
        if not -len(tokens) <= index < len(tokens):
            return None
        token = tokens[index]
        if spell:
            return answer_for(ep, token.upper()) if set(token.upper()) <= {"A", "B"} else None
        return token

    return predict


def naive_bayes(train: Sequence[Episode]) -> NameRule:
    """Multinomial naive Bayes over the path tokens of the query clip (Laplace smoothing)."""
    classes: Counter[str] = Counter()
    token_counts: dict[str, Counter[str]] = defaultdict(Counter)
    for ep in train:
        key = label_key(ep)
        classes[key] += 1
        token_counts[key].update(path_tokens(ep.query.target.audio_path))
    vocabulary = {t for counts in token_counts.values() for t in counts}
    totals = {key: sum(counts.values()) for key, counts in token_counts.items()}

    def predict(ep: Episode) -> str | None:
        tokens = [t for t in path_tokens(ep.query.target.audio_path) if t in vocabulary]
        if not classes:
            return None
        scores = {
            key: math.log(n)
            + sum(math.log((token_counts[key][t] + 1) / (totals[key] + len(vocabulary))) for t in tokens)
            for key, n in classes.items()
        }
        return answer_for(ep, max(scores, key=lambda key: (scores[key], key)))

    return predict


def _rule_accuracy(rule: NameRule, episodes: Sequence[Episode]) -> float:
    return sum(correct(ep, answer) for ep in episodes if (answer := rule(ep)) is not None) / max(
        len(episodes), 1
    )


def _cv_accuracy(
    episodes: Sequence[Episode], folds: Sequence[int], fit: Callable[[Sequence[Episode]], NameRule]
) -> float:
    hits = 0
    for fold in set(folds):
        train = [ep for ep, f in zip(episodes, folds, strict=True) if f != fold]
        test = [ep for ep, f in zip(episodes, folds, strict=True) if f == fold]
        hits += round(_rule_accuracy(fit(train), test) * len(test))
    return hits / max(len(episodes), 1)


def name_shortcut(episodes: Sequence[Episode], groups: Sequence[str]) -> tuple[float, str]:
    """Cross-validated accuracy of reading the label from the query's file name, and the rule chosen most.

    Each outer fold picks the rule that does best on the other folds (position rules by their accuracy
    there, naive Bayes by an inner cross-validation), then answers the held-out fold with it."""
    folds = [fold_of(g) for g in groups]
    fixed: dict[str, NameRule] = {}
    for index in NAME_POSITIONS:
        fixed[f"token {index}"] = position_rule(index, spell=False)
        if any(remap_letters(ep) for ep in episodes):
            fixed[f"token {index} spelled"] = position_rule(index, spell=True)
    hits, chosen = 0, Counter[str]()
    for fold in sorted(set(folds)):
        train = [ep for ep, f in zip(episodes, folds, strict=True) if f != fold]
        train_folds = [f for f in folds if f != fold]
        test = [ep for ep, f in zip(episodes, folds, strict=True) if f == fold]
        scores = {name: _rule_accuracy(rule, train) for name, rule in fixed.items()}
        scores["naive Bayes over path tokens"] = _cv_accuracy(train, train_folds, naive_bayes)
        name = max(scores, key=lambda n: scores[n])  # first best: position rules before naive Bayes
        rule = naive_bayes(train) if name not in fixed else fixed[name]
        hits += round(_rule_accuracy(rule, test) * len(test))
        chosen[name] += 1
    return hits / max(len(episodes), 1), chosen.most_common(1)[0][0] if chosen else ""


def _log(value: float) -> float:
    return math.log10(max(value, 1e-7))


def feature_value(features: perception.LevelFeatures, name: str) -> float:
    return {
        "duration": features.seconds,
        "rms": features.rms,
        "floor": features.floor,
        "low-freq": features.low_share,
    }[name]


def _extensive(features: perception.LevelFeatures, name: str) -> float:
    """The feature as an amount that adds up over sounds played one after another (AudioRemap's MIX):
    seconds, energy, energy below 20 Hz, background energy."""
    energy = features.rms**2 * features.seconds
    return {
        "duration": features.seconds,
        "rms": energy,
        "floor": features.floor**2 * features.seconds,
        "low-freq": energy * features.low_share**2,
    }[name]


def remap_parts_expected(ep: Episode, infos: dict[str, ClipInfo], name: str) -> float:
    """AudioRemap: the MIX holds the references' sounds, so its amount is the sum of theirs plus a constant
    (the gaps), learned from the demos; the patterns that fit the query MIX best are the answer."""

    def amounts(clips) -> tuple[float, float, float]:
        return tuple(_extensive(infos[c.audio_path].features, name) for c in clips[:3])  # type: ignore[return-value]

    def fit(amount: tuple[float, float, float], pattern: str) -> float:
        a, b, mix = amount
        return mix - sum(a if c == "A" else b for c in pattern)

    offsets = []
    for demo in ep.demos:
        clips = demo.clips
        if len(clips) >= 3 and clips[0].label and clips[1].label and clips[-1].label:
            pattern = spelled_pattern(clips[-1].label, (clips[0].label, clips[1].label))
            if pattern:
                offsets.append(fit(amounts(clips), pattern))
    if len(ep.query.clips) < 3:
        return 0.0
    query = amounts(ep.query.clips)
    offset = float(np.median(offsets)) if offsets else 0.0
    errors = {p: abs(fit(query, p) - offset) for p in PATTERNS}
    best = min(errors.values())
    tolerance = 1e-6 + 1e-3 * abs(query[2])
    return expected(ep, [answer_for(ep, p) for p, e in errors.items() if e <= best + tolerance])


def _log_feature(infos: dict[str, ClipInfo], path: str, name: str) -> float:
    """The feature as a rule compares it: log10 seconds; levels in whole dB (1 dB is about the smallest
    level difference a listener notices; finer differences of noise-free synthetic clips are not cues)."""
    value = feature_value(infos[path].features, name)  # type: ignore[arg-type]
    return _log(value) if name == "duration" else float(round(20 * _log(value)))


def within_episode_expected(ep: Episode, infos: dict[str, ClipInfo], name: str, text: TextOnly) -> float:
    """The query's feature against the demos' (this episode's labelled clips only), choosing among the
    answers the text admits: numbers by interpolating label against feature through the demos, other
    labels by the nearest demo clip, AudioRemap by the sum of the MIX's parts."""
    if ep.task == REMAP_TASK:
        return remap_parts_expected(ep, infos, name)
    values = TASKS.get(ep.task).labels.values if ep.task in TASKS else None
    shown = [
        (_log_feature(infos, c.audio_path, name), c.label)
        for demo in ep.demos
        for c in demo.clips
        if c.label is not None and (values is None or c.label in values)
    ]
    x = _log_feature(infos, ep.query.target.audio_path, name)
    if all(s == x for s, _ in shown):  # the feature does not vary here: it tells nothing beyond the text
        return expected(ep, text.best)
    numbers = [int(a) for a in text.admissible if _is_int(a)]
    if numbers and all(_is_int(label) for _, label in shown):
        guess = interpolate([s for s, _ in shown], [int(label) for _, label in shown], x)
        nearest = min(abs(n - guess) for n in numbers)
        return expected(ep, [str(n) for n in numbers if abs(n - guess) == nearest])
    admitted = [(s, label) for s, label in shown if label in text.admissible] or shown
    nearest = min(abs(s - x) for s, _ in admitted)
    return expected(ep, [label for s, label in admitted if abs(s - x) == nearest])


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _across_input(ep: Episode, infos: dict[str, ClipInfo], name: str) -> float:
    """The query's feature; for AnomalyDetect its distance from the episode's normal demos' (machines
    differ in level, faults in how far they move it)."""
    x = _log_feature(infos, ep.query.target.audio_path, name)
    normals = [
        _log_feature(infos, c.audio_path, name) for d in ep.demos for c in d.clips if c.label == "Normal"
    ]
    return abs(x - float(np.mean(normals))) if ep.task == "AnomalyDetect" and normals else x


def across_episodes_expected(
    episodes: Sequence[Episode], infos: dict[str, ClipInfo], name: str, groups: Sequence[str]
) -> list[float]:
    """Nearest neighbours over the other folds' queries (grouped by query clip): a dataset-wide relation
    between the feature and the label."""
    xs = np.array([_across_input(ep, infos, name) for ep in episodes])
    keys = [label_key(ep) for ep in episodes]
    folds = np.array([fold_of(g) for g in groups])
    out = [0.0] * len(episodes)
    for fold in set(folds.tolist()):
        train = np.flatnonzero(folds != fold)
        if train.size == 0:
            continue
        train_y = [keys[i] for i in train]
        for i in np.flatnonzero(folds == fold):
            answer = answer_for(episodes[i], knn_predict(xs[train], train_y, float(xs[i])))
            out[i] = float(correct(episodes[i], answer))
    return out


def feature_shortcuts(
    task: str,
    episodes: Sequence[Episode],
    infos: dict[str, ClipInfo],
    groups: Sequence[str],
    texts: Sequence[TextOnly],
) -> list[Shortcut]:
    usable = [
        i
        for i, ep in enumerate(episodes)
        if all(infos[c.audio_path].features is not None for c in ep.clips())
    ]
    if not usable:
        return [Shortcut(name, None, 0, False, "audio not available") for name in FEATURES]
    eps = [episodes[i] for i in usable]
    out = []
    for name in FEATURES:
        within = float(np.mean([within_episode_expected(episodes[i], infos, name, texts[i]) for i in usable]))
        across = None
        if task != REMAP_TASK:  # its labels are letters drawn per episode: only the episode's parts tell
            across = float(np.mean(across_episodes_expected(eps, infos, name, [groups[i] for i in usable])))
        exempt = TASK_SIGNAL.get((task, name))
        note = f"within episode {within:.1%}" + ("" if across is None else f", across episodes {across:.1%}")
        if exempt:
            note += f"; not judged: {exempt}"
        out.append(Shortcut(name, max(within, across or 0.0), len(eps), exempt is None, note))
    return out


def demo_order(episodes: Sequence[Episode]) -> str | None:
    """How the labels inside multi-clip demos are ordered (AnomalyDetect: Normal first, or drawn?)."""
    values = TASKS.get(episodes[0].task).labels.values if episodes and episodes[0].task in TASKS else None
    orders = Counter(
        tuple(c.label for c in d.clips if c.label in (values or ()))
        for ep in episodes
        for d in ep.demos
        if d.multi
    )
    orders.pop((), None)
    if not orders or all(len(order) < 2 for order in orders):
        return None
    order, n = orders.most_common(1)[0]
    return f"{' then '.join(map(str, order))} in {n} of {sum(orders.values())} demos"


def beyond_normal(episodes: Sequence[Episode], infos: dict[str, ClipInfo]) -> dict[str, str]:
    """AnomalyDetect, per feature: per machine type, the anomalous clips whose feature lies beyond every
    normal clip's (above the highest or below the lowest): a class the feature alone separates."""
    labelled: dict[str, dict[str, str]] = defaultdict(dict)  # machine → path → label
    for ep in episodes:
        machine = ep.object or "?"
        for d in ep.demos:
            for c in d.clips:
                if c.label in ("Normal", "Anomalous"):
                    labelled[machine][c.audio_path] = c.label
        labelled[machine][ep.query.target.audio_path] = ep.query.label
    out = {}
    for name in FEATURES:
        parts = []
        for machine, clips in sorted(labelled.items()):
            if any(infos[p].features is None for p in clips):
                continue
            x = {p: _log_feature(infos, p, name) for p in clips}
            normal = [x[p] for p, label in clips.items() if label == "Normal"]
            anomalous = [x[p] for p, label in clips.items() if label == "Anomalous"]
            if normal and anomalous:
                beyond = sum(v > max(normal) or v < min(normal) for v in anomalous)
                parts.append(f"{machine} {beyond}/{len(anomalous)}")
        if parts:
            out[name] = ", ".join(parts)
    return out


def recency_expected(ep: Episode) -> float:
    """Answer the label shown last before the query (a recency-biased model)."""
    labels = [c.label for d in ep.demos for c in d.clips if c.label is not None]
    return expected(ep, labels[-1:])


# --------------------------------------------------------------------------- one task at one k


def _mean(values: Iterable[float]) -> float:
    values = list(values)
    return float(np.mean(values)) if values else 0.0


def audit_task(
    task: str,
    k: int,
    episodes: Sequence[Episode],
    infos: dict[str, ClipInfo],
    margin: float,
    alpha: float = ALPHA,
) -> TaskAudit:
    """One task at one k: every shortcut measured, and judged as a family of this row alone (``audit``
    judges again over all rows)."""
    keys = {path: info.key for path, info in infos.items()}
    names = {info.key: path for path, info in sorted(infos.items(), reverse=True)}  # key → first path
    targets = [keys[ep.query.target.audio_path] for ep in episodes]
    chance = chance_level(task).value or 0.0
    texts = [text_only(ep) for ep in episodes]
    floor_scores = [expected(ep, text.best) for ep, text in zip(episodes, texts, strict=True)]
    floor = _mean(floor_scores)
    published = PUBLISHED_FLOOR.get(task, "")
    baseline = max(chance, floor) if published else chance

    label_keys = [label_key(ep) for ep in episodes]
    spec = TASKS.get(task) if task in TASKS else None
    space = len(spec.labels.values) if spec and spec.labels.values else (6 if task == REMAP_TASK else None)
    prior_sets = fold_majority(label_keys, targets)
    prior = _mean(
        expected(ep, [answer_for(ep, key) for key in best])
        for ep, best in zip(episodes, prior_sets, strict=True)
    )
    shown_keys = [{keys[path] for path in _shown_demo_labels(ep)} for ep in episodes]
    shown_anywhere = Counter(key for shown in shown_keys for key in shown)
    own = sum(t in shown for t, shown in zip(targets, shown_keys, strict=True))
    other = sum(shown_anywhere[t] - (t in shown) > 0 for t, shown in zip(targets, shown_keys, strict=True))
    names_accuracy, names_rule = name_shortcut(episodes, targets)
    n = len(episodes)
    shortcuts = [
        Shortcut("text-only", floor, n, not published, f"the floor: {published}" if published else ""),
        Shortcut("label prior", prior, n, True, "most frequent query label of the other folds"),
        Shortcut("recency", _mean(map(recency_expected, episodes)), n, True, "the label shown last"),
        Shortcut(
            "copy",
            _mean(copy_scores(episodes, keys, floor_scores)),
            n,
            True,
            f"{own} queries are one of their own labelled demo clips (elsewhere the text-only answer)",
        ),
        Shortcut("file names", names_accuracy, n, True, f"rule chosen most: {names_rule}"),
    ]
    features = feature_shortcuts(task, episodes, infos, targets, texts)
    audit = TaskAudit(
        task=task,
        k=k,
        episodes=n,
        chance=chance_level(task).value,
        floor=floor,
        baseline=baseline,
        floor_note=published,
        labels=label_stats(label_keys, space),
        queries=reuse([[t] for t in targets], names),
        demos=reuse([[keys[c.audio_path] for d in ep.demos for c in d.clips] for ep in episodes], names),
        query_in_own_demos=own,
        query_in_other_demos=other,
        demo_order=demo_order(episodes),
        beyond_normal=beyond_normal(episodes, infos) if task == "AnomalyDetect" else {},
        shortcuts=shortcuts + features,
    )
    # a feature must beat the label prior too: across episodes it could answer with the prior alone
    audit.against = {s.name: baseline for s in shortcuts} | {s.name: max(baseline, prior) for s in features}
    judge_shortcuts([audit], margin, alpha)  # alone; ``audit`` judges all tasks and k as one family
    return audit


# --------------------------------------------------------------------------- the tests


def binomial_tail(hits: int, n: int, p: float) -> float:
    """P(X >= hits) for X ~ Binomial(n, p), exactly (the terms summed in log space)."""
    if hits <= 0:
        return 1.0
    if hits > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    log_p, log_q = math.log(p), math.log1p(-p)
    head = math.lgamma(n + 1)
    terms = [
        math.exp(head - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)
        for i in range(hits, n + 1)
    ]
    return min(1.0, math.fsum(terms))


def hits_of(accuracy: float, n: int) -> int:
    """Expected hits over tie-breaks (``accuracy`` × n), rounded down: a fraction of a hit never counts."""
    return math.floor(accuracy * n + 1e-6)


def _exceeds(accuracy: float, baseline: float, margin: float) -> bool:
    return 100 * (accuracy - baseline) > margin + 1e-9  # 1e-9: exactly the margin is not more


def least_p(n: int, baseline: float, margin: float) -> float:
    """The smallest p value a shortcut on ``n`` episodes can reach: a perfect score's, baseline^n (1 when
    even a perfect score is not more than ``margin`` points above the baseline: it can never fail)."""
    return binomial_tail(n, n, baseline) if _exceeds(1.0, baseline, margin) else 1.0


def min_episodes(baseline: float, margin: float, threshold: float) -> int | None:
    """The fewest episodes on which a perfect score reaches ``threshold``: ceil(log threshold / log
    baseline), 1 at a baseline of 0; None where no n does (baseline + margin at 100 % or more)."""
    if not _exceeds(1.0, baseline, margin):
        return None
    if baseline <= 0.0:
        return 1
    n = max(1, math.ceil(math.log(threshold) / math.log(baseline) - 1e-9))
    while least_p(n, baseline, margin) > threshold:
        n += 1
    while n > 1 and least_p(n - 1, baseline, margin) <= threshold:
        n -= 1
    return n


def tarone_k(least: Sequence[float], alpha: float) -> int:
    """Tarone's rule for discrete tests: the smallest K such that at most K tests can reach alpha / K at
    all. Only those are tested (a test that cannot reach it could never be significant after the
    correction, and counting it would only make the others' correction harsher)."""
    k = 1
    while sum(p <= alpha / k for p in least) > k:
        k += 1
    return k


def judge_shortcuts(tasks: Sequence[TaskAudit], margin: float, alpha: float = ALPHA) -> Testing:
    """Test every judged, measured shortcut of ``tasks`` as one family and set statuses, failures and
    verdicts: an exact one-sided binomial test of its hits against its baseline; Holm's correction over
    the shortcuts tested (those whose perfect score could reach alpha / K, K by Tarone's rule); a failure
    needs a Holm-adjusted p <= alpha and an accuracy more than ``margin`` points above the baseline."""
    candidates = [
        (t, i)
        for t in tasks
        for i, s in enumerate(t.shortcuts)
        if s.judged and s.accuracy is not None and s.n > 0
    ]
    for t in tasks:  # a row made by hand may not say: its baseline
        t.against = {s.name: t.against.get(s.name, t.baseline) for s in t.shortcuts}
    least = [least_p(t.shortcuts[i].n, t.against[t.shortcuts[i].name], margin) for t, i in candidates]
    k = tarone_k(least, alpha)
    threshold = alpha / k
    tested = [c for c, p in zip(candidates, least, strict=True) if p <= threshold]
    p_values = []
    for t, i in tested:
        s = t.shortcuts[i]
        p_values.append(binomial_tail(hits_of(s.accuracy, s.n), s.n, t.against[s.name]))  # type: ignore[arg-type]
    keys = [(id(t), i) for t, i in tested]
    adjusted = dict(zip(keys, zip(p_values, holm(p_values), strict=True), strict=True))
    for t in tasks:
        for i, s in enumerate(t.shortcuts):
            against = t.against[s.name]
            fields: dict = {"baseline": against}
            if s.accuracy is None:
                fields["status"] = "not measured"
            elif not s.judged:
                fields["status"] = "not judged"
            else:
                fields["hits"] = hits_of(s.accuracy, s.n)
                fields["min_episodes"] = min_episodes(against, margin, threshold)
                if (id(t), i) in adjusted:
                    p, adj = adjusted[(id(t), i)]
                    failed = adj <= alpha and _exceeds(s.accuracy, against, margin)
                    fields |= {"p_value": p, "adjusted_p": adj, "status": "fail" if failed else "pass"}
                else:
                    fields |= {"p_value": None, "adjusted_p": None, "status": "too few"}
            t.shortcuts[i] = replace(s, **fields)
        t.failures = [
            f"{s.name} {s.accuracy:.1%} > {s.baseline:.1%} + {margin:g} points "
            f"(p = {_p(s.p_value)}, Holm {_p(s.adjusted_p)})"
            for s in t.shortcuts
            if s.status == "fail"
        ]
        t.min_episodes = min_episodes(t.baseline, margin, threshold)
        statuses = [s.status for s in t.shortcuts if s.status in ("fail", "pass", "too few")]
        t.verdict = (
            "FAIL"
            if t.failures
            else "too few"
            if statuses and all(status == "too few" for status in statuses)
            else "ok"
        )
    judged = len(candidates)
    return Testing(
        test=TEST,
        correction=CORRECTION,
        alpha=alpha,
        judged=judged,
        tested=len(tested),
        too_few=judged - len(tested),
        threshold=threshold,
        minimum=(
            f"a shortcut is tested where a perfect score could be significant after the correction: "
            f"baseline^n <= alpha / K = {_p(threshold)} (K = {k}, Tarone's rule), i.e. "
            f"n >= log(alpha / K) / log(baseline); below it: too few episodes to judge"
        ),
    )


def _p(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value:.2g}" if value >= 1e-4 or value == 0 else f"{value:.1e}"


# --------------------------------------------------------------------------- the dataset


def audit(
    root: str | os.PathLike,
    *,
    margin: float = DEFAULT_MARGIN,
    alpha: float = ALPHA,
    workers: int | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> AuditReport:
    """Audit every task and k of the dataset at ``root`` (meta files under ``root/meta`` or ``root``), all
    shortcuts of all rows tested as one family (Holm at family-wise level ``alpha``)."""
    if margin < 0:
        raise AudioICLError(f"margin must be >= 0 points, got {margin:g}")
    if not 0 < alpha < 1:
        raise AudioICLError(f"alpha must be between 0 and 1, got {alpha:g}")
    metas = find_meta_files(root)
    by_k = {k: read_meta(path) for k, path in metas.items()}
    paths = sorted({clip.audio_path for eps in by_k.values() for ep in eps for clip in ep.clips()})
    say(f"measuring {len(paths)} clips")
    infos = measure_clips(Path(root), paths, workers)
    decoded = sum(info.features is not None for info in infos.values())
    tasks = []
    for k, episodes in by_k.items():
        grouped: dict[str, list[Episode]] = defaultdict(list)
        for ep in episodes:
            grouped[ep.task].append(ep)
        for task in order_tasks(set(grouped)):
            say(f"k={k} {task}")
            tasks.append(audit_task(task, k, grouped[task], infos, margin, alpha))
    testing = judge_shortcuts(tasks, margin, alpha)
    return AuditReport(str(root), margin, len(paths), decoded, tasks, duplicates(infos, by_k), testing)


# --------------------------------------------------------------------------- the table


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def _cell(audit: TaskAudit, name: str) -> str:
    shortcut = audit.shortcut(name)
    if shortcut is None or shortcut.accuracy is None:
        return "n/a"
    if not shortcut.judged:
        return _pct(shortcut.accuracy) + "*"
    mark = {"fail": "!", "too few": "?"}.get(shortcut.status, "")
    return _pct(shortcut.accuracy) + mark


COLUMNS = (
    "task",
    "k",
    "n",
    "min n",
    "chance",
    "floor",
    "prior",
    "major",
    "H bits",
    "queries",
    "last",
    "copy",
    "names",
)
COLUMNS += (*FEATURES, "verdict")
LEGEND = (
    "Accuracies in %. floor: builtin:text-only, expected over its tie-breaks (f: the published construction, "
    "the baseline of that task; elsewhere the baseline is chance); prior: the most frequent query label of "
    "the other folds; major: the majority label's share; H: the labels' entropy / the label space's, in bits; "
    "queries: distinct query clips / clips serving 2+ episodes; last: answer the label shown last; copy: the "
    "label of an own demo clip that is the query clip; names: the label read from the query's file name; "
    "duration .. low-freq: that feature alone, best of the within-episode and across-episode rules, judged "
    "against the prior too. Cross-validation: 5 folds grouped by query clip. !: beats its baseline by more "
    "than the margin, significantly: exact one-sided binomial test against the baseline, Holm's correction "
    "over every shortcut tested (family-wise 5 %); ?: too few episodes to judge (a perfect score could not "
    "be significant after the correction); min n: the episodes a shortcut at the row's baseline needs to be "
    "tested; *: the task's own signal, not judged."
)


def format_table(report: AuditReport) -> list[str]:
    rows = [COLUMNS]
    for t in report.tasks:
        bits = f"{t.labels.entropy_bits:.2f}" + (f"/{t.labels.max_bits:.2f}" if t.labels.max_bits else "")
        floor = _pct(t.floor) + "f" if t.floor_note else _cell(t, "text-only")
        rows.append(
            (
                t.task,
                str(t.k),
                str(t.episodes),
                "-" if t.min_episodes is None else str(t.min_episodes),
                _pct(t.chance),
                floor,
                _cell(t, "label prior"),
                _pct(t.labels.majority_share),
                bits,
                f"{t.queries.clips}/{t.queries.recurring}",
                _cell(t, "recency"),
                _cell(t, "copy"),
                _cell(t, "file names"),
                *(_cell(t, name) for name in FEATURES),
                t.verdict or ("FAIL" if t.failures else "ok"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return [line.rstrip() for line in lines]


def _names(group: tuple[str, ...], shown: int = 3) -> str:
    more = f" (and {len(group) - shown} more)" if len(group) > shown else ""
    return " = ".join(group[:shown]) + more


def format_report(report: AuditReport) -> str:
    mode = (
        "paths only: no audio found, so no features and no duplicate check"
        if report.paths_only
        else f"audio decoded for {report.decoded} of {report.clips} clips"
    )
    lines = [f"audit of {report.root} ({mode}); margin {report.margin:g} points", ""]
    lines += format_table(report)
    lines += ["", LEGEND]
    if report.duplicates is not None:
        d = report.duplicates
        lines += [
            "",
            f"duplicate audio: {d.files} decoded files, {d.contents} distinct contents, "
            f"{d.groups} of them under 2+ names",
        ]
        lines += [f"  {_names(group)}" for group in d.examples]
        lines += [f"FAIL {failure}" for failure in d.failures]
    recurring = [t for t in report.tasks if t.queries.recurring]
    if recurring:
        lines += ["", "recurring query clips (the episodes are not independent):"]
        lines += [
            f"  {t.task} k={t.k}: {t.queries.recurring} clips serve {t.queries.episodes} episodes, "
            f"e.g. {t.queries.example}"
            for t in recurring
        ]
    orders = [t for t in report.tasks if t.demo_order]
    if orders:
        lines += ["", "label order inside multi-clip demos:"]
        lines += [f"  {t.task} k={t.k}: {t.demo_order}" for t in orders]
    beyond = [t for t in report.tasks if t.beyond_normal]
    if beyond:
        lines += ["", "anomalous clips beyond every normal clip of their machine type, per feature:"]
        lines += [
            f"  {t.task} k={t.k} {name}: {text}" for t in beyond for name, text in t.beyond_normal.items()
        ]
    testing = report.testing
    if testing is not None:
        few_rows = [t for t in report.tasks if t.verdict == "too few"]
        lines += [
            "",
            f"tests: {testing.test}; {testing.correction}, alpha {testing.alpha:g}: "
            f"{testing.tested} of {testing.judged} judged shortcuts tested",
        ]
        if testing.too_few:
            lines += [
                f"too few episodes to judge: {testing.too_few} shortcuts (?), {len(few_rows)} rows with none "
                f"tested (too few); {testing.minimum}"
            ]
    failed = [t for t in report.tasks if t.failures]
    if not failed:
        lines += [
            "",
            f"no shortcut beats its baseline by more than {report.margin:g} points significantly",
        ]
    else:
        lines += ["", "shortcuts that beat their baseline by more than the margin, significantly:"]
        lines += [f"  {t.task} k={t.k}: {failure}" for t in failed for failure in t.failures]
    return "\n".join([*lines, "", *verdict_lines(report)])


def verdict_lines(report: AuditReport) -> list[str]:
    """The report's last lines: PASS or FAIL, and each reason for a FAIL counted by kind (what ``audit``'s
    exit status says: 0 on PASS, 1 on FAIL)."""
    reasons: dict[str, int] = {}
    for failure in report.duplicates.failures if report.duplicates else ():
        kind = failure.split(":", 1)[0]
        reasons[kind] = reasons.get(kind, 0) + 1
    shortcuts = sum(len(t.failures) for t in report.tasks)
    if shortcuts:
        reasons["a shortcut beats its baseline by more than the margin"] = shortcuts
    if not reasons:
        return ["verdict: PASS (no duplicate clip a copy could score from, no shortcut beats its baseline)"]
    return ["verdict: FAIL", *(f"  {kind}: {count}" for kind, count in reasons.items())]
