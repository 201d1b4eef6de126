"""Paired comparisons: two conditions, two shot counts or two models answering the same episodes.

Episodes are shared across k, across study conditions and across models, so a difference in accuracy is a
paired difference: what matters is on how many episodes one side is right and the other wrong. Per task
(one 2×2 table of the episodes both sides answered):

- Δacc = acc(B) − acc(A) with Newcombe's hybrid score interval for paired proportions (his method 10, with
  the continuity-corrected φ of Altman et al., *Statistics with confidence*, 2000, §6);
- the exact McNemar test: two-sided binomial test of the discordant pairs (b episodes A-only right, c
  B-only right) against 1/2.

Over tasks, the mean of the per-task Δacc (every task weighs the same, as in the report's mean row) with a
paired bootstrap interval (episodes resampled with replacement within each task, ``DRAWS`` draws, a fixed
seed, percentiles) and the exact p value of the paired randomisation test: under the null each episode's
two answers are exchangeable, so each discordant episode adds ±1/n_task with probability 1/2; the
distribution of the mean is the convolution of one scaled binomial per task (with the same n in every task
it is the exact McNemar test of the pooled discordant pairs). Unlike a bootstrap p value it stays honest
for the few episodes of a small run, and unlike a Monte Carlo one it can be small enough to survive a
correction over many tests.

With demo draws, orders or prompt variants (result lines with ``draw``/``order``/``variant``), a pair is one
(id, draw, order, variant) that both sides answered; the paired bootstrap then resamples whole episodes (every
draw of one id together), since the draws of one query are not independent (the per-task McNemar test and the
randomisation test still count every pair as one).

Significance at 95 % is decided after the Holm–Bonferroni correction over every test of one report (all
tasks and the mean, of every comparison), stated in the report.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from audioicl.errors import AudioICLError
from audioicl.inference.record import dataset_label, model_run_record, same_dataset
from audioicl.scoring.score import find_result_files, iter_scored_lines
from audioicl.scoring.stats import wilson_interval
from audioicl.seeding import rng_for
from audioicl.tasks.chance import order_tasks

ALPHA = 0.05
DRAWS = 4000
MEAN_TASK = "mean over tasks"
CORRECTION = "Holm-Bonferroni"

LineKey = tuple[str, int, int, int]  # (episode id, draw, order, variant): 0 where a line has none
Outcomes = dict[str, dict[LineKey, bool]]  # task -> line key -> answered correctly


# --------------------------------------------------------------------------- exact tests and intervals


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p value: the binomial probability, under p = 1/2, of a split of the b + c
    discordant pairs at least as uneven as observed (1 when there are none)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def newcombe_paired(a: int, b: int, c: int, d: int, z: float = 1.96) -> tuple[float, float]:
    """95 % interval of p(B) − p(A) for paired proportions: ``a`` both right, ``b`` only A right, ``c`` only
    B right, ``d`` both wrong. Newcombe's method 10: the Wilson intervals of both margins combined with a
    correction for their correlation φ (continuity corrected as in Altman et al. 2000)."""
    n = a + b + c + d
    if n == 0:
        return (0.0, 0.0)
    p1, p2 = (a + c) / n, (a + b) / n  # B's accuracy, A's accuracy
    l1, u1 = wilson_interval(a + c, n, z)
    l2, u2 = wilson_interval(a + b, n, z)
    margins = (a + c) * (b + d) * (a + b) * (c + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = corrected / math.sqrt(margins) if margins > 0 else 0.0
    delta = p1 - p2
    low = delta - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = delta + math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return (max(-1.0, low), min(1.0, high))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


# --------------------------------------------------------------------------- one comparison


@dataclass(frozen=True)
class Comparison:
    """B against A on one task (or the mean over tasks): episodes both answered, both accuracies, Δacc
    and its interval, the discordant counts (per task), the p value and its adjusted value."""

    label: str
    task: str
    n: int
    acc_a: float
    acc_b: float
    low: float
    high: float
    p: float
    only_a: int | None = None
    only_b: int | None = None
    p_adjusted: float | None = None

    @property
    def delta(self) -> float:
        return self.acc_b - self.acc_a

    @property
    def significant(self) -> bool:
        return self.p_adjusted is not None and self.p_adjusted < ALPHA


def _shared(a: Outcomes, b: Outcomes) -> tuple[dict[str, list[tuple[bool, bool]]], dict[str, list[str]]]:
    """Per task, the (A right, B right) of every (id, draw, order, variant) both sides answered, in key order,
    and the episode id of each pair (its cluster)."""
    pairs: dict[str, list[tuple[bool, bool]]] = {}
    clusters: dict[str, list[str]] = {}
    for task in order_tasks(set(a) & set(b)):
        keys = sorted(set(a[task]) & set(b[task]))
        if keys:
            pairs[task] = [(a[task][key], b[task][key]) for key in keys]
            clusters[task] = [key[0] for key in keys]
    return pairs, clusters


def _task_comparison(label: str, task: str, pairs: list[tuple[bool, bool]]) -> Comparison:
    both = sum(1 for x, y in pairs if x and y)
    only_a = sum(1 for x, y in pairs if x and not y)
    only_b = sum(1 for x, y in pairs if y and not x)
    neither = len(pairs) - both - only_a - only_b
    low, high = newcombe_paired(both, only_a, only_b, neither)
    n = len(pairs)
    return Comparison(
        label,
        task,
        n,
        (both + only_a) / n,
        (both + only_b) / n,
        low,
        high,
        mcnemar_exact(only_a, only_b),
        only_a,
        only_b,
    )


def _differences(pairs: Mapping[str, list[tuple[bool, bool]]]) -> list[np.ndarray]:
    return [np.array([int(y) - int(x) for x, y in task_pairs], dtype=float) for task_pairs in pairs.values()]


def bootstrap_mean(
    pairs: Mapping[str, list[tuple[bool, bool]]],
    draws: int = DRAWS,
    seed: int = 0,
    clusters: Mapping[str, Sequence[str]] | None = None,
) -> tuple[float, float]:
    """Percentile 95 % interval of the mean over tasks of Δacc, resampling episodes within each task;
    ``clusters``: per task, the episode of each pair (pairs of one episode are drawn together; with one pair
    per episode, the same draws as without)."""
    rng = rng_for(seed, "paired-bootstrap")
    total = np.zeros(draws)
    for task, diff in zip(pairs, _differences(pairs), strict=True):
        groups = np.unique(clusters[task], return_inverse=True)[1] if clusters else np.arange(len(diff))
        sums = np.bincount(groups, weights=diff)
        sizes = np.bincount(groups).astype(float)
        picked = rng.integers(0, len(sums), size=(draws, len(sums)))
        total += sums[picked].sum(axis=1) / sizes[picked].sum(axis=1)
    low, high = np.quantile(total / max(len(pairs), 1), [0.025, 0.975])
    return float(low), float(high)


def randomization_p(pairs: Mapping[str, list[tuple[bool, bool]]]) -> float:
    """Exact two-sided p value of the mean over tasks of Δacc under the null that A and B are exchangeable
    on every episode (see the module docstring)."""
    counts = []  # per task: n, only B right, only A right
    for task_pairs in pairs.values():
        only_b = sum(1 for x, y in task_pairs if y and not x)
        only_a = sum(1 for x, y in task_pairs if x and not y)
        counts.append((len(task_pairs), only_b, only_a))
    scale = math.lcm(*(n for n, _, _ in counts)) if counts else 1
    pmf = np.ones(1)
    span = 0  # the distribution covers sums -span..span (in units of 1/scale)
    observed = 0
    for n, only_b, only_a in counts:
        weight, m = scale // n, only_b + only_a
        observed += weight * (only_b - only_a)
        task = np.zeros(2 * weight * m + 1)
        task[:: 2 * weight] = [math.comb(m, j) / 2**m for j in range(m + 1)]  # sum weight*(2j - m)
        pmf = np.convolve(pmf, task) if len(pmf) * len(task) < 5e7 else _fft_convolve(pmf, task)
        span += weight * m
    values = np.arange(-span, span + 1)
    return float(min(1.0, pmf[np.abs(values) >= abs(observed)].sum()))


def _fft_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    size = len(a) + len(b) - 1
    out = np.fft.irfft(np.fft.rfft(a, size) * np.fft.rfft(b, size), size)
    return np.clip(out, 0.0, None)


def newcombe_unpaired(x1: int, n1: int, x2: int, n2: int, z: float = 1.96) -> tuple[float, float]:
    """95 % interval of p2 − p1 for independent proportions (Newcombe's method 10, from Wilson intervals)."""
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson_interval(x1, n1, z)
    l2, u2 = wilson_interval(x2, n2, z)
    delta = p2 - p1
    return (
        delta - math.sqrt((p2 - l2) ** 2 + (u1 - p1) ** 2),
        delta + math.sqrt((u2 - p2) ** 2 + (p1 - l1) ** 2),
    )


def compare(a: Outcomes, b: Outcomes, label: str) -> list[Comparison]:
    """B against A per task and, with two tasks or more, on the mean over tasks (unadjusted p values)."""
    pairs, clusters = _shared(a, b)
    rows = [_task_comparison(label, task, task_pairs) for task, task_pairs in pairs.items()]
    if len(rows) > 1:
        low, high = bootstrap_mean(pairs, clusters=clusters)
        p = randomization_p(pairs)
        mean_a = float(np.mean([r.acc_a for r in rows]))
        mean_b = float(np.mean([r.acc_b for r in rows]))
        rows.append(Comparison(label, MEAN_TASK, sum(r.n for r in rows), mean_a, mean_b, low, high, p))
    return rows


def adjust(rows: Iterable[Comparison]) -> list[Comparison]:
    """``rows`` with Holm-adjusted p values over all of them (one family: one report)."""
    rows = list(rows)
    adjusted = holm([r.p for r in rows])
    return [replace(r, p_adjusted=q) for r, q in zip(rows, adjusted, strict=True)]


# --------------------------------------------------------------------------- reading outcomes


def folder_outcomes(folder: Path) -> dict[tuple[str, int], Outcomes]:
    """(model, k) → task → (id, draw, order, variant) → correct, from every results file under ``folder``
    (the original's rules; the same identity answered twice in one cell is an error, as it cannot be
    paired)."""
    cells: dict[tuple[str, int], Outcomes] = defaultdict(lambda: defaultdict(dict))
    for result in find_result_files(folder):
        for line in iter_scored_lines(result):
            cell = cells[(result.model, result.shots)][line.task]
            key = line.identity
            if key in cell:
                again = (
                    "" if line.replicate is None else f" (draw {key[1]}, order {key[2]}, variant {key[3]})"
                )
                raise AudioICLError(
                    f"episode {key[0]}{again} answered twice for {result.model} at k={result.shots}; paired "
                    "comparisons need one line per episode and draw",
                    file=str(result.path),
                    line=line.line,
                    id=key[0],
                )
            cell[key] = line.verdict.correct
    return {key: {task: dict(ids) for task, ids in value.items()} for key, value in cells.items()}


def refuse_two_datasets(a: tuple[Path, str], b: tuple[Path, str]) -> None:
    """Refuse to pair A's and B's episodes (each a results folder and a model in it) when their run records
    say they were run over different datasets: their ``AudioICL00001`` are different episodes. Results with
    no record (the original's files) cannot tell, and pass."""
    found = [model_run_record(folder, model) for folder, model in (a, b)]
    if found[0] is None or found[1] is None or same_dataset(found[0][1], found[1][1]):
        return
    (folder_a, model_a), (folder_b, model_b) = a, b
    raise AudioICLError(
        f"A ({model_a} in {folder_a}) was run over {dataset_label(found[0][1])} and B ({model_b} in "
        f"{folder_b}) over {dataset_label(found[1][1])}: episodes of two datasets cannot be paired"
    )


def read_per_example(path: Path) -> Outcomes:
    """Outcomes from a per-example CSV (``id,task,correct``, as ``audioicl score --per-example-dir`` writes;
    optional ``draw``, ``order``, ``variant`` columns, empty or absent: 0)."""
    outcomes: Outcomes = defaultdict(dict)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            missing = {"id", "task", "correct"} - set(reader.fieldnames or ())
            if missing:
                raise AudioICLError(
                    f"per-example CSV lacks column(s) {', '.join(sorted(missing))}", file=str(path)
                )
            for number, row in enumerate(reader, start=2):
                value = row["correct"].strip().lower()
                if value not in ("0", "1", "true", "false"):
                    raise AudioICLError(
                        f"correct must be 0/1 or true/false, got {row['correct']!r}",
                        file=str(path),
                        line=number,
                    )
                try:
                    replicate = tuple(int(row.get(name) or 0) for name in ("draw", "order", "variant"))
                except ValueError:
                    raise AudioICLError(
                        "draw, order and variant must be integers", file=str(path), line=number
                    ) from None
                outcomes[row["task"]][(row["id"], *replicate)] = value in ("1", "true")
    except OSError as exc:
        raise AudioICLError(f"cannot read per-example CSV: {exc.strerror}", file=str(path)) from exc
    return dict(outcomes)


# --------------------------------------------------------------------------- tables


def percent(value: float) -> str:
    return f"{100 * value:.1f}"


def format_p(value: float | None) -> str:
    if value is None:
        return ""
    return "<0.001" if value < 0.001 else f"{value:.3f}"


COMPARISON_HEADER = (
    "comparison",
    "task",
    "n",
    "acc A %",
    "acc B %",
    "Δ %",
    "95% CI",
    "A only",
    "B only",
    "p",
    "p (Holm)",
    "",
)


def comparison_cells(row: Comparison) -> list[str]:
    return [
        row.label,
        row.task,
        str(row.n),
        percent(row.acc_a),
        percent(row.acc_b),
        f"{100 * row.delta:+.1f}",
        f"[{100 * row.low:+.1f}, {100 * row.high:+.1f}]",
        "" if row.only_a is None else str(row.only_a),
        "" if row.only_b is None else str(row.only_b),
        format_p(row.p),
        format_p(row.p_adjusted),
        "*" if row.significant else "",
    ]


def markdown_comparisons(rows: Sequence[Comparison]) -> str:
    lines = ["| " + " | ".join(COMPARISON_HEADER) + " |", "|" + "---|" * len(COMPARISON_HEADER)]
    lines += ["| " + " | ".join(comparison_cells(row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


SIGNIFICANCE_NOTE = (
    "Δ = accuracy of B minus accuracy of A on the episodes both answered. Per task: Newcombe's paired "
    "interval and the exact McNemar test (A only / B only: episodes only that side got right); mean over "
    f"tasks: paired bootstrap interval ({DRAWS} draws) and exact paired randomisation test over episodes "
    "within tasks. * = significant at 95 % "
    f"after the {CORRECTION} correction over every p value of this table."
)
