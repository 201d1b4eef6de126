"""The dataset card (``ROOT/README.md``) a build writes: what is in the dataset and how it was made."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from audioicl import __version__
from audioicl.sources.banks import SOURCE_KINDS
from audioicl.sources.corpora import SourceUse
from audioicl.tasks.context import CONSTRUCTION, BuildOptions

MAX_LISTED_LABELS = 25


@dataclass(frozen=True)
class TaskStats:
    name: str
    first_id: str
    last_id: str
    episodes: int
    query_labels: Counter
    all_labels: Counter  # the labels the model must infer: demo labels at max(k) and query labels
    files: int
    seconds_min: float
    seconds_max: float
    seconds_total: float
    recipe: str
    differences: str


def _label_key(label: str) -> tuple:
    return (0, int(label), "") if label.lstrip("-").isdigit() else (1, 0, label)


def histogram(counts: Counter) -> str:
    if len(counts) > MAX_LISTED_LABELS:
        common = ", ".join(f"`{label}` {n}" for label, n in counts.most_common(8))
        return f"{len(counts)} distinct labels; most frequent: {common}"
    return ", ".join(f"`{label}` {counts[label]}" for label in sorted(counts, key=_label_key))


def _task_section(stats: TaskStats, max_shots: int) -> str:
    return "\n".join(
        [
            f"### {stats.name}",
            "",
            f"Episodes {stats.first_id}-{stats.last_id} ({stats.episodes}).",
            "",
            f"**How clips and labels are made.** {stats.recipe}",
            "",
            f"**How this differs from the original.** {stats.differences}",
            "",
            f"- Query labels: {histogram(stats.query_labels)}",
            f"- Answer labels shown or asked (demos at k = {max_shots} and queries): {histogram(stats.all_labels)}",
            f"- Audio files: {stats.files}, {stats.seconds_min:.2f}-{stats.seconds_max:.2f} s each, "
            f"{stats.seconds_total / 60:.1f} min in all",
            "",
        ]
    )


def construction_section(options: BuildOptions) -> list[str]:
    """Which construction was built: every construction option, its value and what that value builds."""
    rows = []
    for choice in CONSTRUCTION:
        value = getattr(options, choice.field)
        whose = "the original's" if value == choice.original else "ours"
        if value == choice.values[0]:
            whose += " (default)"
        rows.append(f"| `{choice.flag} {value}` | {whose} | {choice.builds[value]} |")
    return [
        "## Construction",
        "",
        "How episodes and clips were made. The defaults remove shortcuts that let a model score without "
        "listening (`audioicl audit` measures them; audioicl's docs/validity.md lists each); `audioicl build "
        "--construction original` reproduces the original "
        "benchmark's construction, flaws included.",
        "",
        "| option | construction | what it builds |",
        "|---|---|---|",
        *rows,
        "",
    ]


SYNTHESIZED = {
    "one-shots": "procedural drum and percussion one-shots (`audioicl.synth.percussion`)",
    "digits": "espeak-ng voices saying the digits (`audioicl.synth.speech`)",
    "backgrounds": "procedural ambiences (`audioicl.synth.ambience`)",
    "machines": "procedural machine recordings (`audioicl.synth.machines`)",
}
VERIFIED = {"sha256": "verified against the registry's sha256", "md5": "verified against the registry's md5"}


def _corpus_row(use: SourceUse) -> str:
    if use.record is None:
        return (
            f"| {use.kind} | a corpus folder given with `--source` (see Build above), not fetched by "
            "`audioicl fetch-sources` | whatever that corpus's terms say (not recorded) | not recorded |"
        )
    info = use.record.info
    files = "; ".join(
        f"`{f.name}` ({f.bytes:,} bytes) sha256 `{f.sha256}`, "
        + VERIFIED.get(f.verified, "**unverified** (no published checksum)")
        for f in use.record.files
    )
    return (
        f"| {use.kind} | [{info.title}]({info.homepage}), {info.version}: {use.record.audio_files:,} recordings |"
        f" [{info.licence}]({info.licence_url}) | {files} |"
    )


def sources_section(corpora: tuple[SourceUse, ...]) -> list[str]:
    """Where each kind of sound came from; for real corpora their licence, credit and the checksums of the
    files fetched. Audio made from a corpus stays under its licence."""
    used = {use.kind: use for use in corpora}
    rows = [
        _corpus_row(used[kind])
        if kind in used
        else f"| {kind} | synthesized: {SYNTHESIZED[kind]} | no third-party recordings | — |"
        for kind in SOURCE_KINDS
    ]
    lines = [
        "## Sound sources and licences",
        "",
        "| sounds | source | licence | files fetched (sha256) |",
        "|---|---|---|---|",
        *rows,
        "",
    ]
    fetched = [use.record for use in corpora if use.record is not None]
    if fetched:
        lines += [
            "Clips made from a corpus's recordings are derived from them and stay under that corpus's licence "
            "(share-alike and non-commercial terms included); credit the corpora when you use or share this "
            "dataset:",
            "",
        ]
        for record in fetched:
            credit = f"- {record.info.title}: {record.info.citation}"
            if record.info.attribution:
                credit += (
                    f" Per-recording attributions: `{record.info.name}/{record.info.attribution}` in the folder "
                    "`fetch-sources` fetched into."
                )
            lines.append(credit)
        lines.append("")
    return lines


def render_card(
    options: BuildOptions, tasks: list[TaskStats], fingerprint: str, corpora: tuple[SourceUse, ...] = ()
) -> str:
    shots = ", ".join(map(str, options.shots))
    sources = (
        ", ".join(f"{kind}={folder}" for kind, folder in options.sources) or "none (all sounds synthesized)"
    )
    lines = [
        "# AudioICL-Bench (rebuilt with audioicl)",
        "",
        "In-context learning benchmark for audio-language models: every episode gives k labelled demonstrations "
        "and a query clip whose label the model must give. Built with `audioicl build` "
        f"(audioicl {__version__}); same seed and options give byte-identical files.",
        "",
        "## Build",
        "",
        f"- Seed {options.seed}; {options.episodes} episodes per task; k = {shots} "
        f"(`meta/meta_k<k>.jsonl`); tasks: {', '.join(t.name for t in tasks)}",
        f"- Real corpora (`--source`): {sources}",
        f"- Dataset fingerprint (see `manifest.json`): `{fingerprint}`",
        "",
        *construction_section(options),
        *sources_section(corpora),
        "## Layout and format",
        "",
        "16 kHz mono 16-bit PCM WAV under `data/` in the original's folder layout; meta files in the original's "
        "JSON Lines format (audio paths relative to this folder). Episodes are nested across k for all nine "
        "tasks: an episode has the same id and query in every k file and its k-shot demos are the first k of one "
        "fixed list (the original nested seven tasks and drew AudioRemap and AnomalyDetect afresh per k). Clips "
        "are never padded; the original's inference padded every clip of a prompt with zeros to the longest, "
        "which the runner reproduces with `--pad episode|batch`. Sounds are synthesized procedurally unless a real corpus was "
        "given, so absolute scores are not comparable with the original's; the protocol and scoring are.",
        "",
        "## Tasks",
        "",
    ]
    lines += [_task_section(stats, options.max_shots) for stats in tasks]
    return "\n".join(lines)
