"""``audioicl run --model openai:load`` at high concurrency against the tests' chat server with faults.

A real ``audioicl run`` subprocess asks every prompt of a build (default: 223 episodes per task, k = 1..5:
10,035 real prompts, base64 WAV clips) of a fault-injecting ``tests/chat_server.py`` in this process. Each
attempt of each request draws its fate from a hash of (its messages, the attempt): 429 with Retry-After
0, 0.5 or 1 s, 500, a dropped connection, an invalid JSON body (not retried: an error line), an answer
slower than the client's timeout; a share of the prompts is answered after a delay within the timeout.

While it runs, the subprocess's resident memory (``/proc/PID/status`` VmRSS, or psutil) and the lines
written so far are sampled. At the end every k file is checked: one line per episode of its meta file,
none missing, none doubled; the ok lines' answers are exactly the answers the server gave (each to one
line); the error lines are the invalid-JSON answers. Printed: a markdown table of requests sent (the
server's count), retries, prompts answered, error lines by reason, lines against episodes expected, wall
time, prompts/s, peak RSS and RSS at 10 / 50 / 90 % of the lines.

The build is cached under ``--out`` (``OUT/data``, reused while its options match; its build time is
printed); the results go to ``OUT/results`` (emptied first), the run's stdout and stderr beside them.

    python benchmarks/openai_load.py [--out out/openai-load] [--episodes 223] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from chat_server import ChatServer  # noqa: E402

from audioicl.dataset.meta import find_meta_files, read_meta  # noqa: E402

MODEL = "load"
NOT_JSON = "malformed response (not JSON)"  # the error line of a bad_json answer (never retried)


# --------------------------------------------------------------------------- the faults


def _draw(digest: str, attempt: int, salt: str = "") -> float:
    """A number in [0, 1) fixed by the request's messages, the attempt and ``salt``."""
    return int(hashlib.sha256(f"{digest}:{attempt}:{salt}".encode()).hexdigest()[:12], 16) / 16**12


@dataclass(frozen=True)
class Faults:
    """Share of attempts that draw each fault (every attempt draws afresh)."""

    rate_limited: float = 0.05  # 429 with Retry-After 0, 0.5 or 1 s
    server_error: float = 0.03  # 500
    dropped: float = 0.02  # the connection closed without an answer
    bad_json: float = 0.01  # 200 with a body that is not JSON
    slow: float = 0.01  # answered after the client's timeout
    delayed: float = 0.10  # share of prompts answered 0.1-0.5 s late (every attempt), within the timeout

    def plan(self, digest: str, attempt: int) -> str | None:
        u = _draw(digest, attempt)
        for action, share in (
            ("429", self.rate_limited),
            ("500", self.server_error),
            ("drop", self.dropped),
            ("bad_json", self.bad_json),
            ("slow", self.slow),
        ):
            if u < share:
                return action
            u -= share
        return None

    @staticmethod
    def retry_after(digest: str, attempt: int) -> str:
        return ("0", "0.5", "1")[int(_draw(digest, attempt, "retry-after") * 3)]

    def latency(self, digest: str) -> float:
        u = _draw(digest, 0, "latency")
        return 0.1 + 0.4 * u / self.delayed if u < self.delayed else 0.0


# --------------------------------------------------------------------------- the dataset


def build(out: Path, episodes: int, ks: str) -> tuple[Path, float, bool]:
    """The dataset under ``out/data`` (built unless a build with these options is there), the seconds
    its build took, and whether it was cached."""
    data, stamp = out / "data", out / "build.json"
    wanted = {"episodes": episodes, "k": ks}
    if stamp.exists() and (data / "manifest.json").exists():
        done = json.loads(stamp.read_text())
        if {key: done.get(key) for key in wanted} == wanted:
            return data, float(done["seconds"]), True
    shutil.rmtree(data, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "audioicl", "build", "--out", str(data), "--episodes", str(episodes)]
        + ["--k", ks, "--quiet"],
        check=True,
    )
    seconds = time.perf_counter() - started
    stamp.write_text(json.dumps({**wanted, "seconds": round(seconds, 1)}) + "\n")
    return data, seconds, False


# --------------------------------------------------------------------------- watching the run


def rss_bytes(pid: int) -> int | None:
    try:
        import psutil  # type: ignore[import-untyped]

        return int(psutil.Process(pid).memory_info().rss)
    except ImportError:
        pass
    except Exception:  # the process is gone
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class Sample:
    seconds: float
    rss: int
    lines: int  # complete lines in the results files
    requests: int  # requests the server has logged


