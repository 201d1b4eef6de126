"""Progress of a run: tqdm's bar on a terminal, plain lines through ``report`` anywhere else."""

from __future__ import annotations

import io

import pytest

from audioicl import AudioICLError
from audioicl.inference.progress import Progress, format_duration, format_ks, progress_every


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_every_so_many_seconds_and_one_at_the_end():
    clock, said = Clock(), []
    with Progress(100, said.append, stream=io.StringIO(), every=30, clock=clock) as progress:
        for _ in range(10):
            clock.now += 10
            progress.update(10, {1, 2, 3, 5})
    assert said == [
        "progress: k=1-3,5 30/100 prompts (30.0%), 1 prompts/s, ETA 1m10s",
        "progress: k=1-3,5 60/100 prompts (60.0%), 1 prompts/s, ETA 40s",
        "progress: k=1-3,5 90/100 prompts (90.0%), 1 prompts/s, ETA 10s",
        "progress: k=1-3,5 100/100 prompts (100.0%) in 1m40s, 1 prompts/s",
    ]


def test_a_stopped_run_and_an_empty_one_end_without_a_last_line():
    said: list[str] = []
    with pytest.raises(RuntimeError), Progress(10, said.append, stream=io.StringIO(), every=60) as progress:
        progress.update(4, {1})
        raise RuntimeError("stopped")
    with Progress(0, said.append, stream=io.StringIO(), every=0):
        pass
    assert said == []


def test_a_terminal_gets_the_bar_and_no_lines():
    said: list[str] = []
    terminal = Terminal()
    with Progress(10, said.append, stream=terminal, every=0) as progress:
        progress.update(10, {1})
    assert said == [] and "10/10" in terminal.getvalue()


def test_the_interval_from_the_environment(monkeypatch):
    monkeypatch.delenv("AUDIOICL_PROGRESS_EVERY", raising=False)
    assert progress_every() == 30.0
    monkeypatch.setenv("AUDIOICL_PROGRESS_EVERY", "0")
    assert progress_every() == 0.0
    monkeypatch.setenv("AUDIOICL_PROGRESS_EVERY", "soon")
    with pytest.raises(AudioICLError, match="AUDIOICL_PROGRESS_EVERY must be a number"):
        progress_every()


def test_formats():
    assert format_ks([3, 1, 2, 5]) == "1-3,5" and format_ks([0]) == "0" and format_ks([]) == ""
    assert [format_duration(s) for s in (8.2, 992.4, 3725)] == ["8s", "16m32s", "1h02m05s"]
