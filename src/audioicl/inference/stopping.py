"""Stopping a run at its next safe point when a signal asks: SIGTERM (what a scheduler sends before it kills a
job) and SIGINT (Ctrl-C).

``on_signals()`` installs the handlers (``run``, ``study`` and ``demo`` do, around their runs) and yields the
``StopRequest`` that the runner watches; a ``study`` passes the same one to each of its runs. The first signal is noted:

- while the run writes (its locks taken, its results files open: ``StopRequest.deferred``), it stops at the
  next safe point: after the window of prompts in hand has been written and fsynced. A backend that can hand
  back part of a call (``stop()``, then ``generate`` raises ``backends.base.GenerationStopped`` with the
  answers it has: the ``openai`` backend at once, ``hf`` after the batch in hand) is asked to, and the
  finished prompts of the window are written too; the others are asked again by the rerun. A backend that
  cannot (``builtin``, ``vllm``) finishes its window first. Then the logs are closed, the run record gets its
  outcome (``interrupted`` and the signal), the locks are released, and ``Stopped`` says how far the run got
  (``stopped by SIGTERM after 123 of 900 prompts; run the same command again to resume``); the command exits
  128 + the signal's number (143, 130).
- anywhere else (checking the run, loading the backend) nothing is half-written: ``Stopped`` is raised at once.

A second signal ends the process at once, by that signal's default action: what is on disk is then what
SIGKILL would leave (at most a half-written last line, which the rerun cuts off, and stale locks, which it
takes over). Handlers run in the main thread only, so ``on_signals`` elsewhere (a Ray task) installs nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from audioicl.backends.base import Stoppable
from audioicl.errors import Stopped

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
RESUME = "run the same command again to resume"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopRequest:
    """Whether (and by which signal) a run was asked to stop; see the module docstring."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.backend: Any = None  # the run's backend, once loaded: asked to ``stop()`` its call in hand
        self._deferred = 0
        self.outside = "before the first prompt"  # how far a stop outside ``deferred`` got (``during``)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def stopped(self, how_far: str) -> Stopped:
        """The error that ends the run: ``stopped by SIGTERM <how_far>; run the same command again ...``."""
        assert self.signum is not None
        name = signal_name(self.signum)
        return Stopped(f"stopped by {name} {how_far}; {RESUME}", exit_code=128 + self.signum, signal=name)

    def check(self, how_far: str) -> None:
        """At a safe point: raise ``stopped(how_far)`` when a stop was asked for."""
        if self.requested:
            raise self.stopped(how_far)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        """While inside, a signal only notes the stop, for the runner's next ``check``."""
        self._deferred += 1
        try:
            yield
        finally:
            self._deferred -= 1

    @contextlib.contextmanager
    def immediate(self) -> Iterator[None]:
        """Inside ``deferred``, a stretch where nothing is being written (loading the backend): a signal raises
        at once, and so does entering it after one."""
        saved, self._deferred = self._deferred, 0
        try:
            self.check(self.outside)
            yield
        finally:
            self._deferred = saved

    @contextlib.contextmanager
    def during(self, how_far: str) -> Iterator[None]:
        """While inside, a stop outside ``deferred`` says ``how_far`` (a study: which condition comes next, or
        that every run is done and the report is being written); entering it after a stop raises."""
        saved, self.outside = self.outside, how_far
        try:
            self.check(how_far)
            yield
        finally:
            self.outside = saved

    def notice(self, signum: int) -> None:
        """What the handler does with a signal (the first: a stop; a second: the end, at once)."""
        if self.signum is not None:
            _die(signum)
        self.signum = signum
        if not self._deferred:
            raise self.stopped(self.outside)
        if isinstance(self.backend, Stoppable):
            self.backend.stop()  # sets a flag: safe in a handler (no lock is taken)


def _die(signum: int) -> None:
    """End the process now by ``signum``'s default action (its exit status says which signal it was)."""
    with contextlib.suppress(OSError):
        os.write(2, f"audioicl: second {signal_name(signum)}: stopping at once\n".encode())
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


@contextlib.contextmanager
def on_signals(signals: tuple[int, ...] = STOP_SIGNALS) -> Iterator[StopRequest]:
    """Handle ``signals`` as the module docstring says while inside; the earlier handlers come back after."""
    stop = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, _frame: object) -> None:
        stop.notice(signum)

    previous = {signum: signal.signal(signum, handler) for signum in signals}
    try:
        yield stop
    finally:
        for signum, earlier in previous.items():
            signal.signal(signum, earlier)
