"""Transcript forms (written by the builder and by perception, read back by the built-in solvers) and the
``meta/transcripts.jsonl`` sidecar."""

from __future__ import annotations

import json

import numpy as np
import pytest

from audioicl import AudioICLError
from audioicl.audio import SAMPLE_RATE
from audioicl.dataset.sidecar import dumps_sidecar, load_sidecar, write_sidecar
from audioicl.perception.transcribe import Heard, perceive
from audioicl.synth.morse import MorseStyle, key_text
from audioicl.tasks.transcripts import (
    events_text,
    measured_text,
    morse_text,
    read,
    sounds_text,
    spoken_text,
    timeline_text,
)


def test_every_form_reads_back():
    said = read(events_text(10.0, "the same kick sound", [0.5, 2.125, 7.0], background=True))
    assert (said.kind, said.seconds, said.onsets) == ("events", 10.0, (0.5, 2.12, 7.0))
    assert read(events_text(10.0, "a sound", [])).onsets == ()
    said = read(timeline_text(12.0, [(5.2, 5.9)]))
    assert (said.kind, said.seconds, said.silences) == ("timeline", 12.0, ((5.2, 5.9),))
    assert said.non_silent == pytest.approx(11.3)
    assert read(timeline_text(20.0, [])).non_silent == 20.0
    assert read(timeline_text(5.0, [], silent=True)).non_silent == 0.0
    said = read(spoken_text([7, "clap #3f9a2c", 4, "kick #00aa11", 1]))
    assert said.kind == "spoken" and said.spoken == (7, "clap #3f9a2c", 4, "kick #00aa11", 1)
    said = read(morse_text([[".--.", ".-.."], ["-"]]))
    assert said.kind == "morse" and said.codes == ((".--.", ".-.."), ("-",))
    said = read(sounds_text(["snare #0e41d7", "kick #a2290c", "snare #0e41d7"]))
    assert said.kind == "sounds" and said.sounds == ("snare #0e41d7", "kick #a2290c", "snare #0e41d7")
    assert read(sounds_text(["sound 2"])).sounds == ("sound 2",)
    said = read(measured_text(10.0, {"spectrum dB": [-3.5, 1.25], "events": [0.7]}))
    assert said.kind == "measured" and said.values == (-3.5, 1.25, 0.7)
    with pytest.raises(ValueError, match="not a transcript"):
        read("Label: 7!")


def test_forms_say_what_is_heard_in_words_a_listener_uses():
    assert (
        events_text(10.0, "the same kick sound", [0.5, 2.0]) == "10.00 s: the same kick sound at 0.50, 2.00 s"
    )
    assert (
        timeline_text(12.0, [(5.2, 5.9)])
        == "12.00 s: noise with short percussive sounds; digital silence 5.20-5.90 s"
    )
    assert timeline_text(5.0, [], silent=True) == "5.00 s: digital silence 0.00-5.00 s"
    assert spoken_text([7, "clap #1", 4]) == 'spoken "seven", then clap #1, then spoken "four"'
    assert morse_text([[".-", "-..."]]) == "Morse tone: .- -..."


def test_sidecar_round_trip_sorted_and_malformed_lines_named(tmp_path):
    write_sidecar(tmp_path, {"data/b.wav": "Morse tone: -", "data/a.wav": "Morse tone: ."})
    path = tmp_path / "meta" / "transcripts.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["audio_path"] for x in lines] == ["data/a.wav", "data/b.wav"]
    assert path.read_text() == dumps_sidecar({"data/a.wav": "Morse tone: .", "data/b.wav": "Morse tone: -"})
    sidecar = load_sidecar(tmp_path)
    assert sidecar.transcripts == {"data/a.wav": "Morse tone: .", "data/b.wav": "Morse tone: -"}
    assert len(sidecar.sha256) == 64
    assert load_sidecar(tmp_path / "nothing-here") is None
    path.write_text(path.read_text() + '{"audio_path": "data/c.wav"}\n')
    with pytest.raises(AudioICLError) as caught:
        load_sidecar(tmp_path)
    assert caught.value.line == 3 and "malformed transcript line" in str(caught.value)


def test_perceived_morse_and_silence_from_audio():
    wave = key_text("sos", MorseStyle())
    (text,) = perceive("MorseCode", [Heard(wave, SAMPLE_RATE, "d1", 1)])
    assert text == "Morse tone: ... --- ..."
    clip = np.full(3 * SAMPLE_RATE, 0.05, dtype=np.float32)
    clip[SAMPLE_RATE : 2 * SAMPLE_RATE] = 0.0
    (text,) = perceive("AudioLengthHard", [Heard(clip, SAMPLE_RATE, "d2", 1)])
    assert text == "3.00 s: noise with short percussive sounds; digital silence 1.00-2.00 s"
    (text,) = perceive("AudioLengthHard", [Heard(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE, "d3", 0)])
    assert read(text).non_silent == 0.0
