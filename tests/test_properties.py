"""Property-based tests (hypothesis) of every parser a user feeds: meta lines, results lines (reading, repairing,
scoring), prompt files (YAML and JSON), the run command's ``--config`` file, the scorer's answer rules, the
manifest and the audio paths a meta line or a manifest names.

The contract each parser is held to: every input gets a result or an ``AudioICLError`` naming the file (and the
line, and the episode id where the line tells one), never another exception; and no line is dropped: every
non-blank line is accounted for, as an episode / a scored line or as the problem that stops it from being one.
Inputs mix well-formed records with mutated ones (a key dropped, a value replaced by any JSON value), arbitrary
JSON, arbitrary text and bytes, cut lines, numbers past Python's 4,300-digit limit, deep nesting, and the line
endings ``\\n``, ``\\r\\n`` and ``\\r``.

Profiles: ``ci`` (the default) bounds every property to a few dozen to a few hundred examples, so that this
module runs in about a minute on two cores; ``long`` (``AUDIOICL_HYPOTHESIS=long python -m pytest
tests/test_properties.py``) tries twenty times as many. Neither keeps an example database (nothing is written
into the checkout); ``ci`` is derandomized (the same inputs every run), ``long`` draws new ones; a failure prints its minimal example and the ``@reproduce_failure`` blob. ``pytest
--hypothesis-show-statistics`` says how many inputs each property tried.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from audioicl.cli.main import main
from audioicl.dataset.manifest import MANIFEST_NAME, read_manifest
from audioicl.dataset.meta import dumps_episode, iter_meta, read_meta, resolve_audio_path, scan_meta
from audioicl.dataset.validate import check_manifest
from audioicl.errors import AudioICLError
from audioicl.inference.results import iter_results, repair_tail
from audioicl.prompts.sets import DEFAULT_SYSTEM, FAMILIES, GENERAL_INSTRUCTION, load_prompt_set
from audioicl.scoring.rules import (
    ANOMALY_TASK,
    INT_TASKS,
    REMAP_TASK,
    anomaly_label,
    judge,
    last_int,
    normalize_text,
    remap_letters,
)
from audioicl.scoring.score import ResultFile, ScoreOptions, iter_scored_lines, score_files
from audioicl.tasks import TASKS

# --------------------------------------------------------------------------- profiles

settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,  # CI sees the same inputs every run; ``long`` explores new ones
    deadline=None,  # two shared cores: timing is not what is tested
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("long", settings.get_profile("ci"), max_examples=2000, derandomize=False)
PROFILE = os.environ.get("AUDIOICL_HYPOTHESIS", "ci")
SCALE = 20 if PROFILE == "long" else 1


def examples(n: int) -> settings:
    """The profile's settings with ``n`` examples (``ci``), ``20 n`` with ``long``; nothing global is changed."""
    return settings(settings.get_profile(PROFILE), max_examples=n * SCALE)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("properties")


def fresh(workdir: Path) -> Path:
    """A new empty folder for one example (hypothesis runs many examples in one test call)."""
    return Path(tempfile.mkdtemp(dir=workdir))


# --------------------------------------------------------------------------- strategies

