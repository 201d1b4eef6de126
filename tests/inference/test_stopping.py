"""``inference.stopping`` and the runner's safe points, in process: a signal noted mid-call (what the handler
does, ``StopRequest.notice``) stops the run after the window in hand, keeping what a backend with ``stop()``
answered; the results log cuts a refused write back to its last whole line. The subprocess side (real signals,
a real file-size limit) is ``tests/e2e/test_faults_cli.py``."""

from __future__ import annotations

import errno
import json
import os
import signal

import pytest
from helpers import quiet, read_jsonl

from audioicl.backends.base import GenerationStopped, Response
from audioicl.errors import Stopped, WriteFailed
from audioicl.inference import results as results_module
from audioicl.inference.options import RunOptions
from audioicl.inference.results import ResultsLog
from audioicl.inference.runner import run
from audioicl.inference.stopping import StopRequest
from audioicl.records import Result


class _Signalled:
    """A backend that gets a signal during call number ``at`` (the handler runs ``stop.notice``); with
    ``halts`` it has ``stop()`` and then hands back its first ``keep`` answers, without it finishes the call."""

    name, family, max_clip_seconds, info = "fake:slow", "default", None, {}

    def __init__(self, stop: StopRequest, at: int, halts: bool, keep: int = 0) -> None:
        self.stop_request, self.at, self.keep, self.calls, self.halted = stop, at, keep, 0, False
        if halts:
            self.stop = self._stop

    def _stop(self) -> None:
        self.halted = True

    def generate(self, requests, config):
        self.calls += 1
        if self.calls == self.at:
            self.stop_request.notice(signal.SIGTERM)
            if self.halted:
                raise GenerationStopped({i: Response("1") for i in range(self.keep)})
        return [Response("1") for _ in requests]

    def close(self) -> None:
        pass


def _options(data, out):
    return RunOptions(data=data, model="fake:slow", out=out, shots=(1,), window=4, order="k")


@pytest.mark.parametrize(("halts", "written"), [(True, 5), (False, 8)])
def test_a_signal_mid_call_stops_after_the_window_in_hand(tiny_dataset, tmp_path, halts, written):
    """Call 2 of 3 (windows of 4 of the 12 episodes) gets the signal: a backend that can stop hands back 1 of
    its 4 answers, one that cannot finishes them; either way the run stops there and the rerun completes."""
    stop = StopRequest()
    backend = _Signalled(stop, at=2, halts=halts, keep=1)
    with pytest.raises(Stopped) as info:
        run(_options(tiny_dataset, tmp_path), report=quiet, backend=backend, stop=stop)
    assert str(info.value) == (
        f"stopped by SIGTERM after {written} of 12 prompts; run the same command again to resume"
    )
    assert info.value.exit_code == 128 + signal.SIGTERM and backend.calls == 2
    assert backend.halted == halts
    assert len(read_jsonl(tmp_path / "slow_results_k1.jsonl")) == written
    assert not (tmp_path / "slow_results_k1.jsonl.lock").exists()
    (entry,) = json.loads((tmp_path / "slow_run.json").read_text())["runs"]
    assert (entry["timing"]["outcome"], entry["timing"]["signal"]) == ("interrupted", "SIGTERM")

    again = run(_options(tiny_dataset, tmp_path), report=quiet, backend=_Signalled(StopRequest(), 0, False))
    assert (again.ks[0].skipped, again.ks[0].written) == (written, 12 - written)
    ids = [line["id"] for line in read_jsonl(tmp_path / "slow_results_k1.jsonl")]
    assert len(ids) == len(set(ids)) == 12


def test_a_signal_during_the_last_window_lets_the_run_complete(tiny_dataset, tmp_path):
    stop = StopRequest()
    backend = _Signalled(stop, at=3, halts=False)
    summary = run(_options(tiny_dataset, tmp_path), report=quiet, backend=backend, stop=stop)
    assert summary.ks[0].written == 12 and stop.requested


def test_outside_the_writing_phase_a_signal_stops_at_once():
    stop = StopRequest()
    with pytest.raises(Stopped, match="^stopped by SIGINT before the first prompt; run the same command"):
        stop.notice(signal.SIGINT)
    again = StopRequest()
    with again.deferred():
        again.notice(signal.SIGTERM)  # noted only
        with pytest.raises(Stopped, match="before the first prompt"), again.immediate():
            pass  # loading the backend after a signal: not begun
    assert again.stopped("after 3 of 4 prompts").exit_code == 143


def test_a_refused_write_leaves_the_results_log_at_its_last_whole_line(tmp_path, monkeypatch):
    path = tmp_path / "m_results_k1.jsonl"
    log = ResultsLog.open(path)
    log.append([Result("a", "AudioCount", "1", "1", {"k": 1})])
    before = path.read_bytes()
    real_write = os.write

    def half_then_full(fd, data):  # room for half of it, then the disk is full
        if len(data) > 10:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(results_module.os, "write", half_then_full)
    with pytest.raises(
        WriteFailed, match=r"cannot write .*m_results_k1\.jsonl: No space left on device \(errno 28\); free"
    ):
        log.append([Result(i, "AudioCount", "2", "2", {"k": 1}) for i in ("b", "c")])
    log.close()
    assert path.read_bytes() == before
    assert [line.id for line in ResultsLog.open(path).existing] == ["a"]