@dataclass
class Watcher:
    """Samples the run's RSS and the lines its results files hold, every ``every`` seconds."""

    pid: int
    results: Path
    server: ChatServer
    every: float = 0.5
    samples: list[Sample] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._done = threading.Event()
        self._offsets: dict[Path, int] = {}
        self._lines = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._started = time.perf_counter()

    def start(self) -> Watcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _read_lines(self) -> None:
        """Count the complete lines written since the last look (a line being written waits)."""
        for path in sorted(self.results.glob(f"{MODEL}_results_k*.jsonl")):
            offset = self._offsets.get(path, 0)
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._offsets[path] = offset + len(complete)
            self._lines += complete.count(b"\n")

    def _loop(self) -> None:
        while not self._done.wait(self.every):
            rss = rss_bytes(self.pid)
            if not rss:  # gone, or exiting (a process past its end has no resident memory)
                continue
            self._read_lines()
            elapsed = time.perf_counter() - self._started
            self.samples.append(Sample(elapsed, rss, self._lines, len(self.server.log)))

    def at(self, lines: int) -> Sample | None:
        """The first sample with at least ``lines`` lines written."""
        return next((s for s in self.samples if s.lines >= lines), None)


# --------------------------------------------------------------------------- checking the lines


def run_order(data: Path) -> list[str]:
    """The task of each line in the order the run writes them (episode order: an episode's k lines
    together, episodes as the smallest k file has them)."""
    metas = find_meta_files(data)
    return [ep.task for ep in read_meta(metas[min(metas)]) for _ in metas]


def reason(error: str) -> str:
    """An error line's reason without its particulars (numbers, quoted bodies)."""
    head = error.split(": ", 2)
    text = ": ".join(head[:2]) if error.startswith("gave up after") else head[0]
    return re.sub(r"\d+(\.\d+)?", "N", text)


@dataclass
class Checked:
    expected: int = 0
    lines: int = 0
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    ok: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    responses: Counter[str] = field(default_factory=Counter)
    tasks: Counter[str] = field(default_factory=Counter)


def check_lines(data: Path, results: Path) -> Checked:
    checked = Checked()
    for k, meta in sorted(find_meta_files(data).items()):
        wanted = [ep.id for ep in read_meta(meta)]
        path = results / f"{MODEL}_results_k{k}.jsonl"
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        ids = Counter(line["id"] for line in lines)
        checked.expected += len(wanted)
        checked.lines += len(lines)
        checked.duplicates += sum(n - 1 for n in ids.values() if n > 1)
        checked.missing += len(set(wanted) - set(ids))
        checked.unexpected += len(set(ids) - set(wanted))
        for line in lines:
            checked.tasks[line["task"]] += 1
            if line["status"] == "ok":
                checked.ok += 1
                checked.responses[line["response"]] += 1
            else:
                checked.errors[reason(line["error"])] += 1
    return checked