TASK_NAMES = TASKS.names()
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["", "0", "7"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
extras = st.dictionaries(st.text(max_size=5), json_scalars | st.lists(json_scalars, max_size=2), max_size=2)
texts = st.text(max_size=16) | st.sampled_from(
    ["", " ", "normal", "Anomalous", "ABA", "3.5", "-2", "٣", "x\u2028y"]
)
BIG_INT = "9" * 4400  # past Python's 4,300-digit limit for int(str)
# lines that are not JSON, or JSON that the standard library cannot decode
broken_lines = st.one_of(
    st.text(max_size=40),
    st.binary(max_size=40),
    st.sampled_from(
        [
            '{"id": "AudioICL00001", "task": "AudioCount", "demos": [',  # cut short
            '{"id": "AudioICL00001"} {"id": "AudioICL00002"}',  # two values
            '{"id": "AudioICL00001", "gt": ' + BIG_INT + "}",
            '{"id": "AudioICL00001", "gt": '
            + "[" * 1100
            + "]" * 1100
            + "}",  # deeper than the recursion limit
            "[" * 1100,
            '{"id": "\\ud800"}',  # a lone surrogate escape: valid JSON, not valid UTF-8
            "\ufeff{}",
            "NaN",
            "null",
            '"just a string"',
        ]
    ),
)


@st.composite
def clip_objects(draw, *, role: bool, label: bool | None) -> dict:
    """A clip as the original writes it: role, audio_path, label, then any extra keys (the writer's order)."""
    obj: dict = {}
    if role:
        obj["role"] = draw(
            st.sampled_from(["A", "B", "MIX", "Normal", "Anomalous", "Query"]) | st.text(max_size=4)
        )
    obj["audio_path"] = draw(st.text(max_size=20) | st.sampled_from(["data/audiocount/easy/a_1.wav"]))
    if label is None:
        label = draw(st.booleans())
    if label:
        obj["label"] = draw(texts)
    extra = draw(extras) if draw(st.integers(0, 3)) == 0 else {}
    obj.update({k: v for k, v in extra.items() if k not in ("role", "audio_path", "label", "clips")})
    return obj


@st.composite
def meta_records(draw) -> dict:
    """A well-formed meta record, single-clip or multi-clip, its keys in the writer's order."""
    multi = draw(st.booleans())
    record: dict = {
        "id": draw(st.text(max_size=14)),
        "task": draw(st.sampled_from(TASK_NAMES) | st.text(max_size=8)),
    }
    extra = draw(extras)
    record.update({k: v for k, v in extra.items() if k not in ("id", "task", "demos", "query")})
    demos = []
    for _ in range(draw(st.integers(0, 3))):
        if multi:
            clips = [draw(clip_objects(role=True, label=None)) for _ in range(draw(st.integers(0, 2)))]
            clips.append(draw(clip_objects(role=True, label=True)))
            demo_extra = draw(extras) if draw(st.integers(0, 3)) == 0 else {}
            demos.append({"clips": clips, **{k: v for k, v in demo_extra.items() if k != "clips"}})
        else:
            demos.append(draw(clip_objects(role=False, label=True)))
    record["demos"] = demos
    if multi:
        clips = [draw(clip_objects(role=True, label=None)) for _ in range(draw(st.integers(0, 2)))]
        clips.append(draw(clip_objects(role=True, label=False)))
        query_extra = draw(extras) if draw(st.integers(0, 3)) == 0 else {}
        record["query"] = {
            "clips": clips,
            "label": draw(texts),
            **{k: v for k, v in query_extra.items() if k not in ("clips", "label")},
        }
    else:
        record["query"] = draw(clip_objects(role=False, label=True))
    return record


def _paths_in(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a JSON value (for mutating one place of a record)."""
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths_in(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths_in(item, (*prefix, index))
    return found


@st.composite
def mutated(draw, records) -> dict | list:
    """A well-formed record with one place changed: deleted, or replaced by any JSON value."""
    record = json.loads(json.dumps(draw(records)))
    places = _paths_in(record)
    if not places:
        return record
    place = draw(st.sampled_from(places))
    parent = record
    for key in place[:-1]:
        parent = parent[key]
    if draw(st.booleans()):
        del parent[place[-1]]
    else:
        parent[place[-1]] = draw(json_values)
    return record


def encode(value: object) -> bytes:
    """One JSON line as the original writes it (``ensure_ascii=False``); escaped where it holds a lone surrogate."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode("ascii")


blank_lines = st.sampled_from([b"", b" ", b"\t", b"  \t ", b"\x0c", b"\xc2\xa0", "\u3000".encode()])


def as_bytes(line: str | bytes) -> bytes:
    return line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")


@st.composite
def line_files(draw, good, separators: tuple[bytes, ...]) -> tuple[bytes, dict[int, bytes]]:
    """A file of lines: well-formed ones (``good``), mutated ones, arbitrary JSON, broken lines and blank lines,
    joined by one of ``separators``, with or without a final one. Returns the bytes and, by line number (the
    separator's numbering), the well-formed lines as written."""
    kinds = st.sampled_from(["good", "good", "mutated", "json", "broken", "blank"])
    separator = draw(st.sampled_from(separators))
    lines: list[bytes] = []
    wellformed: dict[int, bytes] = {}
    for number in range(1, draw(st.integers(0, 8)) + 1):
        kind = draw(kinds)
        if kind == "good":
            lines.append(encode(draw(good)))
            wellformed[number] = lines[-1]
        elif kind == "mutated":
            lines.append(encode(draw(mutated(good))))
        elif kind == "json":
            lines.append(encode(draw(json_values)))
        elif kind == "broken":
            lines.append(as_bytes(draw(broken_lines)))
        else:
            lines.append(draw(blank_lines))
    # a line must not hold the separators of the file (they would make it two lines)
    lines = [re.sub(rb"[\r\n]", b" ", line) for line in lines]
    data = separator.join(lines) + (separator if lines and draw(st.booleans()) else b"")
    return data, wellformed


def split_lines(data: bytes, pattern: bytes) -> list[bytes]:
    """A file's lines as the reader under test numbers them (the last one empty when the file ends in one)."""
    return re.split(pattern, data)


def decoded(raw: bytes) -> str | None:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def object_or_none(text: str | None) -> object:
    """The JSON value of ``text`` where the standard library decodes it; a marker where it does not."""
    if text is None:
        return BROKEN
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return BROKEN


BROKEN = object()


# --------------------------------------------------------------------------- meta lines


# the minimal inputs of the bugs these properties found run first, every time (see each fix's comment)
FOUND_BIG_INT = b'{"id": "AudioICL00001", "gt": ' + BIG_INT.encode() + b"}"
FOUND_DEEP = b'{"id": "x", "gt": ' + b"[" * 1100 + b"]" * 1100 + b"}"


@examples(150)
@given(line_files(meta_records(), (b"\n", b"\r\n", b"\r")))
@example((FOUND_BIG_INT, {}))
@example((FOUND_DEEP, {}))
def test_meta_every_nonblank_line_is_an_episode_or_a_located_problem(workdir, generated):
    data, wellformed = generated
    path = fresh(workdir) / "meta_k1.jsonl"
    path.write_bytes(data)
    raws = split_lines(data, rb"\n")  # meta files are split at \n only (\r\n leaves \r, which JSON ignores)
    nonblank = {n for n, raw in enumerate(raws, 1) if raw.strip()}

    lines, problems = scan_meta(path)
    event(f"{'some' if problems else 'no'} bad lines, {'some' if lines else 'no'} episodes")
    good_lines = [m.line for m in lines]
    bad_lines = [p.line for p in problems]
    assert sorted(good_lines + bad_lines) == sorted(nonblank)  # every line once, none dropped, none twice
    assert good_lines == sorted(good_lines) and bad_lines == sorted(bad_lines)
    for problem in problems:
        assert isinstance(problem, AudioICLError)
        assert problem.file == str(path) and problem.line is not None and problem.message
        value = object_or_none(decoded(raws[problem.line - 1]))
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            assert problem.id == value["id"]
    for entry in lines:
        assert entry.file == path
        if entry.line in wellformed:  # the writer's key order: written back byte for byte
            assert dumps_episode(entry.episode).encode() == wellformed[entry.line]
    for number, raw in wellformed.items():
        if raw.strip() and b"\r" not in data:
            assert number in good_lines

    if problems:
        with pytest.raises(AudioICLError) as caught:
            read_meta(path)
        assert (caught.value.file, caught.value.line) == (str(path), problems[0].line)
        with pytest.raises(AudioICLError):
            list(iter_meta(path))
    else:
        assert read_meta(path) == [m.episode for m in lines]
        assert [m.line for m in iter_meta(path)] == good_lines


@examples(60)
@given(meta_records())
def test_meta_wellformed_record_reads_back_byte_for_byte(workdir, record):
    path = fresh(workdir) / "meta_k2.jsonl"
    line = json.dumps(record, ensure_ascii=False)
    path.write_text(line + "\n", encoding="utf-8")
    (episode,) = read_meta(path)
    assert dumps_episode(episode) == line
    assert episode.id == record["id"] and episode.task == record["task"]
    assert len(episode.demos) == len(record["demos"])


# --------------------------------------------------------------------------- results lines

results_tasks = st.sampled_from([*INT_TASKS, ANOMALY_TASK, REMAP_TASK, "MorseCode", ""]) | st.text(max_size=6)
responses = (
    st.none() | texts | st.integers() | st.floats() | st.lists(st.integers(), max_size=2) | json_values
)


@st.composite
def result_records(draw) -> dict:
    record = {"id": draw(st.text(max_size=14)), "task": draw(results_tasks), "response": draw(responses)}
    record["gt"] = draw(responses)
    if draw(st.booleans()):
        record["status"] = draw(st.sampled_from(["ok", "error"]))
    if draw(st.booleans()):
        record["audio_paths"] = draw(st.lists(st.text(max_size=6), max_size=2) | json_values)
    for key in draw(st.lists(st.sampled_from(["task", "response", "gt"]), max_size=1)):
        del record[key]  # a missing task, response or gt is allowed
    return record


RESULT_SEPARATORS = (b"\n", b"\r\n", b"\r")
RESULT_SPLIT = rb"\r\n|\r|\n"  # the original's text-mode reading


def classify_results(data: bytes) -> tuple[set[int], set[int], set[int], dict[int, dict]]:
    """By line number: the non-blank lines, those ``iter_results`` refuses, those the scorer counts as
    malformed, and the records the scorer reads."""
    nonblank, refused, malformed, records = set(), set(), set(), {}
    for number, raw in enumerate(split_lines(data, RESULT_SPLIT), 1):
        text = decoded(raw)
        if text is not None and not text.strip():
            continue
        nonblank.add(number)
        scored = object_or_none(None if text is None else text.strip())
        if not (isinstance(scored, dict) and isinstance(scored.get("id"), str)):
            refused.add(number)  # the resume reader reads a line as the scorer does
        if isinstance(scored, dict):
            records[number] = scored
        else:
            malformed.add(number)
    return nonblank, refused, malformed, records


@examples(150)
@given(line_files(result_records(), RESULT_SEPARATORS))
@example((FOUND_BIG_INT, {}))
@example((FOUND_DEEP, {}))
@example((b'{"id": "a"}\r{"id": "b"}\r\xff\n', {}))  # the line of a byte that is not UTF-8, after \r endings
@example(('\u00a0{"id": "a"}\u3000\n'.encode(), {}))  # Unicode spaces around a line: read, as the scorer does
def test_results_lines_are_read_or_refused_naming_file_and_line(workdir, generated):
    data, _ = generated
    path = fresh(workdir) / "m_results_k1.jsonl"
    path.write_bytes(data)
    nonblank, refused, _, _ = classify_results(data)
    undecodable = {n for n, raw in enumerate(split_lines(data, RESULT_SPLIT), 1) if decoded(raw) is None}
    if refused:
        with pytest.raises(AudioICLError) as caught:
            list(iter_results(path))
        error = caught.value
        assert error.file == str(path) and error.line in refused
        if not undecodable:
            assert error.line == min(refused)
    else:
        got = list(iter_results(path))
        assert [r.line for r in got] == sorted(nonblank)
        assert all(r.file == path and isinstance(r.id, str) for r in got)


def test_resume_and_scoring_read_a_line_with_unicode_spaces_around_it_alike(workdir):
    """Regression: the resume reader refused a line the scorer reads (a no-break space before its JSON)."""
    path = fresh(workdir) / "m_results_k1.jsonl"
    line = '{"id": "e1", "task": "AudioCount", "response": "3", "gt": "3"}'
    path.write_text("\u00a0" + line + "\u3000\n", encoding="utf-8")
    assert [r.id for r in iter_results(path)] == ["e1"]
    scored = list(iter_scored_lines(ResultFile(path, "m", 1), ScoreOptions(workers=1)))
    assert [(s.id, s.verdict.correct) for s in scored] == [("e1", True)]


@examples(150)
@given(line_files(result_records(), RESULT_SEPARATORS))
@example((FOUND_BIG_INT, {}))
@example((b'{"id": "a", "task": "AudioCount", "response": "1", "gt": "1"}\n\xff\n', {}))  # one line not UTF-8
def test_scoring_accounts_for_every_nonblank_line(workdir, generated):
    data, _ = generated
    path = fresh(workdir) / "m_results_k1.jsonl"
    path.write_bytes(data)
    nonblank, _, malformed, records = classify_results(data)
    result = ResultFile(path, "m", 1)

    lenient = ScoreOptions(skip_bad_lines=True, workers=1)
    scored = list(iter_scored_lines(result, lenient))
    event(f"{'some' if malformed else 'no'} malformed lines")
    assert [s.line for s in scored] == sorted(nonblank)  # every non-blank line, in order, once
    assert {s.line for s in scored if s.malformed} == malformed
    for line in scored:
        if line.malformed:
            assert not line.verdict.correct and not line.verdict.parsed and line.task == ""
            continue
        record = records[line.line]
        task = record.get("task", "")
        task = task if isinstance(task, str) else str(task)
        assert line.task == task
        expected = judge(task, record.get("response"), record.get("gt"))
        assert (line.verdict.correct, line.verdict.parsed) == (expected.correct, expected.parsed)
        assert line.error == (record.get("status") == "error")

    tally = score_files([result], lenient)
    # a malformed line is counted in its task (as wrong) where its text tells the task, else as unreadable
    assert sum(row.n for row in tally.rows) + getattr(tally, "unreadable", 0) == len(nonblank)
    assert tally.malformed == len(malformed)
    assert sum(row.correct for row in tally.rows) == sum(s.verdict.correct for s in scored)
    for row in tally.rows:
        assert row.accuracy == row.correct / row.n

    strict = ScoreOptions(workers=1)
    if malformed:
        for attempt in (
            lambda: list(iter_scored_lines(result, strict)),
            lambda: score_files([result], strict),
        ):
            with pytest.raises(AudioICLError) as caught:
                attempt()
            assert caught.value.file == str(path) and caught.value.line == min(malformed)
    else:
        again = list(iter_scored_lines(result, strict))
        assert [(s.line, s.verdict.correct) for s in again] == [(s.line, s.verdict.correct) for s in scored]
        assert [(r.task, r.n, r.correct) for r in score_files([result], strict).rows] == [
            (r.task, r.n, r.correct) for r in tally.rows
        ]


@examples(100)
@given(st.binary(max_size=60) | line_files(result_records(), RESULT_SEPARATORS).map(lambda g: g[0]))
def test_repair_tail_cuts_exactly_the_unfinished_last_line(workdir, data):
    path = fresh(workdir) / "m_results_k1.jsonl"
    path.write_bytes(data)
    report = repair_tail(path)
    keep = data if not data or data.endswith(b"\n") else data[: data.rfind(b"\n") + 1]
    assert path.read_bytes() == keep
    assert (report is None) == (keep == data)
    if report is not None:
        assert str(path) in report and f"({len(data) - len(keep)} bytes)" in report
    assert repair_tail(path) is None  # once is enough
    assert repair_tail(path.with_name("absent_results_k1.jsonl")) is None


# --------------------------------------------------------------------------- the scorer's answer rules

rule_tasks = st.sampled_from(
    [*INT_TASKS, ANOMALY_TASK, REMAP_TASK, "MorseCode", "", "AudioRemapX"]
) | st.text(max_size=8)
anything = (
    st.none()
    | texts
    | st.integers()
    | st.floats()
    | st.booleans()
    | st.lists(json_scalars, max_size=3)
    | json_values
)
PUNCT = " .,;:!?()[]{}\"'\t\n"


@examples(300)
@given(rule_tasks, anything, anything)
def test_judge_never_raises_and_strict_accepts_only_what_default_accepts(task, response, gt):
    default = judge(task, response, gt)
    strict = judge(task, response, gt, strict=True)
    for verdict in (default, strict):
        assert isinstance(verdict.correct, bool) and isinstance(verdict.parsed, bool)
        if not verdict.parsed:
            assert verdict.prediction is None
    if strict.correct:
        assert default.correct
    if strict.parsed:
        assert default.parsed and default.prediction == strict.prediction
    if response is None:
        assert not default.correct and not default.parsed


@examples(300)
@given(anything)
def test_readers_never_raise_and_return_their_kind(value):
    number = last_int(value)
    assert number is None or isinstance(number, int)
    assert anomaly_label(value) in (None, "normal", "anomalous")
    letters = remap_letters(value)
    assert letters is None or re.fullmatch("[A-Z]{3}", letters)
    text = normalize_text(value)
    assert isinstance(text, str) and not any(c.isspace() or c in PUNCT for c in text)


@examples(200)
@given(st.text(max_size=20), st.integers(-(10**30), 10**30))
def test_last_int_reads_the_last_number(prefix, number):
    assert last_int(f"{prefix} {number}") == number
    assert last_int(f"{prefix} {number}.") == number
    assert judge("AudioCount", f"{prefix} Answer: {number}", str(number)).correct
    assert judge("AudioCount", str(number), number, strict=True).correct


@examples(200)
@given(st.text(max_size=30))
def test_last_int_finds_no_number_where_there_is_no_digit(text):
    has_digit = any(c.isdecimal() for c in text)
    assert (last_int(text) is not None) == has_digit


@examples(150)
@given(
    st.sampled_from(["normal", "anomalous", "anomaly", "abnormal", "true", "1", "false", "0"]),
    st.lists(st.sampled_from(list(PUNCT)), max_size=6),
    st.randoms(use_true_random=False),
)
def test_anomaly_words_read_through_case_whitespace_and_punctuation(word, junk, rng):
    expected = anomaly_label(word)
    chars = list(word.upper() if rng.random() < 0.5 else word)
    for piece in junk:
        chars.insert(rng.randrange(len(chars) + 1), piece)
    assert anomaly_label("".join(chars)) == expected
    assert judge(ANOMALY_TASK, "".join(chars), word).correct


@examples(150)
@given(
    st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", min_size=3, max_size=3),
    st.text(max_size=12).map(lambda t: re.sub("[A-Za-z]", "", t)),
    st.randoms(use_true_random=False),
)
def test_remap_keeps_only_ascii_letters(letters, junk, rng):
    chars = list(letters)
    for piece in junk:
        chars.insert(rng.randrange(len(chars) + 1), piece)
    assert remap_letters("".join(chars)) == letters.upper()
    assert judge(REMAP_TASK, "".join(chars), letters.lower()).correct


@examples(200)
@given(anything)
def test_normalize_text_is_idempotent(value):
    once = normalize_text(value)
    assert normalize_text(once) == once


# --------------------------------------------------------------------------- prompt files

family_keys = st.sampled_from(FAMILIES) | st.text(max_size=8)
task_keys = st.sampled_from(TASK_NAMES) | st.text(max_size=8)
str_or_junk = st.text(max_size=20) | json_values
prompt_documents = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "system": st.dictionaries(family_keys, str_or_junk, max_size=3) | json_values,
            "general": str_or_junk,
            "instructions": st.dictionaries(task_keys, str_or_junk, max_size=3) | json_values,
        },
    ),
    st.dictionaries(
        st.sampled_from(["system", "general", "instructions"]) | st.text(max_size=8), json_values, max_size=3
    ),
    json_values,
)


