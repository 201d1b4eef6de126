"""Per-task accuracy of the perceiving built-in solvers (``builtin:oracle``, ``builtin:icl``) on a build.

Builds the chats exactly as ``audioicl run`` does (original layout, specific instructions, no padding, the
Morse alphabet bank as ``--morse-bank`` says), answers them in process and scores with ``audioicl.scoring``.
Prints one table per solver (task x k) and the seconds each solver took (measurement cache included).

    audioicl build --out /tmp/b20 --episodes 20
    python benchmarks/solver_accuracy.py /tmp/b20 [--solvers oracle,icl] [--k 1-5] [--morse-bank auto|off]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from audioicl.cli.options import parse_int_set
from audioicl.dataset.meta import find_meta_files, read_meta
from audioicl.prompts.build import build_chat
from audioicl.prompts.clips import MORSE_BANK_MODES, load_morse_bank
from audioicl.scoring.rules import judge
from audioicl.solvers.registry import SOLVERS
from audioicl.tasks import task_names


def _table(solver: str, accuracy: dict[tuple[str, int], list[bool]], shots: list[int]) -> str:
    lines = [f"{solver:<20}" + "".join(f"{'k=' + str(k):>8}" for k in shots)]
    for task in task_names():
        if any((task, k) in accuracy for k in shots):
            row = [accuracy.get((task, k), []) for k in shots]
            lines.append(
                f"{task:<20}" + "".join(f"{sum(r) / len(r):8.3f}" if r else f"{'-':>8}" for r in row)
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("data", help="dataset root (audioicl build --out)")
    parser.add_argument("--solvers", default="oracle,icl")
    parser.add_argument("--k", default="1-5")
    parser.add_argument("--morse-bank", choices=MORSE_BANK_MODES, default="auto")
    args = parser.parse_args()
    metas = find_meta_files(args.data)
    shots = [k for k in parse_int_set(args.k) if k in metas]
    bank = load_morse_bank(args.data, args.morse_bank)
    episodes = {k: read_meta(metas[k]) for k in shots}
    for name in args.solvers.split(","):
        solve = SOLVERS.get(name)(0)
        accuracy: dict[tuple[str, int], list[bool]] = defaultdict(list)
        start = time.perf_counter()
        for k in shots:
            for episode in episodes[k]:
                response = solve(build_chat(episode, args.data, bank=bank))
                accuracy[episode.task, k].append(judge(episode.task, response, episode.query.label).correct)
        seconds = time.perf_counter() - start
        print(_table(name, accuracy, shots))
        print(f"{name}: {sum(len(v) for v in accuracy.values())} episodes in {seconds:.1f} s\n")


if __name__ == "__main__":
    main()
