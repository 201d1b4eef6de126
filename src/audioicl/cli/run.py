"""``audioicl run``: run a model (or a built-in solver) over a dataset and write results files.

Option values come from the command line, else from ``--config FILE`` (YAML or JSON, keys named as the
long options, e.g. ``batch-size: 4``, ``tasks: [AudioCount]``, ``backend-option: {max_clip_seconds: 30}``;
relative paths are relative to the file), else the defaults of ``RunOptions`` (``audioicl.inference.options``). Config values pass
through the same parser as the command line, so they are checked the same way.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from audioicl.errors import AudioICLError
from audioicl.inference.options import RUN_ORDERS, RunOptions, Shard
from audioicl.inference.runner import run
from audioicl.inference.stopping import on_signals
from audioicl.integrations.export import is_export, materialize_export
from audioicl.prompts.chat import LAYOUTS
from audioicl.prompts.clips import MORSE_BANK_MODES, PAD_MODES
from audioicl.prompts.controls import CONTROLS
from audioicl.prompts.sets import STYLES, read_structured_file

from .options import (
    add_allow_missing_audio,
    add_backend_options,
    add_batch_size,
    add_generation,
    add_model,
    add_name,
    add_seed,
    add_selection,
    command,
    run_options,
)

REQUIRED = ("data", "model", "out")


def _add(sub, exit_on_error: bool = True):
    p = sub.add_parser(
        "run",
        help="run a model over a dataset, writing <model>_results_k<k>.jsonl",
        description=(
            "Run a model over the episodes of a dataset and append one result line per episode to "
            "OUT/<model>_results_k<k>.jsonl, <model> being the last path component of the model name "
            "(builtin:random -> random). Episodes already in the file are skipped, so rerunning resumes. "
            "OUT/<model>_run.json records the data root, dataset fingerprint and settings of that model's "
            "files, so several models share one folder (score them all with 'audioicl score --in OUT'). "
            "Running a model again into the same folder may add other k or tasks, or change --limit or "
            "--batch-size; it is refused, naming the setting, when a setting that changes the answers "
            "differs (pad, max-new-tokens, prompts file content, morse-bank, seed, backend options, data root "
            "or dataset). A condition that changes what is measured names its files itself, beside the plain "
            "run's: --style general -> <model>+style-general, --layout single-clip -> <model>+single-clip, "
            "--layout continuation -> <model>+continuation, -o precision=fp8 -> <model>+fp8, a study's "
            "--control -> <model>+<control>. "
            "With --shard I/N the run takes its share of the episodes and writes into OUT/shard-I-of-N/; "
            "join shards with 'audioicl merge'. With --ray the shards run as Ray tasks, each with its own backend, "
            "and are merged into OUT (their logs stay in OUT.shards/<model>/); rerunning resumes them. "
            "Before it creates OUT or loads the model, a run checks the data root, that every clip of the "
            "selected episodes is there (else it is refused, counting them, unless --allow-missing-audio), "
            "that OUT can be written and is outside the dataset, and the model spec. "
            "An episode that fails (unreadable or, with --allow-missing-audio, missing audio, clip too long "
            "for the backend) gets an error line; error lines are kept and a rerun reports them and exits 1, unless "
            "--retry-errors removes them first so their episodes run again. Exits 1 when any selected "
            "episode ends in an error line, or when a write fails (a full disk: one line naming the file; the "
            "results file is cut back to its last whole line). SIGTERM or SIGINT stops the run after the "
            "prompts in hand are written, releasing its locks (exit 143 / 130); a second signal stops it at "
            "once. Either way the same command resumes. "
            "Options not given fall back to --config FILE, then to the defaults."
        ),
        exit_on_error=exit_on_error,
    )
    p.add_argument(
        "--data",
        type=Path,
        help="dataset root (holding meta/ and data/), or an 'audioicl export' folder (holding export.json), "
        "materialised once into EXPORT/.audioicl-dataset/ and run from there; required",
    )
    add_model(p)
    p.add_argument(
        "--out",
        type=Path,
        help="folder for the results files and <model>_run.json (shared by models); required",
    )
    add_selection(
        p,
        k_help="shots to run, e.g. 1-5 or 0,1,3 (default: all in the dataset); k = 0 without a k = 0 meta file "
        "asks the queries of the smallest k file zero-shot (instruction and query, no demos)",
    )
    p.add_argument("--style", choices=STYLES, help="instruction style (default: specific)")
    p.add_argument(
        "--layout",
        choices=LAYOUTS,
        help="prompt layout (default: original); continuation: no chat template, each label on a line of its "
        "own and the query's left for the model to continue (pretrained base models; docs/study.md)",
    )
    add_batch_size(p)
    p.add_argument(
        "--window",
        type=int,
        help="prompts handed to the backend per call, which sorts them by length into batches; their "
        "lines are written (fsync) together; with --order episode a window runs on to the end of the "
        "episode it would cut (default: 4 x batch size, the first two calls 1 and 2 x batch size so the "
        "model starts while the next window is prepared; with --pad batch: one batch)",
    )
    p.add_argument(
        "--order",
        choices=RUN_ORDERS,
        help="episode: an episode's k prompts run together, sharing decoded clips and prompt prefixes; "
        "k: all of k=1, then k=2 ... (default: episode)",
    )
    add_generation(p)
    p.add_argument(
        "--pad", choices=PAD_MODES, help="zero-pad clips to the episode's or batch's longest (default: none)"
    )
    p.add_argument("--shard", type=Shard.parse, help="I/N: run shard I (1-based) of N")
    p.add_argument("--prompts", type=Path, help="prompt set file (YAML or JSON) overriding the wording")
    p.add_argument(
        "--morse-bank", choices=MORSE_BANK_MODES, help="show the Morse alphabet bank (default: auto)"
    )
    add_seed(p, help="run seed for sampling backends and built-ins (default: 0)")
    add_name(p)
    add_backend_options(p)
    add_allow_missing_audio(p)
    p.add_argument(
        "--retry-errors",
        action="store_true",
        default=None,
        help="first remove the selected episodes' error lines from the results files (atomically), so "
        "those episodes run again; reports how many were removed",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        default=None,
        help="stop before loading when some prompts hold more clips than the model takes in one prompt "
        "(default: say which tasks and k, and write an error line for each such prompt)",
    )
    p.add_argument(
        "--draws",
        type=int,
        help="demonstration draws per episode: draw 0 shows the file's demos, draw j >= 1 a seeded re-draw "
        "(from the run seed, the episode id and j) of which demos are shown and in what order, from the "
        "episode's demos in the largest k file, nested across k; at the largest k a draw re-orders the "
        "demos. Each draw is its own line with a 'draw' field (default: 1, no field)",
    )
    p.add_argument(
        "--orders",
        type=int,
        help="demo orders per draw: order 0 the draw's own, order o >= 1 a seeded permutation of its demos; "
        "each its own line with an 'order' field (default: 1, no field)",
    )
    p.add_argument(
        "--prompt-variants",
        type=int,
        help="instruction variants per prompt: variant 0 the run's wording (--style, --prompts), variants "
        "1.. our paraphrases of each instruction (same answer format); each its own line with a 'variant' "
        "field (default: 1, no field)",
    )
    p.add_argument(
        "--control",
        choices=CONTROLS.names(),
        help="a study condition, applied to every prompt before the backend sees it: "
        + "; ".join(f"{c.name}: {c.summary}" for _, c in CONTROLS.items())
        + ". The results go to <model>+<control>_results_k<k>.jsonl beside the plain run's",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        default=None,
        help="perception probes instead of the task: each query clip with its perceptual question asked "
        "directly, zero-shot (how many sounds, how long, which digits, which word, which reference where, "
        "normal or not), scored like the task; results <model>+probe_results_k0.jsonl",
    )
    p.add_argument(
        "--ray",
        action="store_true",
        default=None,
        help="run the shards as Ray tasks (on the cluster RAY_ADDRESS names, else on a local one), each "
        "with its own backend, logs in OUT.shards/<model>/, then merge them into OUT",
    )
    p.add_argument(
        "--ray-shards",
        type=int,
        help="shards of a --ray run (default: one per GPU of the cluster for hf/vllm, else one per CPU)",
    )
    p.add_argument(
        "--ray-gpus",
        type=float,
        help="GPUs per shard of a --ray run (default: 1 for hf/vllm on a cluster with GPUs, else 0); "
        "e.g. 2 for vLLM with -o tensor_parallel_size=2",
    )
    p.add_argument("--config", type=Path, help="YAML or JSON file of option values (command line wins)")
    return p


def _config_keys(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The keys of a config file: the parser's long options but --config and --help, with their actions."""
    return {
        option[2:]: action
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option not in ("--config", "--help")
    }


