"""Perception probes: each query clip with its perceptual question asked directly, zero-shot.

A probe separates hearing from rule induction: it states the rule and asks what the clip holds, with the
answer known from the build, and is scored by the task's own rule. Per task:

- AudioCount(Hard): how many times the sound occurs (the count);
- AudioLength: how long the clip is; AudioLengthHard: for how many seconds there is sound;
- AudioOperator(Hard): which digits are spoken, written together (``37``); the answer comes from the
  builder's transcripts (``meta/transcripts.jsonl``), so a dataset without them gets error lines here;
- MorseCode: which word is keyed (the alphabet bank shown as in the task);
- AudioRemap: which reference plays at each position of the MIX, in the references' letters (the query
  as in the task: A and B with their letters, then the MIX);
- AnomalyDetect: whether the query sounds like a normal recording of the same machine (the first demo's
  Normal clip, shown as the one reference).

The probe of an episode is an episode (no demos, or the one reference) whose query label is the probe's
answer; ``PROBE_SET`` holds the questions as the instructions of a prompt set.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from audioicl.dataset.sidecar import Sidecar
from audioicl.records import Clip, Demo, Episode, Query
from audioicl.tasks.transcripts import read

from .sets import PromptSet

PROBE_QUESTIONS: dict[str, str] = {
    "AudioCount": "Listen to the clip below: one short sound occurs in it one or more times. How many times "
    "does it occur? Answer with a single integer only.",
    "AudioCountHard": "Listen to the clip below: over a background, one short sound occurs one or more "
    "times. How many times does it occur? Answer with a single integer only.",
    "AudioLength": "Listen to the clip below. How long is it, in seconds, rounded to a whole number? Answer "
    "with a single integer only.",
    "AudioLengthHard": "Listen to the clip below. Part of it may be complete silence. For how many seconds "
    "is there sound in it, rounded to a whole number? Answer with a single integer only.",
    "AudioOperator": "Listen to the clip below: a spoken digit, a sound effect, then another spoken digit. "
    'Which digits are spoken? Answer with the digits in order written together as one number (for "three" '
    'then "seven": 37), and nothing else.',
    "AudioOperatorHard": "Listen to the clip below: three spoken digits with a sound effect between each two. "
    'Which digits are spoken? Answer with the digits in order written together as one number (for "three", '
    '"seven", "one": 371), and nothing else.',
    "MorseCode": "The query clip below is a lowercase English word keyed in Morse code (letter clips before "
    "it, if any, show the code of each letter). Which word is it? Answer with the word only.",
    "AudioRemap": "Below are reference sound A and reference sound B, each labelled with a letter, then a "
    "clip of three sounds in a row, each of them one of the two references. Which reference plays at each "
    "position? Answer with three letters, the references' letters in order, and nothing else.",
    "AnomalyDetect": "The first clip below is a recording of a machine running normally. The query clip is a "
    "recording of the same machine. Does it sound like the normal recording, or different from it? Answer "
    "Normal or Anomalous only.",
}

PROBE_SET = PromptSet(instructions=PROBE_QUESTIONS)
SPOKEN_TASKS = ("AudioOperator", "AudioOperatorHard")


@dataclass(frozen=True)
class Probe:
    """The probe of one episode, or why there is none (``error``: the run writes an error line)."""

    episode: Episode
    error: str | None = None


def _spoken_digits(episode: Episode, sidecar: Sidecar | None) -> str | None:
    if sidecar is None:
        return None
    text = sidecar.transcripts.get(episode.query.target.audio_path)
    if text is None:
        return None
    digits = [part for part in read(text).spoken if isinstance(part, int)]
    return "".join(map(str, digits)) or None


def probe(episode: Episode, sidecar: Sidecar | None) -> Probe:
    """The probe of ``episode`` (read from a k file with at least one demo, for AnomalyDetect's reference)."""
    bare = replace(episode, demos=())
    if episode.task in SPOKEN_TASKS:
        digits = _spoken_digits(episode, sidecar)
        if digits is None:
            error = "the digits probe needs the builder's transcript of the query (meta/transcripts.jsonl)"
            return Probe(bare, error)
        return Probe(replace(bare, query=replace(episode.query, label=digits)))
    if episode.task == "AnomalyDetect":
        normal = next((c for d in episode.demos for c in d.clips if c.label == "Normal"), None)
        if normal is None:
            return Probe(bare, "the machine probe needs a Normal demo clip (read a k file with k >= 1)")
        reference = Demo((Clip(normal.audio_path, "Normal", "Normal"),), multi=True)
        query = Query((replace(episode.query.target, role="Query"),), episode.query.label, multi=True)
        return Probe(replace(bare, demos=(reference,), query=query))
    return Probe(bare)
