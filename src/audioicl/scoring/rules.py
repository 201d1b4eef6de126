"""The original's scoring rules per task (SPEC §5): how a response and its ground truth are read, the verdict.

The default rules reproduce the original evaluation script exactly, quirks included (``"3.5"`` reads as 5,
``"not normal"`` reads as normal, a null ``gt`` and an empty response are equal under the text rule). The
opt-in strict rules accept only a response that is the bare answer.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

INT_TASKS = frozenset(
    {"AudioCount", "AudioCountHard", "AudioOperator", "AudioOperatorHard", "AudioLength", "AudioLengthHard"}
)
ANOMALY_TASK = "AnomalyDetect"
REMAP_TASK = "AudioRemap"
REMAP_LENGTH = 3

_INT_RE = re.compile(r"[-+]?\d+")
_WS_PUNCT_RE = re.compile(r"[\s\.\,\;\:\!\?\(\)\[\]\{\}\"\']+")
_ASCII_LETTER_RE = re.compile(r"[A-Za-z]")
_STRICT_REMAP_RE = re.compile(rf"[A-Za-z]{{{REMAP_LENGTH}}}")
# The original's exact words that its substring rule (``anomaly_label``) would not read alike; its "normal",
# "anomalous", "anomaly" and "abnormal" entries read as their substrings do, so they are left to that rule.
_ANOMALY_WORDS = {
    "true": "anomalous",
    "1": "anomalous",
    "false": "normal",
    "0": "normal",
}
_STRICT_ANOMALY_WORDS = frozenset({"normal", "anomalous"})


# --- the per-response rules ----------------------------------------------------------------------------


@dataclass(slots=True)
class Verdict:
    """Whether a response is right, whether it held a readable answer, and the answer it was read as.

    ``prediction`` is an ``int`` (count/length/operator tasks), ``"normal"``/``"anomalous"``, three
    upper-case letters (AudioRemap), or the normalised text (other tasks); ``None`` when unparsed.
    (Not frozen, as frozen dataclasses are four times slower to build; never changed once made: the scorer
    shares one among a file's lines with the same task, response and ground truth.)
    """

    correct: bool
    parsed: bool
    prediction: object


UNPARSED = Verdict(False, False, None)
_EMPTY_BUT_RIGHT = Verdict(True, False, None)


def normalize_text(value: object) -> str:
    """The original's normalisation: str, strip, lower-case, delete whitespace and ``.,;:!?()[]{}"'``."""
    text = "" if value is None else str(value)
    return _WS_PUNCT_RE.sub("", text.strip().lower())


def _int_or_none(digits: str) -> int | None:
    try:
        return int(digits)
    except ValueError:  # past Python's 4,300-digit limit: the original reads it as no number too
        return None


def last_int(value: object) -> int | None:
    """The last match of ``[-+]?\\d+`` in the text, as int (``"3.5"`` → 5, ``"-2"`` → -2)."""
    text = "" if value is None else str(value)
    if text.isdecimal():  # a bare unsigned number; isdecimal is exactly the set \d matches
        return _int_or_none(text)
    matches = _INT_RE.findall(text)
    return _int_or_none(matches[-1]) if matches else None


def gt_int(gt: object) -> int | None:
    """Ground truth of a numeric task: an int as is (bools too, as the original), else its last integer."""
    return gt if isinstance(gt, int) else last_int(gt)


def anomaly_label(value: object) -> str | None:
    """``"normal"`` / ``"anomalous"`` / None by the original's exact words, then substrings."""
    text = normalize_text(value)
    label = _ANOMALY_WORDS.get(text)
    if label is not None:
        return label
    if "anomal" in text or "abnorm" in text:
        return "anomalous"
    if "normal" in text:
        return "normal"
    return None


def remap_letters(value: object) -> str | None:
    """The ASCII letters of the text, upper-cased, if there are exactly three of them."""
    if value is None:
        return None
    letters = "".join(_ASCII_LETTER_RE.findall(str(value))).upper()
    return letters if len(letters) == REMAP_LENGTH else None


def _strict_int(response: object) -> int | None:
    text = str(response).strip()
    return _int_or_none(text) if _INT_RE.fullmatch(text) else None


def _strict_anomaly(response: object) -> str | None:
    text = str(response).strip().lower()
    return text if text in _STRICT_ANOMALY_WORDS else None


def _strict_remap(response: object) -> str | None:
    text = str(response).strip()
    return text.upper() if _STRICT_REMAP_RE.fullmatch(text) else None


def _strict_text(response: object) -> str | None:
    text = str(response).strip().lower()
    return text if text and not _WS_PUNCT_RE.search(text) else None


def _memoised(read: Callable[[object], object]) -> Callable[[object], object]:
    """``read`` with a cache: a result file holds a handful of distinct ground-truth labels per task.
    Typed, so that 1, 1.0 and True stay apart (``gt_int`` reads them differently)."""
    cached = functools.lru_cache(maxsize=4096, typed=True)(read)

    def read_gt(gt: object) -> object:
        try:
            return cached(gt)
        except TypeError:  # unhashable (a list or an object as gt)
            return read(gt)

    return read_gt


@dataclass(frozen=True, slots=True)
class Rule:
    """How one task reads a response and its ground truth; ``None`` from either means unreadable."""

    read_response: Callable[[object], object]
    read_gt: Callable[[object], object]

    def judge(self, response: object, gt: object) -> Verdict:
        if response is None:
            return UNPARSED
        prediction = self.read_response(response)
        if prediction is None:
            return UNPARSED
        if prediction == "":  # the text rule: unparsed, yet right when gt is empty too (as the original)
            return _EMPTY_BUT_RIGHT if self.read_gt(gt) == "" else UNPARSED
        return Verdict(prediction == self.read_gt(gt), True, prediction)


_GT_INT, _GT_ANOMALY = _memoised(gt_int), _memoised(anomaly_label)
_GT_REMAP, _GT_TEXT = _memoised(remap_letters), _memoised(normalize_text)
_RULES: dict[str, Rule] = {
    **dict.fromkeys(INT_TASKS, Rule(last_int, _GT_INT)),
    ANOMALY_TASK: Rule(anomaly_label, _GT_ANOMALY),
    REMAP_TASK: Rule(remap_letters, _GT_REMAP),
}
_STRICT_RULES: dict[str, Rule] = {
    **dict.fromkeys(INT_TASKS, Rule(_strict_int, _GT_INT)),
    ANOMALY_TASK: Rule(_strict_anomaly, _GT_ANOMALY),
    REMAP_TASK: Rule(_strict_remap, _GT_REMAP),
}
_TEXT_RULE = Rule(normalize_text, _GT_TEXT)
_STRICT_TEXT_RULE = Rule(_strict_text, _GT_TEXT)


def rule_table(*, strict: bool = False) -> tuple[Mapping[str, Rule], Rule]:
    """The rules by task name and the rule for any other task (normalised text): for a loop over many lines."""
    return (_STRICT_RULES, _STRICT_TEXT_RULE) if strict else (_RULES, _TEXT_RULE)


def rule_for(task: str, *, strict: bool = False) -> Rule:
    """The original's rule for ``task`` (SPEC §5): numeric, anomaly, remap, else normalised text."""
    rules, fallback = rule_table(strict=strict)
    return rules.get(task, fallback)


def judge(task: str, response: str | None, gt: object, *, strict: bool = False) -> Verdict:
    """Score one response by the original's rule for ``task`` (SPEC §5); a null response is wrong.

    ``strict=True`` (never the default) accepts only a response that is the bare answer: an integer,
    ``normal``/``anomalous``, three letters, or the word itself (case and surrounding whitespace aside).
    Anything strict accepts as correct, the default accepts too.
    """
    return rule_for(task, strict=strict).judge(response, gt)
