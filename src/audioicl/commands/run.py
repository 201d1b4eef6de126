"""``audioicl run``: run a model (or a built-in solver) over a dataset and write results files."""

from __future__ import annotations

from pathlib import Path

from ..cli import command, parse_int_set, parse_names
from ..errors import AudioICLError
from ..prompts import LAYOUTS, MORSE_BANK_MODES, PAD_MODES, STYLES
from ..runner import RunOptions, Shard, run


def _backend_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise AudioICLError(f"--backend-option must be KEY=VALUE, got {text!r}")
    return key, value


def _add(sub):
    p = sub.add_parser(
        "run",
        help="run a model over a dataset, writing <model>_results_k<k>.jsonl",
        description=(
            "Run a model over the episodes of a dataset and append one result line per episode to "
            "OUT/<model>_results_k<k>.jsonl, <model> being the last path component of the model name "
            "(builtin:random -> random). Episodes already in the file are skipped, so rerunning resumes. "
            "With --shard I/N the run takes its share of the episodes and writes into OUT/shard-I-of-N/; "
            "join shards with 'audioicl merge'. Exits 1 when any episode ended in an error line."
        ),
    )
    p.add_argument("--data", required=True, type=Path, help="dataset root (holding meta/ and data/)")
    p.add_argument("--model", required=True, help="BACKEND:NAME, e.g. builtin:random or hf:Qwen/Qwen2-Audio-7B-Instruct")
    p.add_argument("--out", required=True, type=Path, help="folder for the results files and run.json")
    p.add_argument("--k", type=parse_int_set, default=None, help="shots to run, e.g. 1-5 or 1,3 (default: all in the dataset)")
    p.add_argument("--tasks", type=parse_names, default=None, help="comma-separated task names (default: all)")
    p.add_argument("--style", choices=STYLES, default="specific", help="instruction style (default: specific)")
    p.add_argument("--layout", choices=LAYOUTS, default="original", help="prompt layout (default: original)")
    p.add_argument("--batch-size", type=int, default=8, help="chats per backend call (default: 8)")
    p.add_argument("--max-new-tokens", type=int, default=16, help="greedy decoding budget (default: 16)")
    p.add_argument(
        "--pad", choices=PAD_MODES, default="none", help="zero-pad clips to the episode's or batch's longest (default: none)"
    )
    p.add_argument("--limit", type=int, default=None, help="only the first N episodes of each task")
    p.add_argument("--shard", type=Shard.parse, default=None, help="I/N: run shard I (1-based) of N")
    p.add_argument("--prompts", type=Path, default=None, help="prompt set file (YAML or JSON) overriding the wording")
    p.add_argument(
        "--morse-bank", choices=MORSE_BANK_MODES, default="auto", help="show the Morse alphabet bank (default: auto, when present)"
    )
    p.add_argument("--seed", type=int, default=0, help="run seed for sampling backends and built-ins (default: 0)")
    p.add_argument("--name", default=None, help="<model> part of the results file names (default: from --model)")
    p.add_argument(
        "--backend-option",
        "-o",
        dest="backend_options",
        type=_backend_option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option for the backend (repeatable), e.g. -o max_clip_seconds=30",
    )
    return p


@command(_add)
def run_command(args) -> int:
    options = RunOptions(
        data=args.data,
        model=args.model,
        out=args.out,
        shots=tuple(args.k) if args.k else None,
        tasks=tuple(args.tasks) if args.tasks else None,
        style=args.style,
        layout=args.layout,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
        pad=args.pad,
        limit=args.limit,
        shard=args.shard,
        prompts=args.prompts,
        morse_bank=args.morse_bank,
        seed=args.seed,
        name=args.name,
        backend_options=dict(args.backend_options),
    )
    summary = run(options)
    for k_summary in summary.ks:
        print(k_summary.line())
    if summary.errors:
        print(f"{summary.errors} episode(s) ended in an error line (see their 'error' field)")
        return 1
    return 0
