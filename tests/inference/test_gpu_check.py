"""``benchmarks/gpu_check.py`` on the CPU: a run's record beside the standing row, and its verdict (REGRESSION
where the wall is 5 % or more above the standing row, the decodes grew, or a line is an error; else OK)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "gpu_check.py"
STANDING = json.loads(SCRIPT.with_name("gpu_standing.json").read_text())["qwen2-audio bf16"]


def row(wall: float, decodes: int, errors: int = 0) -> dict:
    """A row of ``whole_run.py``'s JSON as a run of the whole benchmark writes it."""
    work = {"decodes": decodes, "out_of_memory": 5, "halved_untried": 115}
    seconds = {"prefill": 170.71, "decode": 70.6, "decode_setup": 20.6, "lost": 4.0}
    return {
        "status": 0,
        "error_lines": errors,
        "timing": {"wall_s": wall, "backend_spent": {"seconds": seconds, "work": work}},
        "backend_info": {"gpu": "NVIDIA H100 80GB HBM3", "decode_batches": {"kv_budget_gib": 15.76}},
        "out_of_memory_said": ["hf backend: out of memory on 130 prompts (prefill_positions 99840; ...)"],
    }


def check(tmp_path: Path, made: dict, **env: str) -> subprocess.CompletedProcess:
    (tmp_path / "check.json").write_text(json.dumps([made]))
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path / "check.json")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )


@pytest.mark.parametrize(
    ("wall", "decodes", "errors", "said"),
    [
        (
            270.5,
            241,
            0,
            "REGRESSION: record wall 270.5 s is 1.18x the standing 228.5 s; 241 decodes, the standing row 126",
        ),
        (STANDING["record_wall_s"] * 1.04, 126, 0, "OK"),
        (STANDING["record_wall_s"] * 1.05, 126, 0, "REGRESSION: record wall"),
        (200.0, 127, 0, "REGRESSION: 127 decodes, the standing row 126"),
        (200.0, 120, 3, "REGRESSION: 3 error lines"),
    ],
)
def test_the_verdict_says_regression_for_a_slower_wall_more_decodes_or_an_error(
    tmp_path, wall, decodes, errors, said
):
    done = check(tmp_path, row(wall, decodes, errors))
    verdict = done.stdout.strip().splitlines()[-1]
    assert verdict.startswith(said) and done.returncode == (0 if said == "OK" else 1)
    assert "| decodes | " in done.stdout and "| halved_untried | 115 |" in done.stdout
    assert "out of memory on 130 prompts (prefill_positions 99840" in done.stdout


def test_a_card_whose_memory_is_emulated_is_judged_on_its_decodes_not_its_seconds(tmp_path):
    done = check(tmp_path, row(400.0, 120), AUDIOICL_EMULATE_GIB="78.6")
    assert done.returncode == 0 and "seconds do not" in done.stdout
    assert check(tmp_path, row(100.0, 241), AUDIOICL_EMULATE_GIB="78.6").returncode == 1


def test_a_run_that_failed_is_a_regression_with_its_stderr(tmp_path):
    done = check(tmp_path, {**row(10.0, 1), "status": 2, "stderr_tail": "Traceback: boom"})
    assert done.returncode == 1 and "exited 2" in done.stdout and "boom" in done.stdout
