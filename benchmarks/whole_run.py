"""The whole benchmark through a full-size random-weight checkpoint, run as a user runs it.

For each family: the full-size model (random weights, bf16) is made on the GPU, saved to disk with its
processor, freed; then ``audioicl run --data DATA --model hf:CKPT --out OUT --batch-size N`` runs in a
subprocess of its own, and its wall time, exit status, lines and the run record's phases (the backend's
``seconds`` and ``work``) are printed as a table and written as JSON. Needs a GPU and the ``hf`` extra; the
checkpoint takes ~17 GB of disk for the 7B families (Qwen3-Omni's 61 GB do not fit a 64 GiB machine).

    python benchmarks/whole_run.py --data /tmp/B300 --families qwen2-audio --json out.json
"""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import subprocess
import sys
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


def run_whole(data: Path, folder: Path, out: Path, batch_size: int, extra: list[str]) -> dict:
    """``audioicl run`` over ``data`` as a subprocess: its wall time, status and what its record says."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "audioicl", "run", "--data", str(data), "--model", f"hf:{folder}"]
    command += ["--out", str(out), "--batch-size", str(batch_size), *extra]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    results = [
        json.loads(line) for p in out.glob("*_results_k*.jsonl") for line in p.read_text().splitlines()
    ]
    lines, errors = len(results), sum(1 for line in results if line.get("error"))
    (record,) = [json.loads(p.read_text()) for p in out.glob("*_run.json")] or [{}]
    timing = ((record.get("runs") or [{}])[-1]).get("timing") or {}
    return {
        "status": done.returncode,
        "wall_s": round(wall, 1),
        "lines": lines,
        "error_lines": errors,
        "timing": timing,
        "stderr_tail": done.stderr[-1500:],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--families", default="qwen2-audio")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--work", type=Path, default=Path("/tmp/whole-run"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("options", nargs="*", help="more `audioicl run` arguments (-o KEY=VALUE ...)")
    args = parser.parse_args()
    rows = []
    print(
        "| family | exit | run wall s | lines | error lines | features | encode | prefill | decode | lost |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for family in args.families.split(","):
        folder = args.work / f"ckpt-{family}"
        saved = save_checkpoint(family, folder) if not (folder / "config.json").is_file() else 0.0
        row = {"family": family, "save_s": round(saved, 1)}
        row.update(run_whole(args.data, folder, args.work / f"out-{family}", args.batch_size, args.options))
        rows.append(row)
        shutil.rmtree(folder, ignore_errors=True)  # the next family's checkpoint needs the disk
        seconds = row["timing"].get("backend_spent", {}).get("seconds", {})
        print(
            f"| {family} | {row['status']} | {row['wall_s']} | {row['lines']} | {row['error_lines']} | "
            + " | ".join(
                f"{seconds.get(k, 0):.1f}" for k in ("features", "encode", "prefill", "decode", "lost")
            )
            + " |",
            flush=True,
        )
        if row["status"]:
            print(row["stderr_tail"], file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