def render_document(document: object, suffix: str) -> bytes:
    if suffix == ".json":
        return encode(document)
    return yaml.safe_dump(document, allow_unicode=True).encode("utf-8")


def valid_prompt_document(data: object) -> bool:
    if data is None:
        return True
    if not isinstance(data, dict) or not set(data) <= {"system", "general", "instructions"}:
        return False

    def string_map(value: object, known: list[str]) -> bool:
        return isinstance(value, dict) and all(k in known and isinstance(v, str) for k, v in value.items())

    return (
        string_map(data.get("system", {}), list(FAMILIES))
        and string_map(data.get("instructions", {}), TASK_NAMES)
        and isinstance(data.get("general", ""), str)
    )


def load_structured(raw: bytes, suffix: str) -> object:
    text = raw.decode("utf-8")
    return json.loads(text) if suffix == ".json" else yaml.safe_load(text)


@examples(200)
@given(
    st.sampled_from([".json", ".yaml", ".yml"]),
    prompt_documents.map(lambda d: ("document", d))
    | (st.text(max_size=60) | st.binary(max_size=60)).map(lambda t: ("raw", t))
    | broken_lines.map(lambda t: ("raw", t)),
)
@example(".json", ("raw", b"\xff"))
@example(".yaml", ("raw", "general: 2001-02-30"))  # a date no calendar has
@example(".yaml", ("raw", 'general: !!int ""'))
@example(".json", ("raw", FOUND_BIG_INT))
@example(".yml", ("raw", "[" * 1100))
def test_prompt_files_load_or_fail_naming_the_file(workdir, suffix, generated):
    kind, content = generated
    raw = render_document(content, suffix) if kind == "document" else as_bytes(content)
    path = fresh(workdir) / f"prompts{suffix}"
    path.write_bytes(raw)
    try:
        loaded = load_prompt_set(path)
        event("loaded")
    except AudioICLError as exc:
        event("refused")
        assert exc.file == str(path) and exc.message
        try:
            data = load_structured(raw, suffix)
        except Exception:  # noqa: BLE001 (any failure to decode is a refusal the message must name)
            return
        assert not valid_prompt_document(data), f"refused a valid prompt file: {exc}"
        return
    data = load_structured(raw, suffix) or {}
    assert valid_prompt_document(data)
    assert dict(loaded.system) == {**DEFAULT_SYSTEM, **data.get("system", {})}
    assert dict(loaded.instructions) == data.get("instructions", {})
    assert loaded.general == data.get("general", GENERAL_INSTRUCTION)
    for task in TASK_NAMES:
        assert isinstance(loaded.instruction(task, "specific"), str)