def _config_tokens(path: Path, parser: argparse.ArgumentParser) -> list[str]:
    """The config file as command-line tokens of ``parser`` (the run command's)."""
    values = read_structured_file(path, "config file")
    if not isinstance(values, dict):
        raise AudioICLError(f"config file must hold a mapping, got {type(values).__name__}", file=str(path))
    keys = _config_keys(parser)
    tokens: list[str] = []
    for raw_key, value in values.items():
        key = str(raw_key).replace("_", "-")
        if key not in keys:
            raise AudioICLError(f"unknown key {raw_key!r} (known: {', '.join(keys)})", file=str(path))
        if key == "backend-option":
            if not isinstance(value, dict):
                raise AudioICLError("'backend-option' must be a mapping of KEY: VALUE", file=str(path))
            for option, setting in value.items():
                tokens += ["--backend-option", f"{option}={setting}"]
            continue
        if keys[key].nargs == 0:  # a flag (store_true)
            if not isinstance(value, bool):
                raise AudioICLError(f"{raw_key!r} must be true or false", file=str(path))
            tokens += [f"--{key}"] if value else []
            continue
        if isinstance(value, list):
            value = ",".join(map(str, value))
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise AudioICLError(
                f"{raw_key!r} must be a string or a number, got {type(value).__name__}", file=str(path)
            )
        text = str(value)
        if keys[key].type is Path and not Path(text).is_absolute():
            text = str(path.parent / text)
        tokens += [f"--{key}", text]
    nul = next((token for token in tokens if "\x00" in token), None)
    if nul is not None:  # no command line can hold one; as a path or a name it would fail later, unexplained
        raise AudioICLError(f"a value holds a NUL character: {nul!r}", file=str(path))
    return tokens


