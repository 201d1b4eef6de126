"""``builtin:text-only``: the honest floor of a task, what a model scores that reads the prompt and never listens.

It sees what a model sees except the audio: the task, the number of shots, the demo labels in their order,
the labels the query's own reference clips carry, the roles and the number of clips (``chat.items``
without their ``audio``: never a path, never a wave), and answers with the best rule those admit. Each task
gets a weight per answer; the answer is the heaviest, ties broken by a generator seeded from the run seed
and what the items say (so two chats that read the same get the same answer, whatever their audio).

- AudioCount, AudioCountHard: under the original's rule an episode's counts are distinct, so the query's
  count is one no demo has; demos that repeat a count rule that out (independent counts), and then every
  count is as likely as another. At k = 5 elimination alone scores 1/3 against 1/8 chance (and under
  independent counts it costs nothing: the query is then as likely to be any count).
- AudioOperator, AudioOperatorHard: the demo labels weigh the operator hypotheses (0 only comes from −,
  81 only from ×, 17 from + or from × and + ...); the answer is the value most likely under them, counting
  the digit expressions of the published recipe that give each value (digits 1-9, a ≥ b for −, values
  >= 0 for three digits) less those the demos used (an episode's expressions are distinct).
- AudioLength, AudioLengthHard, AnomalyDetect and other tasks with a finite label space: the label prior
  the prompt shows, the demo clips' label frequencies (Laplace-smoothed, no weight on the last one: no
  recency). AnomalyDetect demos show as many Normal as Anomalous clips, so it is a fair coin.
- AudioRemap: one of the six mix patterns, spelled with the letters the query's A and B clips carry.
- MorseCode: a common English word no demo is labelled with (chance is about zero; anything sensible).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from audioicl.prompts.chat import Chat
from audioicl.seeding import rng_for
from audioicl.tasks import TASKS
from audioicl.tasks.operator import DIGITS, Expression
from audioicl.tasks.remap import PATTERNS

from .registry import Solver, register_solver

NAME = "text-only"
COMMON_WORDS = ("about", "their", "there", "which", "would", "other", "these", "first", "could", "think")
COUNT_TASKS = ("AudioCount", "AudioCountHard")
Weights = dict[str, float]


@dataclass(frozen=True)
class Seen:
    """The text of a chat: per demo its clips' (role, label), the query's clips' (role, label) with the
    target's label None, in presentation order."""

    task: str
    demos: tuple[tuple[tuple[str | None, str | None], ...], ...]
    query: tuple[tuple[str | None, str | None], ...]

    @classmethod
    def of(cls, chat: Chat) -> Seen:
        demos: dict[int, list[tuple[str | None, str | None]]] = {}
        query: list[tuple[str | None, str | None]] = []
        for item in chat.items:
            if item.kind == "demo":
                demos.setdefault(item.index, []).append((item.role, item.label))
            elif item.kind == "query":
                query.append((item.role, item.label))
        return cls(chat.task, tuple(tuple(clips) for clips in demos.values()), tuple(query))

    def demo_labels(self) -> list[str]:
        """What each demo teaches: its last clip's label (the clip's, for single-clip tasks)."""
        return [demo[-1][1] or "" for demo in self.demos]

    def clip_labels(self, allowed: tuple[str, ...]) -> list[str]:
        """Every demo clip's label that is one of ``allowed`` (AnomalyDetect: both clips of a pair)."""
        return [label for demo in self.demos for _, label in demo if label in allowed]


def _values(task: str) -> tuple[str, ...] | None:
    return TASKS.get(task).labels.values if task in TASKS else None


# --------------------------------------------------------------------------- per task


def count_weights(seen: Seen, values: tuple[str, ...]) -> Weights:
    """Distinct demo counts (the original's rule): only the counts no demo has; a repeated count rules the
    rule out, and then every count is as likely. (Under independent counts, eliminating costs nothing.)"""
    labels = [label for label in seen.demo_labels() if label in values]
    if len(set(labels)) == len(labels) < len(values):
        return {v: float(v not in labels) for v in values}
    return dict.fromkeys(values, 1.0)


