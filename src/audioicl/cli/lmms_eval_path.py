"""``audioicl lmms-eval-path``: the folder of the audioicl task files, for ``lmms-eval --include_path``."""

from __future__ import annotations

from audioicl.integrations.lmms_eval_paths import TASKS_FOLDER

from .options import command


def _add(sub):
    return sub.add_parser(
        "lmms-eval-path",
        help="print the folder of the lmms-eval task files (for lmms-eval --include_path)",
        description=(
            "Print the folder that holds the audioicl tasks for lmms-eval (audioicl_<task>_k<k>, groups "
            'audioicl_k<k>): lmms-eval --include_path "$(audioicl lmms-eval-path)" --tasks audioicl_k2 ... '
            "The tasks read the export named by $AUDIOICL_LMMS_EVAL_DATA (audioicl export ROOT --out DIR)."
        ),
    )


@command(_add)
def lmms_eval_path_command(args) -> int:
    print(TASKS_FOLDER)
    return 0
