"""Check a GPU run against the standing row: the run's record beside ``benchmarks/gpu_standing.json``.

Reads ``whole_run.py``'s JSON (one run of the whole benchmark as a user runs it) and prints its phases, decodes,
out-of-memory and untried halvings, error lines and, where an earlier run's answers are on the machine, the
share of answers identical to them, beside the standing row; then one verdict line: REGRESSION where the record
wall is 5 % or more above the standing row's, the decodes grew, or a line is an error; else OK.

    python benchmarks/gpu_check.py RUN.json [--row "qwen2-audio bf16"] [--standing benchmarks/gpu_standing.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

SLOWER = 1.05  # a record wall this far above the standing row's is a regression
PHASES = ("prefill", "decode", "decode_setup", "lost")


def figures(run: dict) -> dict[str, float | int | str]:
    """The figures of one ``whole_run.py`` row that the standing row holds."""
    spent = run["timing"].get("backend_spent", {})
    seconds, work = spent.get("seconds", {}), spent.get("work", {})
    made: dict[str, float | int | str] = {"record_wall_s": run["timing"].get("wall_s", 0.0)}
    made |= {phase: round(seconds.get(phase, 0.0), 1) for phase in PHASES}
    made |= {key: work.get(key, 0) for key in ("decodes", "out_of_memory", "halved_untried")}
    made["error_lines"] = run["error_lines"]
    made["kv_budget_gib"] = run["backend_info"].get("decode_batches", {}).get("kv_budget_gib", "-")
    made["gpu"] = run["backend_info"].get("gpu") or "-"
    return made


def verdict(made: dict, standing: dict, timed: bool = True) -> list[str]:
    """Why the run is a regression against the standing row (nothing: it is not); ``timed`` false: a card
    other than the standing row's (its memory emulated), whose seconds say nothing against it."""
    reasons = []
    if timed and made["record_wall_s"] >= standing["record_wall_s"] * SLOWER:
        ratio = made["record_wall_s"] / standing["record_wall_s"]
        reasons.append(
            f"record wall {made['record_wall_s']} s is {ratio:.2f}x the standing {standing['record_wall_s']} s"
        )
    if made["decodes"] > standing["decodes"]:
        reasons.append(f"{made['decodes']} decodes, the standing row {standing['decodes']}")
    if made["error_lines"]:
        reasons.append(f"{made['error_lines']} error lines")
    return reasons


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="whole_run.py's --json")
    parser.add_argument("--row", default="qwen2-audio bf16")
    parser.add_argument("--standing", type=Path, default=Path(__file__).with_name("gpu_standing.json"))
    args = parser.parse_args()
    standing = json.loads(args.standing.read_text())[args.row]
    [run] = json.loads(args.run.read_text())
    if run["status"]:
        print(f"REGRESSION: the run exited {run['status']}\n{run['stderr_tail']}")
        return 1
    made = figures(run)
    print(
        f"{args.row}: this run ({made['gpu']}) beside the standing row ({standing['commit']}: {standing['what']})"
    )
    print("| figure | this run | standing |\n|---|---|---|")
    for key, value in made.items():
        if key != "gpu":
            print(f"| {key} | {value} | {standing.get(key, '-')} |")
    print(
        f"| identical answers | {run.get('identical_to_earlier', '- (no earlier run on this machine)')} | - |"
    )
    for said in run.get("out_of_memory_said", []):
        print(f"- {said.split('hf backend: ')[-1]}")
    emulated = os.environ.get("AUDIOICL_EMULATE_GIB")
    if emulated:
        print(f"(memory capped at {emulated} GiB on this card: decodes and halvings compare, seconds do not)")
    reasons = verdict(made, standing, timed=not emulated)
    print(
        ("REGRESSION: " + "; ".join(reasons))
        if reasons
        else "OK: within 5 % of the standing wall, no more decodes"
    )
    return 1 if reasons else 0


if __name__ == "__main__":
    sys.exit(main())