@functools.cache
def operator_value_counts(task: str) -> dict[tuple[str, ...], Counter[int]]:
    """How many digit expressions give each value, per operator hypothesis of the published recipe:
    one operation for AudioOperator (− with a ≥ b); × and one of + or − (× first or second, value >= 0)
    for AudioOperatorHard."""
    out: dict[tuple[str, ...], Counter[int]] = {}
    if task == "AudioOperator":
        for op in ("add", "sub", "mul"):
            pairs = itertools.product(DIGITS, repeat=2)
            out[(op,)] = Counter(Expression((a, b), (op,)).value for a, b in pairs if op != "sub" or a >= b)
    else:
        for other in ("add", "sub"):
            values = (
                Expression(digits, ops).value
                for digits in itertools.product(DIGITS, repeat=3)
                for ops in (("mul", other), (other, "mul"))
            )
            out[("mul", other)] = Counter(v for v in values if v >= 0)
    return out


def operator_weights(seen: Seen) -> Weights:
    """P(query value) = Σ over hypotheses of P(hypothesis | demo values) · P(value | hypothesis, demos),
    drawing an episode's expressions without replacement (so a value the demos used is less likely)."""
    labels = [int(label) for label in seen.demo_labels() if label.lstrip("-").isdigit()]
    hypotheses = operator_value_counts(seen.task)

    def predictive(use_demos: bool) -> Counter[int]:
        total: Counter[int] = Counter()
        for counts in hypotheses.values():
            size, used, likelihood = sum(counts.values()), Counter[int](), 1.0
            for i, value in enumerate(labels if use_demos else []):
                likelihood *= max(counts[value] - used[value], 0) / (size - i)
                used[value] += 1
            left = size - sum(used.values())
            if likelihood == 0 or left <= 0:
                continue
            for value, count in counts.items():
                total[value] += likelihood * max(count - used[value], 0) / left
        return total

    weights = predictive(True) or predictive(False)  # demo values no hypothesis explains: the recipe prior
    return {str(v): w for v, w in weights.items()}


def prior_weights(seen: Seen, values: tuple[str, ...]) -> Weights:
    counts = Counter(seen.clip_labels(values))
    return {v: counts[v] + 1.0 for v in values}


def remap_weights(seen: Seen) -> Weights:
    letters = {role: label for role, label in seen.query[:-1] if label}
    a, b = letters.get("A"), letters.get("B")
    if a is None or b is None:  # no lettered references: copy a demo label
        return dict.fromkeys(seen.demo_labels(), 1.0)
    return {"".join(a if c == "A" else b for c in pattern): 1.0 for pattern in PATTERNS}


def morse_weights(seen: Seen) -> Weights:
    shown = {label.lower() for label in seen.demo_labels()}
    return {next((w for w in COMMON_WORDS if w not in shown), COMMON_WORDS[0]): 1.0}


def majority_weights(seen: Seen) -> Weights:
    return dict(Counter(seen.demo_labels()))


def weights_for(seen: Seen) -> Weights:
    """The weight of each answer the text admits for this chat's task."""
    values = _values(seen.task)
    if seen.task in COUNT_TASKS and values:
        return count_weights(seen, values)
    if seen.task in ("AudioOperator", "AudioOperatorHard"):
        return operator_weights(seen)
    if seen.task == "AudioRemap":
        return remap_weights(seen)
    if seen.task == "MorseCode":
        return morse_weights(seen)
    if values:
        return prior_weights(seen, values)
    return majority_weights(seen)


# --------------------------------------------------------------------------- the solver


def text_key(chat: Chat) -> str:
    """A digest of what the items say (task, and each clip's kind, number, role, tag and shown label)."""
    fields = [chat.task] + [f"{i.kind}|{i.index}|{i.role}|{i.tag}|{i.label}" for i in chat.items]
    return hashlib.sha256("\x1f".join(fields).encode()).hexdigest()


def best_answers(weights: Mapping[str, float]) -> list[str]:
    """The heaviest answers (equal within rounding), in the order the weights list them."""
    best = max(weights.values(), default=0.0)
    return [answer for answer, weight in weights.items() if weight > 0 and weight >= best * (1 - 1e-9)]


def choose(weights: Mapping[str, float], rng: np.random.Generator) -> str:
    """The heaviest answer, ties drawn with ``rng``; empty when nothing is admitted."""
    tied = best_answers(weights)
    if not tied:
        return ""
    return tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]


def text_only_answer(chat: Chat, seed: int = 0) -> str:
    return choose(weights_for(Seen.of(chat)), rng_for(seed, "builtin:" + NAME, text_key(chat)))


@register_solver(NAME)
def text_only_solver(seed: int) -> Solver:
    """The floor: the best answer from the prompt's text alone (see the module docstring)."""
    solve: Callable[[Chat], str] = functools.partial(text_only_answer, seed=seed)
    return solve
