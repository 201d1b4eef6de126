"""``audioicl export``: a dataset as Parquet for Hugging Face ``datasets`` and the hub's viewer."""

from __future__ import annotations

from pathlib import Path

from audioicl.errors import AudioICLError

from .options import command, option_type, parse_int_set


def _add(sub):
    p = sub.add_parser(
        "export",
        help="write a dataset as Parquet (datasets.load_dataset(OUT, 'k2'))",
        description=(
            "Write the dataset at ROOT as Parquet into OUT: one configuration per k (k1 .. k5, split 'test', one "
            "row per episode: its meta record, its clips as the Audio feature holding the WAV files' bytes, and "
            "the labels shown), morse_bank for the Morse alphabet bank, and ROOT's dataset card as README.md "
            "with the 'configs:' header that datasets and the hub's viewer read. The lmms-eval tasks read this "
            "export. Needs the datasets extra."
        ),
    )
    p.add_argument("root", type=Path, metavar="ROOT", help="dataset root (meta/ and data/)")
    p.add_argument("--out", required=True, type=Path, help="folder for the export (empty or new)")
    p.add_argument(
        "--k", type=option_type(parse_int_set), default=None, help="the k files to export (default: all)"
    )
    p.add_argument("--rows-per-file", type=int, default=250, help="rows per Parquet file (default 250)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export in OUT")
    return p


@command(_add)
def export_command(args) -> int:
    try:
        import datasets  # noqa: F401
        import pyarrow  # noqa: F401

        from audioicl.integrations.export import export_dataset
    except ImportError as exc:
        raise AudioICLError(f"needs datasets and pyarrow ({exc}): pip install 'audioicl[datasets]'") from None
    if args.rows_per_file < 1:
        raise AudioICLError(f"--rows-per-file must be at least 1, got {args.rows_per_file}")
    summary = export_dataset(
        args.root, args.out, shots=args.k, rows_per_file=args.rows_per_file, overwrite=args.overwrite
    )
    configs = ", ".join(f"{name} ({rows} rows)" for name, rows in summary.configs.items())
    print(f"{summary.out}: {configs}; {len(summary.files)} Parquet files, {summary.bytes / 1e6:.1f} MB")
    return 0
