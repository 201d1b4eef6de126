"""Where answers go wrong, from judged result lines: the offset of numeric answers from the truth (count and
length tasks), the pull of the demos' labels (label-prior bias) and the letter errors of Morse words.

- **Offsets** (AudioCount, AudioCountHard, AudioLength, AudioLengthHard): answer − truth of every parsed
  answer; a peak at ±1 is a near miss, a flat spread a guess.
- **Label prior**: how often the answer is the demos' majority label (the one label most demos carry; episodes
  without a single most common label are left out of that number) and the last demo's label, against how
  often that label is the truth. An answer rate well above the truth rate is a model copying the demos rather
  than applying the rule. Demo labels come from the dataset's meta files, so only lines asked with the meta's
  demos in the meta's order count: plain lines and lines of draw 0, order 0 (any variant); the others are
  counted apart (``other_demos``).
- **Letters** (MorseCode): the answered word aligned to the true word by edit distance; each true letter is
  right, replaced by another letter, or dropped, and an answered letter with no true one is inserted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .lines import ScoredLine
from .rules import rule_for

OFFSET_TASKS = ("AudioCount", "AudioCountHard", "AudioLength", "AudioLengthHard")
MORSE_TASK = "MorseCode"
GAP = ""  # the other side of a dropped or an inserted letter

Cell = tuple[str, int, str]  # (model, shots, task)


@dataclass(frozen=True)
class Offsets:
    """answer − truth → parsed answers, and the answers the rule could not read, of one cell."""

    model: str
    shots: int
    task: str
    counts: Mapping[int, int]
    unparsed: int

    @property
    def parsed(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class LabelPrior:
    """Of one cell's ``lines`` (asked with the meta's demos): how many answered the demos' majority label
    and how many had it as truth (over the ``majority_lines`` whose demos have one), how many answered the
    last demo's label and had it as truth; ``other_demos``: lines asked with other demos (draws, orders),
    ``unknown``: lines whose episode the meta files lack."""

    model: str
    shots: int
    task: str
    lines: int = 0
    majority_lines: int = 0
    answered_majority: int = 0
    truth_majority: int = 0
    answered_last: int = 0
    truth_last: int = 0
    other_demos: int = 0
    unknown: int = 0


@dataclass(frozen=True)
class LetterErrors:
    """(true letter, answered letter) → count over one cell's parsed answers; ``GAP`` on one side: a
    dropped (answered GAP) or an inserted (true GAP) letter."""

    model: str
    shots: int
    task: str
    pairs: Mapping[tuple[str, str], int] = field(default_factory=dict)
    words: int = 0
    unparsed: int = 0

    def errors(self) -> list[tuple[tuple[str, str], int]]:
        """The confusions (not the right letters), most frequent first, then alphabetical."""
        wrong = [(pair, n) for pair, n in self.pairs.items() if pair[0] != pair[1]]
        return sorted(wrong, key=lambda item: (-item[1], item[0]))

    def letter_error_rate(self) -> dict[str, float]:
        """Per true letter, the share of its occurrences answered as anything else (dropped included)."""
        totals: Counter[str] = Counter()
        wrong: Counter[str] = Counter()
        for (truth, answer), n in self.pairs.items():
            if truth != GAP:
                totals[truth] += n
                wrong[truth] += n * (truth != answer)
        return {letter: wrong[letter] / totals[letter] for letter in sorted(totals)}


def _cells(lines: Iterable[ScoredLine], tasks: Sequence[str] | None = None) -> dict[Cell, list[ScoredLine]]:
    grouped: dict[Cell, list[ScoredLine]] = {}
    for line in lines:
        if not line.malformed and (tasks is None or line.task in tasks):
            grouped.setdefault((line.model, line.shots, line.task), []).append(line)
    return dict(sorted(grouped.items()))


def offsets(lines: Iterable[ScoredLine]) -> list[Offsets]:
    """answer − truth per cell of the count and length tasks (a truth the rule cannot read: unparsed)."""
    found = []
    for (model, shots, task), cell in _cells(lines, OFFSET_TASKS).items():
        truth_of = rule_for(task).read_gt
        counts: Counter[int] = Counter()
        unparsed = 0
        for line in cell:
            truth = truth_of(line.gt)
            if line.verdict.parsed and isinstance(line.verdict.prediction, int) and isinstance(truth, int):
                counts[line.verdict.prediction - truth] += 1
            else:
                unparsed += 1
        found.append(Offsets(model, shots, task, dict(sorted(counts.items())), unparsed))
    return found


def majority_label(labels: Sequence[object]) -> object | None:
    """The one most common label, or None when two or more tie (or there are none)."""
    ranked = Counter(labels).most_common(2)
    if not ranked or (len(ranked) == 2 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def label_priors(
    lines: Iterable[ScoredLine], demo_labels: Mapping[tuple[int, str], Sequence[str | None]]
) -> list[LabelPrior]:
    """The label-prior counts of every cell with demos (k ≥ 1); ``demo_labels``: (k, episode id) → the
    labels of its demos in the meta's order (``Demo.label``), read by each task's rule as its ground truth."""
    found = []
    for (model, shots, task), cell in _cells(lines).items():
        if shots < 1:
            continue
        read = rule_for(task).read_gt
        tally = Counter()
        for line in cell:
            demos = demo_labels.get((shots, str(line.id)))
            if line.replicate is not None and line.replicate[:2] != (0, 0):
                tally["other_demos"] += 1
                continue
            if not demos:
                tally["unknown"] += 1
                continue
            labels = [read(label) for label in demos]
            answer = line.verdict.prediction if line.verdict.parsed else None
            truth = read(line.gt)
            tally["lines"] += 1
            tally["answered_last"] += answer is not None and answer == labels[-1]
            tally["truth_last"] += truth == labels[-1]
            majority = majority_label(labels)
            if majority is not None:
                tally["majority_lines"] += 1
                tally["answered_majority"] += answer is not None and answer == majority
                tally["truth_majority"] += truth == majority
        found.append(LabelPrior(model, shots, task, **tally))
    return found


def align(truth: str, answer: str) -> list[tuple[str, str]]:
    """The letters of ``truth`` and ``answer`` paired by a minimal edit (Levenshtein) alignment: (t, a)
    kept or replaced, (t, GAP) dropped, (GAP, a) inserted; ties prefer replacing, then dropping."""
    rows, columns = len(truth) + 1, len(answer) + 1
    cost = [[0] * columns for _ in range(rows)]
    for i in range(rows):
        cost[i][0] = i
    for j in range(columns):
        cost[0][j] = j
    for i in range(1, rows):
        for j in range(1, columns):
            cost[i][j] = min(
                cost[i - 1][j - 1] + (truth[i - 1] != answer[j - 1]),
                cost[i - 1][j] + 1,
                cost[i][j - 1] + 1,
            )
    pairs = []
    i, j = len(truth), len(answer)
    while i or j:
        if i and j and cost[i][j] == cost[i - 1][j - 1] + (truth[i - 1] != answer[j - 1]):
            pairs.append((truth[i - 1], answer[j - 1]))
            i, j = i - 1, j - 1
        elif i and cost[i][j] == cost[i - 1][j] + 1:
            pairs.append((truth[i - 1], GAP))
            i -= 1
        else:
            pairs.append((GAP, answer[j - 1]))
            j -= 1
    return pairs[::-1]


def letter_errors(lines: Iterable[ScoredLine]) -> list[LetterErrors]:
    """Letter pairs of the Morse words per cell: every parsed answer (its normalised text) against the
    normalised true word."""
    found = []
    for (model, shots, task), cell in _cells(lines, (MORSE_TASK,)).items():
        read = rule_for(task).read_gt
        pairs: Counter[tuple[str, str]] = Counter()
        words = unparsed = 0
        for line in cell:
            if not line.verdict.parsed or not isinstance(line.verdict.prediction, str):
                unparsed += 1
                continue
            words += 1
            pairs.update(align(str(read(line.gt)), line.verdict.prediction))
        found.append(LetterErrors(model, shots, task, dict(pairs), words, unparsed))
    return found
