"""``audioicl demo``: the main job on its embedded default (build, run the built-in solvers, score, report)."""

from __future__ import annotations

import os
from pathlib import Path

from audioicl.analysis.demo import DEMO_EPISODES, DEMO_SOLVERS, DemoOptions, mean_accuracy_table, run_demo

from .options import add_k, add_seed, add_workers, command, parse_names


def _add(sub):
    p = sub.add_parser(
        "demo",
        help="build a small benchmark, evaluate the built-in solvers, score and report",
        description=(
            "The whole pipeline on a laptop, no GPU and no downloads: build a small AudioICL-Bench "
            f"({DEMO_EPISODES} episodes per task by default) into OUT/data, run the built-in solvers "
            f"({', '.join(DEMO_SOLVERS)}) for every k into OUT/results, score them into OUT/scores/summary.csv "
            "and write OUT/report/report.html. Rerunning into the same folder resumes."
        ),
    )
    p.add_argument(
        "--out", type=Path, default=Path("audioicl-demo"), help="output folder (default ./audioicl-demo)"
    )
    p.add_argument(
        "--episodes", type=int, default=DEMO_EPISODES, help=f"episodes per task (default {DEMO_EPISODES})"
    )
    add_k(p, help="shot counts (default 1-5)", default="1-5")
    p.add_argument(
        "--solvers",
        default=",".join(DEMO_SOLVERS),
        help=f"built-in solvers to run (default: {','.join(DEMO_SOLVERS)})",
    )
    add_seed(p, help="build and solver seed (default 0)", default=0)
    add_workers(p, os.cpu_count() or 1, help="build processes (default: CPU count)")
    return p


@command(_add)
def run(args) -> int:
    outputs = run_demo(
        DemoOptions(
            out=args.out,
            episodes=args.episodes,
            shots=tuple(args.k),
            solvers=tuple(parse_names(args.solvers)),
            seed=args.seed,
            workers=args.workers,
        )
    )
    print()
    print(mean_accuracy_table(outputs.scoring))
    print()
    print("time per stage: " + ", ".join(f"{stage} {s:.1f} s" for stage, s in outputs.seconds.items()))
    print(f"scores: {outputs.summary}")
    print(f"report: {outputs.report}")
    if outputs.errors:
        print(
            f"{outputs.errors} episode(s) ended in an error line; see the results files in {outputs.results}"
        )
        return 1
    return 0
