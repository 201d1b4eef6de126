"""The backend protocol, the registry of backend kinds, and model specs ``backend:name``.

A backend turns requests (a typed chat and who it belongs to) into responses; it never sees a query label,
a file path or a score. Shaped after inspect_ai's ``ModelAPI.generate(input, config)`` and lm-eval's
``Instance``: requests carry their identity so a backend may group and reorder them, one typed
``GenerationConfig`` says how to decode, and a failure of one prompt is a ``Response`` with an ``error``
(an error line in the results file), not a dead run.

A backend kind (``builtin``, ``hf``, ``vllm``, ``openai``) is a package of this one whose ``__init__``
declares its ``KIND`` (``kinds.Kind``: its options, extra, factory) and imports nothing heavy;
``load_backend`` checks the ``-o`` options against that declaration, then imports the factory's module, so
heavy dependencies load only for the kind asked for. A factory is ``factory(name, settings, workload)``:
the checkpoint or solver name, the parsed ``kinds.Settings`` and the run's ``Workload`` (or None).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from audioicl.errors import AudioICLError
from audioicl.prompts.chat import Chat
from audioicl.registry import Registry, unknown_name

from .kinds import Kind


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
    """What a run will ask of its backend: ``prompts``, ``max_audio_per_prompt``, the most clips one prompt
    holds (demo and query clips, plus the Morse bank's 26 where it is shown), and ``chats``: whether its
    prompts are chats for a chat template (every layout but ``continuation``)."""

    prompts: int = 0
    max_audio_per_prompt: int = 0
    chats: bool = True


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

    Optional capabilities are the Protocols below, checked with ``isinstance``: ``Stoppable``,
    ``Prefetching``, ``CountsWork``."""

    name: str
    family: str
    max_clip_seconds: float | None
    info: Mapping[str, Any]

    def generate(self, requests: Sequence[Request], config: GenerationConfig) -> list[Response]: ...

    def close(self) -> None: ...


@runtime_checkable
class Stoppable(Protocol):
    """A backend that can be asked to stop: ``stop()`` makes the ``generate`` in hand (and any later one) return
    soon, raising ``GenerationStopped`` with what it has answered. It is called from a signal handler, in the
    thread that runs ``generate``: it only sets a flag (no lock, no I/O). A backend without it finishes its
    call."""

    def stop(self) -> None: ...


@runtime_checkable
class Prefetching(Protocol):
    """A backend that prepares ahead: ``prefetch(requests, config)`` prepares what it can of ``requests`` for
    their ``generate`` (the runner calls it from its preparing thread for the windows ahead while the current
    one is answered); whatever it raises is ignored, ``generate`` prepares again what it did not."""

    def prefetch(self, requests: Sequence[Request], config: GenerationConfig | None = None) -> None: ...


@runtime_checkable
class CountsWork(Protocol):
    """A backend that counts its work, for the run record's timing and the benchmarks: ``seconds`` by phase
    and ``work`` (clips encoded, positions read, attempts out of memory), growing over its life."""

    seconds: dict[str, float]
    work: dict[str, int]


# The kinds of this package, each a package whose ``__init__`` declares its ``KIND`` (``kinds.Kind``).
KIND_PACKAGES = ("builtin", "hf", "openai", "vllm")
KINDS: Registry[Kind] = Registry("backend")
# the entry-point group another package declares its kinds in, each ``NAME = "module:KIND"`` (a ``kinds.Kind``
# named NAME; a hidden ``seed`` option to take the run's --seed): listed by ``audioicl backends``, checked and run
# as this package's are, imported on first use
ENTRY_POINTS = "audioicl.backends"


def register_kind(kind: Kind) -> Kind:
    """Make a kind from elsewhere known by its name (its factory a ``"module:function"`` of its own)."""
    return KINDS.add(kind.name, kind)


@functools.cache
def _declared_elsewhere() -> dict[str, importlib.metadata.EntryPoint]:
    """The kinds other installed packages declare (``ENTRY_POINTS``), by name, none imported; one that takes
    the name of this package's is left out (it cannot replace a built-in kind). Read once a process: it reads
    every installed distribution's metadata, and ``audioicl backends`` asks for each kind it lists."""
    found = importlib.metadata.entry_points(group=ENTRY_POINTS)
    return {point.name: point for point in found if point.name not in KIND_PACKAGES}


def backend_kinds() -> list[str]:
    """The backend kinds ``backend:name`` may name: this package's, any installed package's (``ENTRY_POINTS``)
    and any registered from elsewhere."""
    others = [*_declared_elsewhere(), *KINDS.names()]
    return [*KIND_PACKAGES, *dict.fromkeys(name for name in others if name not in KIND_PACKAGES)]


def kind_of(name: str) -> Kind:
    """The declaration of the kind ``name`` (its package's ``KIND``, or the one an installed package declares,
    imported on first use)."""
    if name not in KINDS and name in KIND_PACKAGES:
        KINDS.add(name, importlib.import_module(f"{__package__}.{name}").KIND)
    if name not in KINDS and (point := _declared_elsewhere().get(name)) is not None:
        KINDS.add(name, _loaded(point))
    if name not in KINDS:
        raise AudioICLError(unknown_name("backend", name, backend_kinds()))
    return KINDS.get(name)


def _loaded(point: importlib.metadata.EntryPoint) -> Kind:
    """The ``Kind`` an entry point names, or an error that says which package declares it and what is wrong."""
    where = f"backend kind {point.name!r} ({point.value}, declared by {point.dist.name if point.dist else 'a package'})"
    try:
        kind = point.load()
    except Exception as exc:  # noqa: BLE001 (any failure of another package's import is its own)
        raise AudioICLError(f"{where} cannot be imported: {type(exc).__name__}: {exc}") from None
    if not isinstance(kind, Kind) or kind.name != point.name:
        raise AudioICLError(f"{where} is not a kinds.Kind named {point.name!r}")
    return kind


def _known(name: str) -> bool:
    """Whether ``name`` is a kind this package knows how to find (without importing it)."""
    return name in KIND_PACKAGES or name in KINDS or name in _declared_elsewhere()


def answer_options(model: ModelSpec | None, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` of a ``model``'s backend without those that keep the answers (``Option.keeps_answers``):
    those that may change what a result line says (all of them for no model, or a kind not known here)."""
    if model is None or not _known(model.backend):
        return dict(options)
    return kind_of(model.backend).answer_options(options)


def option_conditions(model: ModelSpec, options: Mapping[str, Any]) -> list[str]:
    """The condition names ``options`` of ``model``'s backend set (``Option.conditions``: ``precision=fp8`` →
    ``fp8``); none for a kind not known here."""
    if not _known(model.backend):
        return []
    return kind_of(model.backend).conditions(options)


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
            raise AudioICLError(
                f"model spec must be BACKEND:NAME, BACKEND one of {', '.join(backend_kinds())} "
                f"(e.g. hf:{text} for a checkpoint or hub id), got {text!r}"
            )
        return cls(backend, name)

    @property
    def file_name(self) -> str:
        """The ``<model>`` of ``<model>_results_k<k>.jsonl``: the name's last path component (SPEC §3)."""
        return last_component(self.name)

    def __str__(self) -> str:
        return f"{self.backend}:{self.name}"


def last_component(name: str) -> str:
    """A hub id's or a folder path's last component (``Qwen/Qwen2-Audio-7B`` → ``Qwen2-Audio-7B``; either
    slash, a trailing one ignored)."""
    return name.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]


def looks_like_path(name: str) -> bool:
    """Whether a checkpoint name is meant as a local folder rather than a hub id (``ORG/NAME``): it starts
    with ``.``, ``/``, ``~``, ``\\`` or a drive letter, or its first component exists here."""
    if name.startswith((".", "/", "~", "\\")) or re.match(r"^[A-Za-z]:[\\/]", name):
        return True
    first = Path(name).parts[0] if Path(name).parts else ""
    return bool(first) and first != name and Path(first).exists()


def check_checkpoint(model: ModelSpec) -> None:
    """Refuse a checkpoint kind's name that is meant as a local folder (``looks_like_path``) but is none."""
    if not kind_of(model.backend).checkpoint or not looks_like_path(model.name):
        return
    path = Path(model.name).expanduser()
    if not path.exists():
        raise AudioICLError(f"no such folder {model.name} (the checkpoint of {model})")
    if not path.is_dir():
        raise AudioICLError(f"{model.name} is a file; the checkpoint of {model} must be a folder")


def check_hub_checkpoint(model: ModelSpec) -> None:
    """Refuse a checkpoint kind's hub id that is neither cached nor reachable (``hub.check_hub_id``); a name
    that is a folder here is the folder transformers loads. Asked after the kind's packages are found, so that a
    missing extra is said first."""
    name = model.name
    if (
        kind_of(model.backend).checkpoint
        and not looks_like_path(name)
        and not Path(name).expanduser().is_dir()
    ):
        from .hub import check_hub_id

        check_hub_id(name)


def check_model(model: ModelSpec, import_kind: bool = True) -> None:
    """What ``load_backend`` would refuse before it builds anything: an unknown kind, a checkpoint folder
    that does not exist and (``import_kind``) a package the kind needs that is not installed, then a hub id
    that cannot be had."""
    kind = kind_of(model.backend)
    check_checkpoint(model)
    if import_kind:
        kind.make()
        check_hub_checkpoint(model)


def load_backend(model: ModelSpec, workload: Workload | None = None, **options: object) -> Backend:
    """The backend for a model spec, built with ``options`` (``-o`` text, checked against the kind's
    declaration) and the run's ``workload`` (what it will ask, for engines that fix limits when they start).
    The run's ``seed`` goes to a kind that declares it (every built-in one does; a kind from elsewhere may not)."""
    kind = kind_of(model.backend)
    if "seed" in options and not any(option.name == "seed" for option in kind.options):
        options = {name: value for name, value in options.items() if name != "seed"}
    settings = kind.parse(options)
    check_checkpoint(model)
    make = kind.make()
    check_hub_checkpoint(model)
    return make(checkpoint_name(model), settings, workload)


_SCHEME_END = re.compile(r"://")
_URL_REST = re.compile(r"\S*")  # what follows "://" up to a space
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")
# query parameters whose value is hidden: a name holding one of these (api_key, access_token, sig ...)
_SECRET_PARAMETERS = ("key", "token", "secret", "password", "passwd", "pwd", "auth", "sig", "credential")


def hide_url_credentials(text: str) -> str:
    """``text`` with every URL's user information (``https://user:TOKEN@host``, up to the authority's last
    ``@``, so a password holding ``@`` goes whole) shown as ``<credentials>``, and the values of its query
    parameters named like secrets (``?api_key=...``) as ``<hidden>``: what a record, a log or an error may
    say of a URL the user gave. Linear in the text's length (a server's body of any size passes through it):
    each URL, from its scheme to the next space, is read once."""
    pieces, done, scanned = [], 0, 0
    for found in _SCHEME_END.finditer(text):
        begin, start = found.start(), found.end()
        if begin < scanned:  # inside a URL already read
            continue
        scheme = begin
        while scheme > scanned and text[scheme - 1] in _SCHEME_CHARS:
            scheme -= 1
        if not any(char.isalpha() for char in text[scheme:begin]):
            continue
        end = _URL_REST.match(text, start).end()  # type: ignore[union-attr]  (\S* always matches)
        scanned = end
        shown = _hidden_in_url(text[start:end])
        if shown != text[start:end]:
            pieces += [text[done:start], shown]
            done = end
    return "".join([*pieces, text[done:]])


def userinfo_end(rest: str) -> int:
    """Where the user information of a URL after its ``://`` ends (the index of its ``@``), -1 where it has
    none. Normally the authority's last ``@`` (a password holding ``@`` goes whole). A password holding
    ``/`` ends the authority early: where what precedes the first ``/`` holds an ``@`` or a port that is
    not a number (``u:p@ss/word@host``, ``u:ab/cd@host``) and an ``@`` follows in the path, the user
    information runs to the path's last ``@`` (``https://host/a@b`` keeps its path)."""
    authority = next((index for index, char in enumerate(rest) if char in "/?#"), len(rest))
    at = rest.rfind("@", 0, authority)
    path_end = next((index for index, char in enumerate(rest) if char in "?#"), len(rest))
    later = rest.rfind("@", authority, path_end)
    if later < 0:
        return at
    host_and_port = rest[at + 1 : authority].rpartition("]")[2]  # after an IPv6 address's brackets
    port_is_no_number = ":" in host_and_port and not host_and_port.partition(":")[2].isdigit()
    return later if at >= 0 or port_is_no_number else at


def _hidden_in_url(rest: str) -> str:
    """A URL after its ``://`` with its user information and secret-named query values hidden."""
    at = userinfo_end(rest)
    if at >= 0:
        rest = "<credentials>" + rest[at:]
    query = rest.find("?")
    if query < 0:
        return rest
    fragment = rest.find("#", query)
    end = fragment if fragment >= 0 else len(rest)
    parameters = []
    for parameter in rest[query + 1 : end].split("&"):
        name, equals, _ = parameter.partition("=")
        secret = equals and any(word in name.lower() for word in _SECRET_PARAMETERS)
        parameters.append(f"{name}=<hidden>" if secret else parameter)
    return rest[: query + 1] + "&".join(parameters) + rest[end:]


def checkpoint_name(model: ModelSpec) -> str:
    """The name a backend loads: a checkpoint kind's local folder with ``~`` expanded (``check_checkpoint``
    finds it so; transformers and vLLM would take ``~/ckpt`` for a hub id), else the name as given."""
    if kind_of(model.backend).checkpoint and model.name.startswith("~"):
        return str(Path(model.name).expanduser())
    return model.name