# --------------------------------------------------------------------------- the run command's --config file

# per key of the run command: values it takes (so that many configs run), then anything (so that many do not)
PLAUSIBLE = {
    "model": ["builtin:random", "builtin:majority", "builtin:nothing", "nope:x", "", ":", "random"],
    "k": ["1", 1, [1], "1-3", "1,2"],
    "tasks": ["AudioCount", ["MorseCode", "AudioRemap"], "Nope"],
    "limit": [1, 2, 0, -1],
    "style": ["specific", "general", "none"],
    "layout": ["original", "multiturn"],
    "batch-size": [1, 4, 0],
    "batch_size": [2],
    "window": [1, 8],
    "order": ["episode", "k"],
    "max-new-tokens": [8, 64],
    "pad": ["none", "episode", "batch"],
    "shard": ["1/2", "2/2", "3/2"],
    "morse-bank": ["auto", "on", "off"],
    "seed": [0, 7],
    "name": ["renamed", "", "a\x00b", "x/../y"],
    "backend-option": [{}, {"seed": 3}, {"unknown": 1}],
    "base-url": ["http://127.0.0.1:9/v1"],
    "retry-errors": [True, False],
    "control": ["random-labels", "no-audio", "noise-query", "swapped-query"],
    "probe": [True, False],
    "prompts": ["absent.yaml", "p\x00.yaml"],
    "data": ["absent"],
    "out": ["out-from-config", "o\x00ut", ""],
    "config": ["other.yaml"],
    "help": [True],
    "nonsense": [1],
}
anything_in_config = st.one_of(
    st.text(max_size=12),
    st.integers(-3, 20),
    st.floats(),
    st.booleans(),
    st.none(),
    st.lists(st.integers(0, 6) | st.sampled_from(TASK_NAMES) | st.text(max_size=4), max_size=3),
    st.dictionaries(st.text(max_size=6), json_scalars, max_size=2),
)


