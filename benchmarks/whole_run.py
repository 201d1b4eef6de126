"""The whole benchmark through a full-size random-weight checkpoint, run as a user runs it.

For each family: the full-size model (random weights, bf16) is made on the GPU, saved to disk with its
processor, freed; then ``audioicl run --data DATA --model hf:CKPT --out OUT --batch-size N`` runs in a
subprocess of its own, and its wall time, exit status, lines and the run record's phases (the backend's
``seconds`` and ``work``) are printed as a table and written as JSON. Needs a GPU and the ``hf`` extra; the
checkpoint takes ~17 GB of disk for the 7B families (Qwen3-Omni's 61 GB do not fit a 64 GiB machine).

    python benchmarks/whole_run.py --data /tmp/B300 --families qwen2-audio --json out.json

``--run NAME=ARGS`` (repeatable) runs the same checkpoint once per entry, each with its own ``audioicl run``
arguments, into one results folder (a condition such as ``-o precision=fp8`` writes ``<model>+fp8``'s files
beside the plain run's); after the runs, the share of identical answers of each run against the first, per
task, and ``audioicl compare`` of each against the first. ``--keep`` keeps the checkpoint for a later call on
the same machine, whose results a later call resumes; ``--results DIR`` copies the results folder there
(gzipped).
"""

from __future__ import annotations

import argparse
import gc
import gzip
import json
import shlex
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path


def save_checkpoint(family: str, folder: Path) -> float:
    """The family's full-size random-weight model and processor saved to ``folder``: seconds taken."""
    import torch

    from audioicl.testing import full_size_model

    started = time.perf_counter()
    model, processor = full_size_model(family, "cuda", torch.bfloat16)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    del model
    gc.collect()
    torch.cuda.empty_cache()
    return time.perf_counter() - started


def run_whole(
    data: Path, folder: Path, out: Path, batch_size: int, extra: list[str], spy: Path | None = None
) -> dict:
    """``audioicl run`` over ``data`` as a subprocess into ``out``: its wall time, status and what the record
    of the run it wrote says (the newest ``*_run.json``: a condition writes its own). ``spy``: sampled by
    ``py-spy`` (every thread, idle included, without pausing the process) into that file."""
    command = [sys.executable, "-m", "audioicl", "run", "--data", str(data), "--model", f"hf:{folder}"]
    command += ["--out", str(out), "--batch-size", str(batch_size), *extra]
    if spy is not None:
        where = shutil.which("py-spy") or str(Path(sysconfig.get_path("scripts")) / "py-spy")
        sampler = [where, "record", "--threads", "--idle", "--nonblocking", "--rate", str(SPY_RATE)]
        command = [*sampler, "--format", "raw", "-o", str(spy), "--", *command]
    before = {p: p.stat().st_mtime for p in out.glob("*_run.json")}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    written = [p for p in out.glob("*_run.json") if before.get(p) != p.stat().st_mtime]
    record = json.loads(written[0].read_text()) if written else {}
    name = written[0].name.removesuffix("_run.json") if written else ""
    results = answers(out, name)
    errors = sum(1 for line in results.values() if line.get("error"))
    last = (record.get("runs") or [{}])[-1]
    return {
        "status": done.returncode,
        "name": name,
        "wall_s": round(wall, 1),
        "lines": len(results),
        "error_lines": errors,
        "timing": last.get("timing") or {},
        "backend_info": last.get("backend_info") or {},
        "stderr_tail": done.stderr[-1500:],
        "out_of_memory_said": [line for line in done.stderr.splitlines() if "out of memory on" in line][:40],
    }


SPY_RATE = 50  # py-spy's samples a second


def phases(timing: dict) -> dict[str, float]:
    """The run record's wall time split: the model's load, the backend's phases (``backend_spent``), the
    runner's (``runner_spent``), and what neither counts."""
    seconds = timing.get("backend_spent", {}).get("seconds", {})
    runner = timing.get("runner_spent", {})
    started, loaded = (timing.get(key) for key in ("started", "backend_loaded"))
    load = (_when(loaded) - _when(started)) if started and loaded else 0.0
    split = {"record wall": timing.get("wall_s", 0.0), "load": load}
    split.update(
        {k: seconds.get(k, 0.0) for k in ("features", "encode", "prefill", "decode", "decode_setup", "lost")}
    )
    split.update({k: runner.get(k, 0.0) for k in ("waited_for_prompts", "in_backend", "writing")})
    in_calls = sum(seconds.get(k, 0.0) for k in ("encode", "prefill", "decode", "lost"))
    split["backend other"] = split["in_backend"] - in_calls if runner else 0.0
    return {key: round(value, 1) for key, value in split.items()}


