"""The command line as a user runs it: ``python -m audioicl ARGS`` in a subprocess (``cli.audioicl(*args)``).

pytest puts ``tests/e2e`` on ``sys.path`` for the modules in it (the folder has no ``__init__.py``); a conftest
module could not be imported by name, so the runner lives here. Each test module binds its own hang guard and
expected exit status once, e.g. ``audioicl = partial(cli.audioicl, timeout=900, rc=0)``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path


def command(*args: object, python: str = sys.executable) -> list[str]:
    """The argument list of ``audioicl ARGS`` (for ``subprocess.Popen``); paths and numbers become strings."""
    return [python, "-m", "audioicl", *map(str, args)]


def audioicl(
    *args: object,
    rc: int | None = None,
    timeout: float = 300,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    python: str = sys.executable,
) -> subprocess.CompletedProcess:
    """Run ``audioicl ARGS`` to its end and return the process, its stdout and stderr captured as text.

    rc: the exit status to assert (the message holds the ends of stderr and stdout); None asserts nothing.
    timeout: seconds before ``subprocess.TimeoutExpired``; it only stops a hung test, nothing is timed.
    env: the child's whole environment (None: this process's). cwd: its working folder.
    python: the interpreter whose ``audioicl`` runs (another environment's, for the vLLM tests).
    """
    proc = subprocess.Popen(
        command(*args, python=python),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group: a hang's report reaches its workers too
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(
            f"audioicl {' '.join(map(str, args))} still ran after {timeout:g} s: {where(proc)}"
        ) from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    proc = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    if rc is not None:
        assert proc.returncode == rc, (
            f"exit {proc.returncode}, expected {rc}\n{proc.stderr[-4000:]}\n{proc.stdout[-2000:]}"
        )
    return proc


def where(proc: subprocess.Popen) -> str:
    """What a hung ``audioicl`` (started in a session of its own) and its workers are doing: every thread's
    stack, which ``audioicl`` prints on SIGUSR1 (``cli.main.WHERE_SIGNAL``), then the process group killed."""
    os.killpg(proc.pid, signal.SIGUSR1)
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGKILL)
    stdout, stderr = proc.communicate()
    return f"its stacks and stderr:\n{stderr[-12000:]}\nstdout:\n{stdout[-2000:]}"


def stopped_by(
    signum: int,
    ready: Callable[[], bool],
    *args: object,
    timeout: float = 60,
    whom: Callable[[int], int] = lambda pid: pid,
) -> tuple[int, str]:
    """Start ``audioicl ARGS``, wait until ``ready()`` (failing if the command ends first), send ``signum`` to
    ``whom(its pid)`` (the command itself unless told, one of its workers say); its exit status and stderr once
    it has ended (killed after the test, should it still run)."""
    proc = subprocess.Popen(command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not ready():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.02)
        os.kill(whom(proc.pid), signum)
        _, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, stderr