# --------------------------------------------------------------------------- the benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/openai-load"))
    parser.add_argument("--episodes", type=int, default=223, help="episodes per task of the build")
    parser.add_argument("--k", default="1-5", help="shot counts of the build")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--window", type=int, default=None, help="prompts per call (default 4 x concurrency)")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds the client waits per attempt")
    parser.add_argument("--slow-s", type=float, default=3.0, help="when a slow answer comes")
    parser.add_argument("--sample-s", type=float, default=0.5, help="seconds between RSS samples")
    parser.add_argument("--option", "-o", action="append", default=[], help="more backend options")
    args = parser.parse_args()
    window = args.window or 4 * args.concurrency

    data, build_s, cached = build(args.out, args.episodes, args.k)
    print(f"dataset {data}: {'cached, ' if cached else ''}built in {build_s:.1f} s")
    results = args.out / "results"
    shutil.rmtree(results, ignore_errors=True)
    results.mkdir(parents=True)

    faults = Faults()
    server = ChatServer(
        plan=faults.plan,
        latency=faults.latency,
        retry_after=faults.retry_after,
        slow_s=args.slow_s,
        keep_bodies=False,
    ).start()
    command = [
        sys.executable, "-m", "audioicl", "run", "--data", str(data), "--model", f"openai:{MODEL}",
        "--base-url", server.url, "--out", str(results), "--window", str(window),
        "-o", f"concurrency={args.concurrency}", "-o", f"timeout={args.timeout:g}",
        *(item for option in args.option for item in ("-o", option)),
    ]  # fmt: skip
    shown = ["audioicl", *command[3:]]
    print("$", " ".join(shown))
    env = {**os.environ, "AUDIOICL_PROGRESS_EVERY": "15"}
    try:
        with (
            (results.parent / "run.stdout").open("w") as out,
            (results.parent / "run.stderr").open("w") as err,
        ):
            started = time.perf_counter()
            proc = subprocess.Popen(command, stdout=out, stderr=err, env=env)
            watcher = Watcher(proc.pid, results, server, every=args.sample_s).start()
            returncode = proc.wait()
            wall = time.perf_counter() - started
            watcher.stop()
    finally:
        server.stop()
    stderr = (results.parent / "run.stderr").read_text()
    stdout = (results.parent / "run.stdout").read_text()

    checked = check_lines(data, results)
    log = server.log
    (args.out / "server_log.jsonl").write_text(
        "".join(json.dumps([e.time, e.digest, e.attempt, e.action]) + "\n" for e in log)
    )
    actions = Counter(entry.action for entry in log)
    digests = {entry.digest for entry in log}
    answers = Counter(entry.digest for entry in log if entry.action == "answer")
    # a retry can overtake the attempt it repeats (the client stopped waiting for an answer that the
    # busy server had not yet read): so an answer counts whichever attempt it was, not only the last
    answered = {f"answer {digest[:12]}" for digest in answers}
    never_answered = len(digests) - len(answers)
    drew_bad_json = len({entry.digest for entry in log if entry.action == "bad_json"})
    errors = sum(checked.errors.values())
    not_json = checked.errors[NOT_JSON]
    given = set(checked.responses)

    problems = []
    if checked.lines != checked.expected or checked.missing or checked.duplicates or checked.unexpected:
        problems.append("lines do not match the episodes")
    if not given <= answered or any(n > 1 for n in checked.responses.values()):
        problems.append(f"{len(given - answered)} ok answers the server did not give, or given twice")
    # the only fault that must end in an error line is invalid JSON (a retryable one would have to
    # be drawn max_retries + 1 times in a row); every prompt the server never answered has one
    if errors != not_json:
        problems.append(f"{errors - not_json} error lines for a fault that is retried")
    if not never_answered <= errors or not_json > drew_bad_json:
        problems.append("error lines do not match the prompts never answered and the invalid JSON drawn")
    if "Traceback" in stderr:
        problems.append("a traceback on stderr")

    def mb(value: int) -> str:
        return f"{value / 2**20:.0f}"

    samples = watcher.samples
    rows = [
        ("prompts (episodes x k expected)", f"{checked.expected:,}"),
        ("requests sent (server count)", f"{len(log):,} (+ {server.cut_short} bodies cut short)"),
        ("retries (requests - distinct prompts)", f"{len(log) - len(digests):,}"),
        ("faults drawn", ", ".join(f"{a} {n}" for a, n in actions.most_common() if a != "answer")),
        ("answers the client had stopped waiting for", f"{sum(answers.values()) - len(answers):,}"),
        ("most requests in flight at the server", str(server.max_in_flight)),
        ("prompts answered (ok lines)", f"{checked.ok:,}"),
        *((f"error lines: {why}", f"{n:,}") for why, n in checked.errors.most_common() or [("none", 0)]),
        (
            "lines total / expected",
            f"{checked.lines:,} / {checked.expected:,} (missing {checked.missing}, duplicated "
            f"{checked.duplicates}, unexpected {checked.unexpected})",
        ),
        (
            "ok answers all the server's, each on one line",
            "yes" if given <= answered and len(given) == checked.ok else "no",
        ),
        (
            "prompts never answered <= error lines; invalid-JSON lines <= prompts that drew it",
            f"{never_answered} <= {errors}; {not_json} <= {drew_bad_json}",
        ),
        ("exit status (1: error lines)", str(returncode)),
        ("wall s (run subprocess)", f"{wall:.1f}"),
        ("prompts/s", f"{checked.lines / wall:.1f}"),
        ("peak RSS MB", mb(max(s.rss for s in samples)) if samples else "-"),
    ]
    for share in (0.10, 0.50, 0.90):
        sample = watcher.at(int(share * checked.expected))
        rows.append(
            (
                f"RSS MB at {share:.0%} of the lines",
                f"{mb(sample.rss)} ({sample.lines:,} lines, {sample.requests:,} requests, {sample.seconds:.0f} s)"
                if sample
                else "- (the last window's lines came after the last sample)",
            )
        )
    print(f"\n{len(samples)} RSS samples every {args.sample_s:g} s; window {window}, build {build_s:.1f} s")
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    # the tasks come one after another (the runner's episode order follows the meta files), and RSS
    # follows their prompts: each sample is put to the task of the next line to be written
    order = run_order(data)
    print("\n| task (in run order) | lines | RSS MB while it ran: first / median / peak |\n|---|---|---|")
    for task in dict.fromkeys(order):
        seen = [s.rss for s in samples if order[min(s.lines, len(order) - 1)] == task]
        if seen:
            row = f"{mb(seen[0])} / {mb(sorted(seen)[len(seen) // 2])} / {mb(max(seen))}"
            print(f"| {task} | {checked.tasks[task]:,} | {row} |")
    (args.out / "samples.json").write_text(json.dumps([s.__dict__ for s in samples]) + "\n")
    tail = [line for line in (stdout + stderr).splitlines() if line.strip()][-6:]
    print("\nrun output (last lines):\n  " + "\n  ".join(tail))
    if problems:
        print("\nPROBLEMS: " + "; ".join(problems))
        sys.exit(1)


if __name__ == "__main__":
    main()