def prompts_per_second(row: dict) -> float:
    """The run's prompts over its record's wall time less the model's load (what the issue's tables compare)."""
    working = row["phases"]["record wall"] - row["phases"]["load"]
    return round(row["lines"] / working, 2) if working > 0 else 0.0


def _when(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def answers(out: Path, name: str) -> dict[tuple[str, str], dict]:
    """The result lines of ``<name>`` in ``out`` by (k file, id)."""
    return {
        (p.name, line["id"]): line
        for p in sorted(out.glob(f"{name}_results_k*.jsonl"))
        for line in map(json.loads, p.read_text().splitlines())
    }


def identical_share(out: Path, first: str, other: str) -> dict[str, str]:
    """Per task (and all), the share of ``other``'s answers that equal ``first``'s on the same line."""
    a = answers(out, first)
    b = {(k.replace(f"{other}_", f"{first}_"), i): line for (k, i), line in answers(out, other).items()}
    same: dict[str, list[int]] = {}
    for key, line in a.items():
        if key in b:
            for task in (line.get("task", "?"), "all"):
                same.setdefault(task, []).append(int(line.get("response") == b[key].get("response")))
    return {task: f"{sum(v)}/{len(v)} ({sum(v) / len(v):.1%})" for task, v in sorted(same.items())}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--families", default="qwen2-audio")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--work", type=Path, default=Path("/tmp/whole-run"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--run", action="append", default=[], help="NAME=ARGS: a run of its own (repeatable)")
    parser.add_argument("--keep", action="store_true", help="keep the checkpoint (a later call reuses it)")
    parser.add_argument("--results", type=Path, help="copy the results folder here, gzipped")
    parser.add_argument(
        "--spy",
        type=Path,
        help="sample each run with py-spy into DIR/FAMILY_RUN.txt (read by benchmarks/spy_summary.py)",
    )
    parser.add_argument("options", nargs="*", help="more `audioicl run` arguments (-o KEY=VALUE ...)")
    args = parser.parse_args()
    runs = [entry.partition("=")[::2] for entry in args.run] or [("default", "")]
    rows = []
    columns = list(phases({}))
    print(
        "| family | run | exit | run wall s | lines | error lines | prompts/s | "
        + " | ".join(columns)
        + " | peak GiB |"
    )
    print("|---" * (len(columns) + 8) + "|")
    for family in args.families.split(","):
        folder = args.work / f"ckpt-{family}"
        saved = save_checkpoint(family, folder) if not (folder / "config.json").is_file() else 0.0
        out = args.work / f"out-{family}"
        if saved:  # a new checkpoint: no results of an earlier one are resumed (a kept one's are)
            shutil.rmtree(out, ignore_errors=True)
        made = []
        for label, extra in runs:
            row = {"family": family, "run": label, "save_s": round(saved, 1)}
            spy = args.spy / f"{family}_{label}.txt" if args.spy else None
            if spy:
                spy.parent.mkdir(parents=True, exist_ok=True)
            arguments = [*args.options, *shlex.split(extra)]
            row.update(run_whole(args.data, folder, out, args.batch_size, arguments, spy))
            row["phases"] = phases(row["timing"])
            row["prompts_per_s"] = prompts_per_second(row)
            rows.append(row)
            made.append(row)
            peak = row["backend_info"].get("peak_memory_gib", "-")
            print(
                f"| {family} | {label} | {row['status']} | {row['wall_s']} | {row['lines']} | "
                f"{row['error_lines']} | {row['prompts_per_s']} | "
                + " | ".join(str(value) for value in row["phases"].values())
                + f" | {peak} |",
                flush=True,
            )
            if row["status"]:
                print(row["stderr_tail"], file=sys.stderr)
        for row in made[1:]:
            ratio = row["prompts_per_s"] / made[0]["prompts_per_s"] if made[0]["prompts_per_s"] else 0.0
            print(f"{family}: {row['run']} runs {ratio:.2f}x the prompts a second of {made[0]['run']}")
            row["identical_to_first"] = identical_share(out, made[0]["name"], row["name"])
            print(
                f"{family}: {row['run']} answers identical to {made[0]['run']}'s:", row["identical_to_first"]
            )
            compared = subprocess.run(
                [sys.executable, "-m", "audioicl", "compare", str(out), str(out)]
                + ["--model-a", made[0]["name"], "--model-b", row["name"]],
                capture_output=True,
                text=True,
            )
            row["compare"] = compared.stdout or compared.stderr[-1500:]
            print(row["compare"])
        if args.results:
            args.results.mkdir(parents=True, exist_ok=True)
            for path in out.iterdir():
                (args.results / f"{family}_{path.name}.gz").write_bytes(gzip.compress(path.read_bytes()))
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)  # the next family's checkpoint needs the disk
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
