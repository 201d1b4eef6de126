"""What the audioicl task files name (``!function utils....``): audioicl.integrations.lmms_eval's functions,
the export folder (``$AUDIOICL_LMMS_EVAL_DATA``) and a ``process_docs`` per task and k."""

from audioicl.integrations import lmms_eval as _audioicl
from audioicl.integrations.lmms_eval import (  # noqa: F401  (named by the YAML files)
    aggregate_accuracy,
    doc_to_messages,
    doc_to_target,
    doc_to_text,
    doc_to_visual,
    process_results,
)

DATASET_PATH = _audioicl.dataset_path()

for _task in _audioicl.benchmark_tasks():
    for _k in _audioicl.SHOTS:
        globals()[f"{_audioicl.task_slug(_task)}_docs_k{_k}"] = _audioicl.task_docs(_task, _k)
