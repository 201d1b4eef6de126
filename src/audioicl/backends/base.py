"""The backend protocol, the registry of backend kinds, and model specs ``backend:name``.

A backend turns requests (a typed chat and who it belongs to) into responses; it never sees a query label,
a file path or a score. Shaped after inspect_ai's ``ModelAPI.generate(input, config)`` and lm-eval's
``Instance``: requests carry their identity so a backend may group and reorder them, one typed
``GenerationConfig`` says how to decode, and a failure of one prompt is a ``Response`` with an ``error``
(an error line in the results file), not a dead run.

A backend kind (``builtin``, ``hf``, ``vllm``, ``openai`` ...) registers a factory
``factory(name: str, **options) -> Backend`` in ``BACKENDS`` from its module ``audioicl.backends.<kind>``;
``load_backend`` imports that module on first use, so heavy dependencies load only for the backend asked for.
Factories receive the run's ``seed`` (an int) and the user's ``--backend-option KEY=VALUE`` pairs (strings)
as keyword options. A factory that declares a keyword parameter ``workload`` also gets the run's
``Workload`` (what the run will ask, known before the backend loads), for engines that fix limits when they
start (vLLM's clips per prompt).
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from audioicl.errors import AudioICLError
from audioicl.prompts.chat import Chat
from audioicl.registry import Registry


@dataclass(frozen=True)
class GenerationConfig:
    """How to decode: greedy when ``temperature`` is 0 (the protocol's default, SPEC §4).
    ``batch_size``: prompts a backend runs together (its micro-batch; the runner hands it larger windows)."""

    max_new_tokens: int = 16
    temperature: float = 0.0
    seed: int = 0
    stop: tuple[str, ...] = ()
    batch_size: int = 8


@dataclass(frozen=True)
class Request:
    """One prompt and who it belongs to: ``key`` is unique in a run (``<id>@k<k>``, followed by ``/d<draw>``,
    ``/o<order>`` and ``/v<variant>`` for each of a presentation's that is not 0: ``AudioICL00001@k2/d1/v2``)."""

    key: str
    episode_id: str
    task: str
    k: int
    chat: Chat


@dataclass(frozen=True)
class Workload:
    """What a run will ask of its backend: ``prompts``, and ``max_audio_per_prompt``, the most clips
    one prompt holds (demo and query clips, plus the Morse bank's 26 where it is shown)."""

    prompts: int = 0
    max_audio_per_prompt: int = 0


@dataclass(frozen=True)
class Usage:
    input_tokens: int | None = None
    output_tokens: int | None = None
    audio_tokens: int | None = None

    def to_json(self) -> dict[str, int]:
        return {key: value for key, value in vars(self).items() if value is not None}


@dataclass(frozen=True)
class Response:
    """The raw model text, or ``error`` saying why there is none for this request."""

    text: str | None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def failed(cls, error: str) -> Response:
        return cls(None, error)


class BackendUnreachable(AudioICLError):
    """Raised by ``generate`` when no request of the call could reach the backend (a server that refuses
    connections or whose name does not resolve): the runner stops at once and writes no line for the call,
    so that a rerun resumes there, instead of writing an error line for every episode left."""


class GenerationStopped(Exception):  # noqa: N818 (not an error: the call was asked to stop)
    """Raised by ``generate`` after the backend's optional ``stop()`` was called: ``answered`` maps the index
    of each request answered before the stop to its response; the others were not answered (a rerun asks
    them again)."""

    def __init__(self, answered: Mapping[int, Response]):
        super().__init__(f"stopped with {len(answered)} requests answered")
        self.answered = dict(answered)


class Backend(Protocol):
    """``name``: what it is (``builtin:random``, ``hf:Qwen2-Audio-7B-Instruct``); ``family``: the
    system-prompt family (``prompts.sets.FAMILIES``); ``max_clip_seconds``: the longest clip it accepts (None:
    any; the runner turns longer clips into error lines); ``info``: facts for the run record (versions,
    checkpoint hash, dtype, device). ``generate`` returns one response per request, in order; ``close``
    frees what the backend holds (GPU memory, connections).

    Optional, ``stop()``: asks the ``generate`` in hand (and any later one) to return soon, raising
    ``GenerationStopped`` with what it has answered. It is called from a signal handler, in the thread that
    runs ``generate``: it only sets a flag (no lock, no I/O). A backend without it finishes its call.

    Optional, ``prefetch(requests, config)``: prepares what it can of ``requests`` for their ``generate``
    (the runner calls it from its preparing thread for the windows ahead while the current one is answered);
    whatever it raises is ignored, ``generate`` prepares again what it did not."""

    name: str
    family: str
    max_clip_seconds: float | None
    info: Mapping[str, Any]

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]: ...

    def close(self) -> None: ...


BackendFactory = Callable[..., Backend]

BACKENDS: Registry[BackendFactory] = Registry("backend")


# Backend options that change how the answers are computed or fetched, not what they are: a resumed run, or
# another shard, may set them otherwise (``inference.record.record_conflicts``). The ``hf`` ones give the same answers
# in fp32 (tests/test_reuse.py); in bf16 they move the numbers no more than the batch size does.
EXECUTION_OPTIONS: Mapping[str, frozenset[str]] = {
    "hf": frozenset({"cache", "reuse", "encoder", "pack"}),
    "openai": frozenset({"concurrency", "timeout", "max_retries", "backoff", "max_backoff"}),
    "vllm": frozenset({"gpu_memory_utilization", "enforce_eager", "distributed_executor_backend"}),
}


def answer_options(model: ModelSpec | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of a ``model``'s backend without its ``EXECUTION_OPTIONS``: those that may change what a
    result line says (all of them for no model)."""
    execution = EXECUTION_OPTIONS.get(model.backend, frozenset()) if model else frozenset()
    return {key: value for key, value in options.items() if key not in execution}


def refuse_unknown_options(who: str, options: Mapping[str, object], known: Sequence[str]) -> None:
    """The one check every backend kind makes of ``--backend-option`` keys; ``who`` starts the message
    (``"hf backend takes"``, ``"builtin backends take"``)."""
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise AudioICLError(f"{who} no option {', '.join(unknown)} (known: {', '.join(known)})")


def register_backend(kind: str) -> Callable[[BackendFactory], BackendFactory]:
    def decorate(factory: BackendFactory) -> BackendFactory:
        return BACKENDS.add(kind, factory)

    return decorate


@dataclass(frozen=True)
class ModelSpec:
    """A model spec ``backend:name``, parsed once (``parse``) where it enters: ``hf:Qwen/Qwen2-Audio-7B-Instruct``
    → backend ``hf``, name ``Qwen/Qwen2-Audio-7B-Instruct`` (a hub id, a checkpoint path, a served model's name,
    a built-in solver). ``str(spec)`` gives the text back, as run records store it."""

    backend: str
    name: str

    def __post_init__(self) -> None:
        if not self.backend or ":" in self.backend or not self.name.strip("/\\"):
            raise AudioICLError(f"model spec must be BACKEND:NAME (e.g. builtin:random), got {str(self)!r}")

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """``backend:name`` → its spec; the one place a spec's text is split."""
        backend, sep, name = text.partition(":")
        if not sep:
            raise AudioICLError(f"model spec must be BACKEND:NAME (e.g. builtin:random), got {text!r}")
        return cls(backend, name)

    @property
    def file_name(self) -> str:
        """The ``<model>`` of ``<model>_results_k<k>.jsonl``: the name's last path component (SPEC §3)."""
        return self.name.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return f"{self.backend}:{self.name}"


# The backend kinds of this package: kind → the extra that installs what its module needs (None: nothing).
# Only these modules are imported as kinds (the others of ``backends/`` are their helpers); a kind registered
# from elsewhere (``register_backend``) is known too.
BACKEND_KINDS: Mapping[str, str | None] = {"builtin": None, "hf": "hf", "openai": "api", "vllm": "vllm"}
# Kinds whose name is a checkpoint: a hub id or a local folder.
CHECKPOINT_KINDS = frozenset({"hf", "vllm"})


def backend_kinds() -> list[str]:
    """The backend kinds ``backend:name`` may name: this package's and any registered from elsewhere."""
    return sorted(set(BACKEND_KINDS) | set(BACKENDS.names()))


def _import_kind(kind: str) -> None:
    """Import the module of one of this package's kinds, which registers it; a package it needs that is
    not installed is refused naming the extra that installs it."""
    if kind in BACKENDS or kind not in BACKEND_KINDS:
        return
    try:
        importlib.import_module(f"{__package__}.{kind}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__package__}.{kind}":
            raise
        extra = BACKEND_KINDS[kind]
        install = f": pip install 'audioicl[{extra}]'" if extra else ""
        raise AudioICLError(f"the {kind} backend needs {exc.name or 'a package'}{install}") from exc


def looks_like_path(name: str) -> bool:
    """Whether a checkpoint name is meant as a local folder rather than a hub id (``ORG/NAME``): it starts
    with ``.``, ``/``, ``~``, ``\\`` or a drive letter, or its first component exists here."""
    if name.startswith((".", "/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", name):
        return True
    first = Path(name).parts[0] if Path(name).parts else ""
    return bool(first) and first != name and Path(first).exists()


def check_checkpoint(model: ModelSpec) -> None:
    """Refuse a checkpoint kind's name that is meant as a local folder (``looks_like_path``) but is none."""
    if model.backend not in CHECKPOINT_KINDS or not looks_like_path(model.name):
        return
    path = Path(model.name).expanduser()
    if not path.exists():
        raise AudioICLError(f"no such folder {model.name} (the checkpoint of {model})")
    if not path.is_dir():
        raise AudioICLError(f"{model.name} is a file; the checkpoint of {model} must be a folder")


def check_model(model: ModelSpec, import_kind: bool = True) -> None:
    """What ``load_backend`` would refuse before it builds anything: an unknown kind, a checkpoint folder
    that does not exist and (``import_kind``) a package the kind needs that is not installed."""
    if model.backend not in BACKEND_KINDS and model.backend not in BACKENDS:
        raise AudioICLError(f"unknown backend {model.backend!r} (known: {', '.join(backend_kinds())})")
    check_checkpoint(model)
    if import_kind:
        _import_kind(model.backend)


def load_backend(model: ModelSpec, workload: Workload | None = None, **options: object) -> Backend:
    """The backend for a model spec, built with ``options`` (and ``workload`` where its factory takes one)."""
    check_model(model)
    if model.backend not in BACKENDS:  # a module of ours that registered nothing
        raise AudioICLError(f"unknown backend {model.backend!r} (known: {', '.join(backend_kinds())})")
    factory = BACKENDS.get(model.backend)
    name = checkpoint_name(model)
    if workload is not None and "workload" in inspect.signature(factory).parameters:
        return factory(name, workload=workload, **options)
    return factory(name, **options)


URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def hide_url_credentials(text: str) -> str:
    """``text`` with every URL's user information (``https://user:TOKEN@host``) shown as ``<credentials>``: what
    a record, a log or an error may say of a URL the user gave."""
    return URL_CREDENTIALS.sub(r"\g<scheme><credentials>@", text)


def checkpoint_name(model: ModelSpec) -> str:
    """The name a backend loads: a checkpoint kind's local folder with ``~`` expanded (``check_checkpoint``
    finds it so; transformers and vLLM would take ``~/ckpt`` for a hub id), else the name as given."""
    if model.backend in CHECKPOINT_KINDS and model.name.startswith("~"):
        return str(Path(model.name).expanduser())
    return model.name