@st.composite
def config_files(draw) -> dict:
    keys = draw(st.lists(st.sampled_from(sorted(PLAUSIBLE)), max_size=5, unique=True))
    junk = draw(st.integers(0, 3)) == 0  # one config in four takes anything for its values
    return {
        key: draw(anything_in_config if junk and key != "model" else st.sampled_from(PLAUSIBLE[key]))
        for key in keys
    }


@pytest.fixture(scope="module")
def config_dataset(tmp_path_factory) -> Path:
    from conftest import make_dataset

    return make_dataset(tmp_path_factory.mktemp("config_dataset"), per_task=1, ks=(1,))


config_documents = config_files().map(lambda c: ("document", c))


@examples(60)
@given(
    st.sampled_from([".json", ".yaml"]),
    st.one_of(  # three in four a mapping of options, else any text
        config_documents,
        config_documents,
        config_documents,
        (st.text(max_size=40) | broken_lines).map(lambda t: ("raw", t)),
    ),
    st.sampled_from(["all", "all", "all", "model", "none"]),  # the options also on the command line
)
@example(".yaml", ("document", {"out": "o\x00ut"}), "all")
@example(".json", ("document", {"name": "a\x00b"}), "all")
def test_run_config_file_runs_or_fails_in_one_line(workdir, config_dataset, suffix, generated, given_on_line):
    kind, content = generated
    folder = fresh(workdir)
    path = folder / f"config{suffix}"
    path.write_bytes(render_document(content, suffix) if kind == "document" else as_bytes(content))
    argv = ["run", "--config", str(path)]
    if given_on_line in ("model", "all"):
        argv += ["--model", "builtin:random"]
    if given_on_line == "all":  # --out only where the config names none (the command line would win)
        argv += ["--data", str(config_dataset)]
        if kind != "document" or "out" not in content:
            argv += ["--out", str(folder / "out")]
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(argv)  # anything but a return is a bug: SystemExit, a traceback
    event(f"exit {code}")
    assert code in (0, 1, 2), (code, stderr.getvalue())
    if code == 2:
        errors = [line for line in stderr.getvalue().splitlines() if line.startswith("audioicl run: error: ")]
        assert len(errors) == 1, stderr.getvalue()
    if code in (0, 1):  # it ran: only with a dataset, which the config alone cannot name here
        assert given_on_line == "all", stderr.getvalue()


