"""``audioicl download``: the released AudioICL-Bench from the Hugging Face hub, then the validator's report."""

from __future__ import annotations

from pathlib import Path

from audioicl.dataset.download import DEFAULT_REPO, download, snapshot
from audioicl.dataset.meta import find_meta_files
from audioicl.dataset.validate import format_report, validate
from audioicl.errors import AudioICLError

from .options import add_workers, command


def _add(sub):
    p = sub.add_parser(
        "download",
        help="download the released dataset from the Hugging Face hub and validate it",
        description=(
            "Download a commit of the released AudioICL-Bench (a Hugging Face dataset) into --out, in the layout "
            "'audioicl run --data OUT' reads, then validate it and print what is missing or broken, with the "
            "episodes lost per task and k (a run records them as error lines). The revision is resolved to a "
            "commit, written to OUT/download.json and from there into the run record of every run over OUT. "
            "Rerunning resumes: complete files are not fetched again. Uses huggingface_hub (pip install "
            "'audioicl[hub]') and its environment: HF_ENDPOINT, HF_TOKEN, HF_HOME, HF_HUB_CACHE. "
            "Exit 0 when every file of the snapshot arrived (validation findings are reported, not failures), "
            "2 when the download failed (one line says why; rerun to resume)."
        ),
    )
    p.add_argument(
        "--out", type=Path, help="dataset folder to download into (new, empty, or an earlier download)"
    )
    p.add_argument(
        "--repo", default=DEFAULT_REPO, help=f"dataset repository on the hub (default {DEFAULT_REPO})"
    )
    p.add_argument("--revision", help="branch, tag or commit to download (default: main)")
    p.add_argument(
        "--list", action="store_true", help="print the files of the revision and their sizes; fetch nothing"
    )
    add_workers(p, 8, help="files fetched at a time (default 8)")
    p.add_argument(
        "--quick", action="store_true", help="validate audio headers only, do not decode whole files"
    )
    p.add_argument("--no-validate", action="store_true", help="do not validate after the download")
    return p


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n:,} bytes"


@command(_add)
def run(args) -> int:
    if args.list:
        snap = snapshot(args.repo, args.revision)
        width = len(f"{max((f.size for f in snap.files), default=0):,}")
        for f in snap.files:
            print(f"{f.size:>{width},}  {f.path}")
        print(
            f"{snap.repo} revision {snap.revision} = commit {snap.commit}: {len(snap.files)} files, {_size(snap.bytes)}"
        )
        return 0
    if args.out is None:
        raise AudioICLError("--out is required (or --list to see the files)")
    done = download(args.out, args.repo, args.revision, workers=args.workers)
    snap = done.snapshot
    print(
        f"{snap.repo} revision {snap.revision} = commit {snap.commit}: {len(snap.files)} files, "
        f"{_size(snap.bytes)} in {done.root} ({len(snap.files) - done.already_there} fetched now, "
        f"{done.already_there} already there)"
    )
    if args.no_validate:
        return 0
    try:
        find_meta_files(done.root)
    except AudioICLError:
        print(
            f"the snapshot holds no meta files (*_k<k>.jsonl): put meta_k1.jsonl ... meta_k5.jsonl of the "
            f"original repository into {done.root / 'meta'}, then run 'audioicl validate {done.root}'"
        )
        return 1
    report = validate(done.root, quick=args.quick)
    print()
    print(format_report(report))
    return 0
