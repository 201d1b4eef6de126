"""``audioicl fetch-sources``: the original's sound corpora, fetched with pooch into the layouts ``build`` reads."""

from __future__ import annotations

from pathlib import Path

from audioicl.errors import AudioICLError
from audioicl.files import folder_lock
from audioicl.sources.corpora import (
    BASE_URL_ENV,
    DEFAULT_RETRIES,
    Corpus,
    Fetched,
    check_out,
    fetch_corpus,
    load_registry,
    select,
    unverified_files,
)

from .options import command, parse_names


def _add(sub):
    p = sub.add_parser(
        "fetch-sources",
        help="download the sound corpora the original benchmark was made from (ESC-50, FSDD, Freesound "
        "one-shots, DCASE 2024 Task 2)",
        description=(
            "Download the public corpora the original AudioICL-Bench drew its sounds from, each file checked "
            "against the size and checksum pinned in the registry, and unpack them into --out in the layouts "
            "'audioicl build --source KIND=DIR' reads; 'audioicl build --sources OUT' then builds from all of "
            "them. Prints each corpus's licence and records it (OUT/<corpus>/corpus.json), so that the dataset "
            "card of a build made from it carries it. A file with no published checksum is refused unless "
            "--allow-unverified is given. Rerunning resumes: complete corpora are kept, a cut download "
            f"continues where it stopped. Uses pooch (pip install 'audioicl[sources]'); {BASE_URL_ENV} "
            "replaces the scheme and host of every URL (a mirror serving the same paths). Exit 0 when every "
            "selected corpus is complete, 2 otherwise (one line says why; rerun to resume)."
        ),
    )
    p.add_argument(
        "--out", type=Path, help="folder to fetch into (new, empty, or an earlier fetch-sources folder)"
    )
    p.add_argument(
        "--only",
        default="",
        help="comma-separated kinds (one-shots, digits, backgrounds, machines) or corpus names (default: all)",
    )
    p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="also fetch files with no published checksum (the sha256 of what arrives is recorded, and cards "
        "of builds from them say 'unverified')",
    )
    p.add_argument(
        "--keep-archives",
        action="store_true",
        help="keep the downloaded archives (OUT/.archives) after unpacking",
    )
    p.add_argument(
        "--registry", type=Path, help="a registry file in the format of the one shipped (default: it)"
    )
    p.add_argument(
        "--retries",
        type=int,
        default=DEFAULT_RETRIES,
        help=f"times a dropped download is continued before giving up (default {DEFAULT_RETRIES})",
    )
    p.add_argument("--list", action="store_true", help="print the registry: corpora, files, sizes, checksums")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    return p


def _size(n: int | None) -> str:
    return "no published size" if n is None else f"{n:,} bytes"


def _print_registry(corpora: tuple[Corpus, ...]) -> None:
    for corpus in corpora:
        info = corpus.info
        print(f"{info.kind}: {info.title} ({info.name}, {info.version})")
        print(f"  licence: {info.licence} <{info.licence_url}>")
        for f in corpus.files:
            check = f"sha256 {f.sha256}" if f.sha256 else f"md5 {f.md5}" if f.md5 else "no published checksum"
            print(f"  {f.name}: {_size(f.size)}, {check}")
            print(f"    {f.url}")


def _print_corpus(corpus: Corpus) -> None:
    info = corpus.info
    print(f"{info.kind}: {info.title} ({info.name})")
    print(f"  licence: {info.licence} <{info.licence_url}>", flush=True)


def _print_fetched(fetched: Fetched) -> None:
    record = fetched.record
    for f in record.files:
        how = {"sha256": "verified (sha256)", "md5": "verified (md5)"}.get(
            f.verified, "UNVERIFIED: no published checksum"
        )
        print(f"  {f.name}: {f.bytes:,} bytes, sha256 {f.sha256}, {how}")
    state = "fetched now" if fetched.now else "already there"
    print(f"  -> {fetched.root}: {record.audio_files:,} WAV files ({state})")


@command(_add)
def run(args) -> int:
    corpora = select(load_registry(args.registry), parse_names(args.only))
    if args.list:
        _print_registry(corpora)
        return 0
    if args.out is None:
        raise AudioICLError("--out is required (or --list to see the registry)")
    if args.retries < 0:
        raise AudioICLError(f"--retries must be 0 or more, got {args.retries}")
    out = args.out.expanduser().resolve()
    check_out(out, corpora)
    to_fetch = tuple(c for c in corpora if not (out / c.info.name / "corpus.json").is_file())
    missing = unverified_files(to_fetch)
    if missing and not args.allow_unverified:
        names = ", ".join(f"{f.name} ({c.info.name})" for c, f in missing)
        raise AudioICLError(
            f"no published checksum for {len(missing)} file(s): {names}; nothing was fetched. Add "
            "--allow-unverified to fetch them anyway (the sha256 of what arrives is recorded and the dataset "
            "card marks them unverified), or leave them out with --only"
        )
    out.mkdir(parents=True, exist_ok=True)
    with folder_lock(out) as lock:  # one fetch-sources per folder: a second is refused, naming the holder
        if lock.taken_over:
            print(f"warning: took over the stale lock {lock.lock} of {lock.taken_over.describe()}")
        for corpus in corpora:
            _print_corpus(corpus)
            fetched = fetch_corpus(
                out, corpus, keep_archives=args.keep_archives, retries=args.retries, progress=not args.quiet
            )
            _print_fetched(fetched)
    print(f"{len(corpora)} corpora in {out}: build from them with 'audioicl build --sources {out} --out DIR'")
    return 0