def _config_values(path: Path) -> argparse.Namespace:
    parser = _add(argparse.ArgumentParser(prog="audioicl").add_subparsers(), exit_on_error=False)
    try:
        return parser.parse_args(_config_tokens(path, parser))
    except argparse.ArgumentError as exc:
        raise AudioICLError(str(exc), file=str(path)) from exc
    except AudioICLError as exc:
        exc.file = str(path)
        raise


def _merged(args: argparse.Namespace) -> dict[str, Any]:
    """Command-line values over config values; None where neither gives one."""
    values = {key: value for key, value in vars(args).items() if key not in ("config", "run", "command")}
    if args.config is None:
        return values
    config = vars(_config_values(args.config))
    merged = {key: value if value is not None else config.get(key) for key, value in values.items()}
    merged["backend_options"] = (config.get("backend_options") or []) + (args.backend_options or [])
    return merged


def options_from_args(args: argparse.Namespace) -> RunOptions:
    values = _merged(args)
    missing = [f"--{key}" for key in REQUIRED if values.get(key) is None]
    if missing:
        raise AudioICLError(f"{', '.join(missing)} required (on the command line or in --config)")
    if is_export(values["data"]):  # an `audioicl export` folder: run on the dataset folder it materialises
        values["data"] = materialize_export(values["data"])
    return run_options(values)


def _run_on_ray(options: RunOptions, values: dict[str, Any]) -> int:
    from audioicl.inference.cluster import RayPlan, run_on_ray

    done = run_on_ray(options, RayPlan(shards=values.get("ray_shards"), gpus=values.get("ray_gpus")))
    for summary in done.summaries:
        for k_summary in summary.ks:
            print(k_summary.line())
    for merged in done.merged:
        print(f"{merged.path}: {merged.lines} lines merged from {merged.sources} shard(s)")
    return _exit_code(done.errors)


def _exit_code(errors: int) -> int:
    if errors:
        print(f"{errors} episode(s) ended in an error line (see their 'error' field)")
        return 1
    return 0


@command(_add)
def run_command(args) -> int:
    options = options_from_args(args)
    values = _merged(args)
    if values.get("ray"):
        return _run_on_ray(options, values)
    if values.get("ray_shards") is not None or values.get("ray_gpus") is not None:
        raise AudioICLError("--ray-shards and --ray-gpus apply to --ray runs")
    with on_signals() as stop:  # SIGTERM, SIGINT: stop after the window in hand (inference.stopping)
        summary = run(options, stop=stop)
    for k_summary in summary.ks:
        print(k_summary.line())
    return _exit_code(summary.errors)
