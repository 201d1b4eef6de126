"""How far a run is. On a terminal, tqdm's bar; anywhere else (a log file, a scheduler's output, a pipe) a
plain line every ``PROGRESS_EVERY_S`` seconds and one at the end, through the run's ``report``::

    progress: k=1-5 1200/13500 prompts (8.9%), 12.4 prompts/s, ETA 16m32s
    progress: k=1-5 13500/13500 prompts (100.0%) in 18m07s, 12.4 prompts/s

``$AUDIOICL_PROGRESS_EVERY`` sets the seconds between lines (0: one after every window of prompts).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable
from typing import IO

from tqdm import tqdm

from audioicl.errors import AudioICLError

PROGRESS_EVERY_S = 30.0
PROGRESS_ENV = "AUDIOICL_PROGRESS_EVERY"


def progress_every() -> float:
    """Seconds between plain progress lines: ``$AUDIOICL_PROGRESS_EVERY``, else ``PROGRESS_EVERY_S``."""
    text = os.environ.get(PROGRESS_ENV, "").strip()
    if not text:
        return PROGRESS_EVERY_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise AudioICLError(f"${PROGRESS_ENV} must be a number of seconds >= 0, got {text!r}")
    return seconds


def format_ks(ks: Iterable[int]) -> str:
    """``[1, 2, 3, 5]`` → ``1-3,5``."""
    values = sorted(set(ks))
    runs: list[str] = []
    start = previous = None
    for k in [*values, None]:
        if start is not None and (k is None or k != previous + 1):
            runs.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if k is not None and start is None:
            start = k
        previous = k
    return ",".join(runs)


def format_duration(seconds: float) -> str:
    """``992.4`` → ``16m32s``; ``3725`` → ``1h02m05s``; ``8.2`` → ``8s``."""
    total = int(round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Counts the prompts of a run as they are written; ``update(n, ks)`` after each window (``ks``: the k
    of its prompts). A bar on a terminal (``stream``, stderr), else plain lines through ``report``."""

    def __init__(
        self,
        total: int,
        report: Callable[[str], None],
        stream: IO[str] | None = None,
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        stream = stream if stream is not None else sys.stderr
        self.total = total
        self.done = 0
        self.ks: set[int] = set()
        self._report = report
        self._clock = clock
        self._started = self._last = clock()
        self._every = progress_every() if every is None else every
        terminal = bool(getattr(stream, "isatty", lambda: False)())
        self._bar = tqdm(total=total, desc="prompts", unit="prompt", file=stream) if terminal else None

    def update(self, n: int, ks: Iterable[int] = ()) -> None:
        self.done += n
        self.ks.update(ks)
        if self._bar is not None:
            self._bar.update(n)
            return
        now = self._clock()
        if self.done < self.total and now - self._last >= self._every:
            self._last = now
            self._report(self.line(now))

    def line(self, now: float | None = None) -> str:
        elapsed = max((self._clock() if now is None else now) - self._started, 1e-9)
        rate = self.done / elapsed
        where = f"k={format_ks(self.ks)} " if self.ks else ""
        share = f"{self.done / self.total:.1%}" if self.total else "100.0%"
        text = f"progress: {where}{self.done}/{self.total} prompts ({share})"
        if self.done >= self.total:
            return f"{text} in {format_duration(elapsed)}, {rate:.3g} prompts/s"
        eta = f"ETA {format_duration((self.total - self.done) / rate)}" if rate > 0 else "ETA unknown"
        return f"{text}, {rate:.3g} prompts/s, {eta}"

    def close(self) -> None:
        """The bar closed, or the last plain line (only when there was work and all of it was done: a run
        that stopped says why instead)."""
        if self._bar is not None:
            self._bar.close()
        elif self.total and self.done >= self.total:
            self._report(self.line())

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
