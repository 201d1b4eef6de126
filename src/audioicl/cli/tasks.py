"""``audioicl tasks``: the tasks of the benchmark, one line each (``--json``: the same as JSON)."""

from __future__ import annotations

import json

from .options import command

HEADER = ("task", "family", "answer", "label space", "chance", "clips", "k")


def _add(sub):
    p = sub.add_parser(
        "tasks",
        help="list the tasks: family, label space, chance, clips per prompt, k range",
        description=(
            "List the benchmark's tasks in benchmark order: the family (the task module), the answer kind, "
            "the label space (and how many labels), what a uniform guess scores, the clips a k-shot prompt "
            "holds (k demos and the query, plus the Morse alphabet bank that MorseCode prompts show by "
            "default) and the k that 'audioicl build --k' can make of it from the built-in sounds (the default "
            "build makes 1-5)."
        ),
    )
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    return p


def _rows(infos) -> list[tuple[str, ...]]:
    rows = []
    for info in infos:
        labels = info.labels + (f" ({info.n_labels})" if info.n_labels else "")
        chance = "-" if info.chance is None else f"{info.chance:.1%}"
        rows.append((info.name, info.family, info.answer, labels, chance, info.clips_formula, info.k_range))
    return rows


def format_tasks(infos) -> str:
    rows = [HEADER, *_rows(infos)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER))]
    right = {4}  # chance
    lines = [
        "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    lines.append("")
    lines.append(
        "clips: in a k-shot prompt (demo clips x k + query clips, with MorseCode's 26-clip alphabet bank); "
        "k: the shots 'build --k' can make of the task from the built-in sounds (0: zero-shot; N+: every k tried "
        "up to N builds); the default build makes k = 1-5"
    )
    return "\n".join(lines)


@command(_add)
def run(args) -> int:
    from audioicl.tasks.catalog import describe_tasks

    infos = describe_tasks()
    if args.json:
        print(json.dumps([info.to_json() for info in infos], indent=2, ensure_ascii=False))
    else:
        print(format_tasks(infos))
    return 0
