"""Every way a meta record, a meta file, a dataset root or an audio path is refused, by its exact message
(``dataset/meta.py``): a user fixes what the message names, so the message is the behaviour."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from audioicl import AudioICLError
from audioicl.dataset.meta import (
    NAME_MAX_BYTES,
    PATH_MAX_BYTES,
    check_dataset_root,
    dumps_episode,
    episode_from_json,
    find_meta_files,
    id_in_broken_line,
    json_limit_problem,
    meant_root,
    resolve_audio_path,
    scan_meta,
)

CLIP = {"audio_path": "data/q.wav", "label": "3"}
RECORD = {"id": "AudioICL00007", "task": "AudioCount", "demos": [CLIP], "query": CLIP}


def refused(record: object) -> str:
    with pytest.raises(AudioICLError) as info:
        episode_from_json(record, file="meta_k1.jsonl", line=3)
    return str(info.value)


def changed(**fields: object) -> dict:
    return {**RECORD, **fields}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ([1], "meta_k1.jsonl:3: record must be a JSON object, got list"),
        ({"task": "AudioCount"}, "meta_k1.jsonl:3: record has no 'id'"),
        (changed(id=7), "meta_k1.jsonl:3: record: 'id' must be str, got int"),
        ({"id": "AudioICL00007", "demos": []}, "meta_k1.jsonl:3 AudioICL00007: record has no 'task'"),
        (changed(demos={}), "meta_k1.jsonl:3 AudioICL00007: record: 'demos' must be list, got dict"),
        (changed(demos=["x"]), "meta_k1.jsonl:3 AudioICL00007: demo 1 must be an object, got str"),
        (changed(demos=[CLIP, 5]), "meta_k1.jsonl:3 AudioICL00007: demo 2 must be an object, got int"),
        (changed(demos=[{"label": "3"}]), "meta_k1.jsonl:3 AudioICL00007: demo 1 has no 'audio_path'"),
        (
            changed(demos=[{"audio_path": 3, "label": "3"}]),
            "meta_k1.jsonl:3 AudioICL00007: demo 1: 'audio_path' must be str, got int",
        ),
        (
            changed(demos=[{"audio_path": "a.wav", "label": 3}]),
            "meta_k1.jsonl:3 AudioICL00007: demo 1: 'label' must be a string, got int",
        ),
        (
            changed(demos=[{"audio_path": "a.wav", "label": "3", "role": 1}]),
            "meta_k1.jsonl:3 AudioICL00007: demo 1: 'role' must be a string, got int",
        ),
        (changed(demos=[{"audio_path": "a.wav"}]), "meta_k1.jsonl:3 AudioICL00007: demo 1 has no 'label'"),
        (changed(demos=[{"clips": []}]), "meta_k1.jsonl:3 AudioICL00007: demo 1 has an empty 'clips' list"),
        (
            changed(demos=[{"clips": "a"}]),
            "meta_k1.jsonl:3 AudioICL00007: demo 1: 'clips' must be list, got str",
        ),
        (
            changed(demos=[{"clips": [CLIP, {"audio_path": "b.wav"}]}]),
            "meta_k1.jsonl:3 AudioICL00007: demo 1: its last clip has no label",
        ),
        (
            changed(demos=[{"clips": [CLIP, 4]}]),
            "meta_k1.jsonl:3 AudioICL00007: demo 1 clip 2 must be an object, got int",
        ),
        (
            {k: v for k, v in RECORD.items() if k != "query"},
            "meta_k1.jsonl:3 AudioICL00007: record has no 'query'",
        ),
        (changed(query=[CLIP]), "meta_k1.jsonl:3 AudioICL00007: query must be an object, got list"),
        (changed(query={"audio_path": "q.wav"}), "meta_k1.jsonl:3 AudioICL00007: query has no 'label'"),
        (changed(query={"clips": [CLIP]}), "meta_k1.jsonl:3 AudioICL00007: query has no 'label'"),
        (
            changed(query={"clips": [CLIP], "label": 3}),
            "meta_k1.jsonl:3 AudioICL00007: query: 'label' must be str, got int",
        ),
        (changed(query={"clips": []}), "meta_k1.jsonl:3 AudioICL00007: query has an empty 'clips' list"),
    ],
)
def test_a_record_is_refused_naming_file_line_id_and_what_is_wrong(record, message):
    assert refused(record) == message


def test_a_multi_clip_record_keeps_its_roles_labels_and_extras_in_the_originals_order():
    record = {
        "id": "AudioICL00002",
        "task": "AudioRemap",
        "pattern": "ABA",
        "demos": [
            {
                "clips": [
                    {"role": "A", "audio_path": "a.wav", "label": "x", "seconds": 1.5},
                    {"role": "MIX", "audio_path": "m.wav", "label": "ABA"},
                ],
                "note": "first",
            }
        ],
        "query": {"clips": [{"role": "MIX", "audio_path": "q.wav"}], "label": "BAB", "hard": True},
    }
    episode = episode_from_json(record)
    (demo,) = episode.demos
    assert demo.multi and demo.extra == {"note": "first"}
    assert [(c.role, c.audio_path, c.label, c.extra) for c in demo.clips] == [
        ("A", "a.wav", "x", {"seconds": 1.5}),
        ("MIX", "m.wav", "ABA", {}),
    ]
    assert episode.query.multi and episode.query.label == "BAB" and episode.query.extra == {"hard": True}
    assert episode.extra == {"pattern": "ABA"}
    assert dumps_episode(episode) == json.dumps(record, ensure_ascii=False)
    single = episode_from_json(RECORD)
    assert not single.demos[0].multi and not single.query.multi and single.query.label == "3"
    assert dumps_episode(single) == json.dumps(RECORD, ensure_ascii=False)


def test_each_broken_line_of_a_file_says_what_broke_it(tmp_path: Path):
    path = tmp_path / "meta_k1.jsonl"
    good = json.dumps(RECORD)
    lines = [
        good,
        '{"id": "AudioICL00003", "task": "AudioCount", "demos": [',  # cut short
        '{"id": "AudioICL00004", "task" "AudioCount"}',  # a colon missing mid-line
        '{"id": "AudioICL00005", "n": ' + "9" * 5000 + "}",
        "[" * 100_000 + "]" * 100_000,
        "   ",
        good,
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    episodes, problems = scan_meta(path)
    assert [m.line for m in episodes] == [1, 7] and all(m.file == path for m in episodes)
    assert [(p.line, p.id, p.message) for p in problems] == [
        (2, "AudioICL00003", "malformed JSON: Expecting value at the end of the line (cut short?)"),
        (3, "AudioICL00004", "malformed JSON: Expecting ':' delimiter at column 32"),
        (4, "AudioICL00005", "unreadable JSON: a number with more than 4,300 digits"),
        (5, None, "unreadable JSON: nested too deeply"),
    ]


def test_json_limit_problem_and_the_id_of_a_broken_line():
    assert json_limit_problem(RecursionError("deep")) == "nested too deeply"
    assert json_limit_problem(ValueError("Exceeds the limit (4300 digits)")) == (
        "a number with more than 4,300 digits"
    )
    assert json_limit_problem(ValueError("something else")) == "something else"
    assert id_in_broken_line('{"id" :  "AudioICL00001", "task": "X"') == "AudioICL00001"
    assert id_in_broken_line('{"task": "MorseCode", "id": 3', "task") == "MorseCode"
    assert id_in_broken_line('{"id": 3, "task": "X"}') is None
    assert id_in_broken_line('{"ID": "x"}') is None
    assert id_in_broken_line('{"id": "' + "a" * 200 + '"}') == "a" * 200
    assert id_in_broken_line('{"id": "' + "a" * 201 + '"}') is None  # past the bound: not an id
    assert id_in_broken_line('{"id": "a\\"b"}') is None


def _dataset(root: Path, *, data: bool = True) -> Path:
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "meta_k1.jsonl").write_text(json.dumps(RECORD) + "\n")
    if data:
        (root / "data").mkdir()
    return root


def test_no_meta_files_says_which_root_was_meant(tmp_path: Path):
    root = _dataset(tmp_path / "bench")
    (tmp_path / "notes").mkdir()  # a folder that is no dataset is no candidate
    (tmp_path / "notes.txt").write_text("")
    for given, meant in ((root / "data", root), (root / "data" / "audiocount", root), (tmp_path, root)):
        given.mkdir(exist_ok=True)
        assert meant_root(given) == meant
        with pytest.raises(AudioICLError) as info:
            find_meta_files(given)
        assert str(info.value) == (
            f"{given}: no meta files (*_k<k>.jsonl) in the dataset root or its meta/ folder; did you mean {meant}?"
        )
    _dataset(tmp_path / "other")  # two datasets below: no guess
    assert meant_root(tmp_path) is None
    with pytest.raises(AudioICLError) as info:
        find_meta_files(tmp_path)
    assert str(info.value).endswith("in the dataset root or its meta/ folder")
    assert meant_root(tmp_path / "absent") is None
    assert meant_root(_dataset(tmp_path / "clipless", data=False) / "data") is None  # a parent without data/


def test_find_meta_files_ignores_names_without_a_k_and_sorts_by_k(tmp_path: Path):
    for name in ("meta_k10.jsonl", "meta_k2.jsonl", "meta_kx.jsonl", "notes_k3.jsonl.bak"):
        (tmp_path / name).write_text("")
    assert find_meta_files(tmp_path) == {2: tmp_path / "meta_k2.jsonl", 10: tmp_path / "meta_k10.jsonl"}
    with pytest.raises(AudioICLError) as info:
        find_meta_files(tmp_path / "meta_k2.jsonl")
    assert str(info.value) == f"{tmp_path / 'meta_k2.jsonl'}: dataset root is not a folder"


def test_the_meta_folder_given_as_the_root_is_refused_naming_the_root(tmp_path: Path):
    root = _dataset(tmp_path / "bench")
    metas = find_meta_files(root / "meta")
    with pytest.raises(AudioICLError) as info:
        check_dataset_root(root / "meta", metas)
    assert str(info.value) == (
        f"{root / 'meta'} is the meta/ folder of a dataset, whose clips lie beside it; did you mean {root}?"
    )
    check_dataset_root(root, find_meta_files(root))  # the root itself passes
    (root / "meta" / "data").mkdir()  # a meta/ folder that holds its clips is a root of its own
    check_dataset_root(root / "meta", metas)
    flat = tmp_path / "flat"  # meta files at the top of a folder not named meta
    flat.mkdir()
    (flat / "meta_k1.jsonl").write_text("")
    check_dataset_root(flat, find_meta_files(flat))


def test_audio_paths_are_refused_by_exact_reason_at_exact_bounds(tmp_path: Path):
    root = tmp_path / "root"
    (root / "data").mkdir(parents=True)

    def reason(audio_path: object) -> str:
        with pytest.raises(AudioICLError) as info:
            resolve_audio_path(root, audio_path)  # type: ignore[arg-type]
        return info.value.message

    assert reason(3) == "audio_path must be a string, got int"
    assert reason("") == "empty audio_path"
    assert reason("/abs.wav") == "audio_path is absolute: /abs.wav"
    assert reason("\\\\server\\x.wav") == "audio_path is absolute: \\\\server\\x.wav"
    assert reason("c:x.wav") == "audio_path is absolute: c:x.wav"
    assert reason("data/../../x.wav") == "audio_path leaves the dataset root: data/../../x.wav"
    assert reason("data/a\x00.wav") == "audio_path holds a NUL character: 'data/a\\x00.wav'"
    assert reason("data/\udcff\ud800.wav").startswith("audio_path is not a file name here (unencodable text)")
    longest = "n" * (NAME_MAX_BYTES - 4) + ".wav"
    assert resolve_audio_path(root, f"data/{longest}") == (root / "data" / longest).resolve()
    too_long = "n" + longest
    assert (
        reason(f"data/{too_long}")
        == f"audio_path holds a name longer than 255 bytes: data/{too_long[:95]}..."
    )
    assert reason("data/" + "é" * 128).startswith(
        "audio_path holds a name longer than 255 bytes"
    )  # 256 bytes
    assert resolve_audio_path(root, "data/" + "é" * 127) == (root / "data" / ("é" * 127)).resolve()
    room = PATH_MAX_BYTES - 1 - len(os.fsencode(root.resolve())) - 1  # the audio path's bytes at the bound
    segments = ["d" * 200] * ((room - 1) // 201)  # the last name keeps at least one byte
    fits = "/".join([*segments, "f" * (room - 201 * len(segments))])
    assert len(os.fsencode(root.resolve() / fits)) == PATH_MAX_BYTES - 1
    assert resolve_audio_path(root, fits) == root.resolve() / fits
    assert reason(fits + "f") == f"audio_path is longer than a file system allows: {(fits + 'f')[:100]}..."
    assert resolve_audio_path(root, "data/./a.wav") == (root / "data" / "a.wav").resolve()