# --------------------------------------------------------------------------- the manifest and audio paths

path_texts = st.one_of(
    st.text(max_size=16),
    st.sampled_from(
        [
            "data/a.wav",
            "data/../x",
            "/etc/passwd",
            "C:x",
            "a\x00b",
            "\ud800",
            "a\udcffb",
            "x" * 300,
            "data/" + "y/" * 3000,
        ]
    ),
)
manifest_paths = path_texts | json_values
manifest_entries = st.fixed_dictionaries(
    {"path": manifest_paths},
    optional={"sha256": st.text(max_size=8) | json_values, "bytes": st.integers(-1, 10) | json_values},
)
manifest_documents = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "fingerprint": st.text(max_size=8) | json_values,
            "files": st.lists(manifest_entries, max_size=3)
            | st.dictionaries(
                path_texts,
                st.dictionaries(st.sampled_from(["sha256", "bytes", "size"]), json_scalars),
                max_size=3,
            ),
        },
    ),
    json_values,
)


@examples(120)
@given(manifest_documents.map(encode) | broken_lines.map(as_bytes) | st.binary(max_size=40))
@example(b'{"files": [{"path": [null]}]}')
@example(b'{"files": [{"path": "\\u0000"}]}')
@example(b'{"files": [{"path": "\\ud800"}]}')
@example(('{"files": [{"path": "' + "x" * 300 + '"}]}').encode())
@example(FOUND_BIG_INT)
def test_manifest_reads_or_fails_naming_the_file(workdir, raw):
    root = fresh(workdir)
    (root / "data").mkdir()
    (root / "data" / "a.wav").write_bytes(b"RIFF0000")
    assert read_manifest(root) is None
    (root / MANIFEST_NAME).write_bytes(raw)
    try:
        manifest = read_manifest(root)
    except AudioICLError as exc:
        assert exc.file == str(root / MANIFEST_NAME) and exc.message
        assert not isinstance(object_or_none(decoded(raw)), dict)
        with ThreadPoolExecutor(1) as pool:
            problems = check_manifest(root, True, pool, [])
        assert [p.file for p in problems] == [str(root / MANIFEST_NAME)]
        return
    assert manifest is not None and isinstance(manifest.document, dict)
    assert manifest.fingerprint is None or isinstance(manifest.fingerprint, str)
    files = manifest.files
    assert files is None or isinstance(files, tuple)
    notes: list[str] = []
    with ThreadPoolExecutor(2) as pool:
        problems = check_manifest(root, True, pool, notes)
    assert all(p.message and p.file == str(manifest.path) for p in problems)
    assert len(problems) <= len(files or ())


@examples(200)
@given(path_texts)
@example("\x00")
@example("data/" + "y/" * 3000)
def test_audio_paths_resolve_inside_the_root_or_are_refused(workdir, audio_path):
    root = workdir.resolve()
    try:
        full = resolve_audio_path(root, audio_path)
    except AudioICLError as exc:
        assert exc.message
        return
    assert full.is_relative_to(root)
