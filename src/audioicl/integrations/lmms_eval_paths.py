"""Where the lmms-eval task files are and what names the export they read (no import beyond the standard
library: ``audioicl lmms-eval-path`` prints it at once)."""

from __future__ import annotations

from pathlib import Path

TASKS_FOLDER = Path(__file__).resolve().with_name("lmms_eval_tasks")
DATA_ENV = "AUDIOICL_LMMS_EVAL_DATA"
