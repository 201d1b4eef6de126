"""``audioicl compare``: model B against model A on the episodes both answered, with paired statistics."""

from __future__ import annotations

from pathlib import Path

from audioicl.analysis.compare import (
    SIGNIFICANCE_NOTE,
    Outcomes,
    adjust,
    compare,
    folder_outcomes,
    markdown_comparisons,
    read_per_example,
    refuse_two_datasets,
)
from audioicl.errors import AudioICLError
from audioicl.files import check_output, write_atomic

from .options import add_k, command


def _add(sub):
    p = sub.add_parser(
        "compare",
        help="paired comparison of two models (or conditions) on the same episodes",
        description=(
            "Compare B against A on the episodes both answered: per task Δacc with Newcombe's paired "
            "interval and the exact McNemar test, the mean over tasks with a paired bootstrap, Holm-corrected. "
            "A and B are per-example CSVs (id,task,correct, as 'audioicl score --per-example-dir' writes) or "
            "results folders; in a folder, --model-a / --model-b pick the model (needed when it holds several) "
            "and every k both have is compared."
        ),
    )
    p.add_argument("a", type=Path, help="A: a per-example CSV or a results folder")
    p.add_argument("b", type=Path, help="B: a per-example CSV or a results folder")
    p.add_argument("--model-a", help="A's model name in its folder (e.g. icl)")
    p.add_argument("--model-b", help="B's model name in its folder (e.g. icl+random-labels)")
    add_k(p, help="only these k (folders)")
    p.add_argument("--out", type=Path, help="also write the table as markdown to this file")
    return p


def _cells(path: Path, model: str | None, side: str) -> tuple[str | None, dict[int | None, Outcomes]]:
    """The chosen model (None for a per-example CSV) and k → its outcomes (k None for a per-example CSV)."""
    if path.is_file():
        return None, {None: read_per_example(path)}
    cells = folder_outcomes(path)
    models = sorted({m for m, _ in cells})
    if model is None:
        if len(models) != 1:
            raise AudioICLError(
                f"the folder holds models {', '.join(models) or 'none'}: pick one with --model-{side}",
                file=str(path),
            )
        model = models[0]
    if model not in models:
        raise AudioICLError(
            f"no results of model {model!r} (found: {', '.join(models) or 'none'})", file=str(path)
        )
    return model, {k: outcomes for (m, k), outcomes in cells.items() if m == model}


@command(_add)
def compare_command(args) -> int:
    if args.out:
        check_output(args.out, "--out", folder=False)
    (model_a, a), (model_b, b) = _cells(args.a, args.model_a, "a"), _cells(args.b, args.model_b, "b")
    if model_a is not None and model_b is not None:
        refuse_two_datasets((args.a, model_a), (args.b, model_b))
    if None in a or None in b:
        pairs = [(next(iter(a.values())), next(iter(b.values())), "B vs A")]
    else:
        ks = sorted(set(a) & set(b) & (set(args.k) if args.k else set(a)))
        if not ks:
            raise AudioICLError(f"A and B share no k (A has {sorted(a)}, B has {sorted(b)})")
        pairs = [(a[k], b[k], f"B vs A k={k}") for k in ks]
    rows = adjust(
        row for outcomes_a, outcomes_b, label in pairs for row in compare(outcomes_a, outcomes_b, label)
    )
    if not rows:
        raise AudioICLError("A and B share no episode of any task")
    text = f"A: {args.a}{f' ({args.model_a})' if args.model_a else ''}; B: {args.b}{f' ({args.model_b})' if args.model_b else ''}\n\n"
    text += markdown_comparisons(rows) + "\n" + SIGNIFICANCE_NOTE + "\n"
    print(text, end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(args.out, text)
    return 0
