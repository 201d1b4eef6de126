"""What each backend kind is, for ``audioicl backends``: its summary, its ``-o`` options with the defaults its
settings class declares, the built-in solvers, the extra that installs what it needs and whether that is
installed here.

A model backend's module imports its heavy packages (torch, vllm, httpx) at the top, so it is read here, not
imported: its docstring, its ``OPTIONS`` tuple, the defaults of its ``*Settings`` dataclass and its top-level
imports (the packages it needs) come from the source text (``ast``); whether those packages are installed
comes from ``importlib.util.find_spec``, which imports nothing.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import BACKEND_KINDS, BACKENDS, EXECUTION_OPTIONS, backend_kinds
from .solvers import SOLVERS

HIDDEN_OPTIONS = frozenset({"seed"})  # set with --seed, not -o
# What a run gets where its factory does more than take the settings class's default (module docstrings).
NOTES = {
    ("hf", "reuse"): "prefix where the family has the reuse path, else off",
    ("hf", "dtype"): "bf16 on a GPU that has it, else fp32",
    ("hf", "device"): "cuda when there is one, else cpu",
    ("openai", "base_url"): "--base-url, else $OPENAI_BASE_URL, else this",
    ("openai", "max_clip_seconds"): "none: the server decides",
    (
        "vllm",
        "limit_audio",
    ): "counted from the episodes (demos, query, Morse bank), capped by the model's limit",
    ("builtin", "max_clip_seconds"): "none: any length",
}


@dataclass(frozen=True)
class BackendOption:
    name: str
    default: Any = None  # None: none declared (the backend decides, or the option is off)
    execution: bool = False  # changes how answers are computed or fetched, not what they are: resumable
    note: str = ""  # where the value a run gets is not simply ``default``


@dataclass(frozen=True)
class BackendKind:
    kind: str
    summary: str
    options: tuple[BackendOption, ...] = ()
    extra: str | None = None
    packages: tuple[str, ...] = ()  # what its module imports beyond the standard library and audioicl
    missing: tuple[str, ...] = ()  # of ``packages``, those not installed here
    solvers: tuple[tuple[str, str], ...] = ()  # (name, summary) of the built-in solvers
    spec: str = field(default="")  # how a model spec of this kind reads

    @property
    def installed(self) -> bool:
        return not self.missing

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "summary": self.summary,
            "spec": self.spec,
            "options": [
                {"name": o.name, "default": o.default, "execution": o.execution, "note": o.note}
                for o in self.options
            ],
            "extra": self.extra,
            "install": f"pip install 'audioicl[{self.extra}]'" if self.extra else None,
            "packages": list(self.packages),
            "installed": self.installed,
            "missing": list(self.missing),
            "solvers": [{"name": name, "summary": summary} for name, summary in self.solvers],
        }


SPECS = {
    "builtin": "builtin:SOLVER",
    "hf": "hf:HUB_ID_OR_FOLDER",
    "vllm": "vllm:HUB_ID_OR_FOLDER",
    "openai": "openai:SERVED_MODEL_NAME",
}


def _first_sentence(text: str | None) -> str:
    if not text:
        return ""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    end = paragraph.find(". ")
    return paragraph if end < 0 else paragraph[: end + 1]


def _constants(tree: ast.Module) -> dict[str, Any]:
    """The module's top-level ``NAME = literal`` assignments."""
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _value(node: ast.expr | None, constants: dict[str, Any]) -> Any:
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _settings_defaults(tree: ast.Module, constants: dict[str, Any]) -> dict[str, Any]:
    """The field defaults of the module's ``*Settings`` class."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Settings"):
            return {
                item.target.id: _value(item.value, constants)
                for item in node.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            }
    return {}


def _packages(tree: ast.Module) -> tuple[str, ...]:
    """The top-level packages the module imports at its top, beyond the standard library and audioicl."""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            roots = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots = [node.module.split(".")[0]]
        else:
            continue
        for root in roots:
            if root not in sys.stdlib_module_names and root not in ("audioicl", "__future__"):
                names.append(root)
    return tuple(dict.fromkeys(names))


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def describe_kind(kind: str) -> BackendKind:
    """One kind, read from its module's source (``audioicl/backends/<kind>.py``) when it has one here."""
    source = Path(__file__).with_name(f"{kind}.py")
    extra = BACKEND_KINDS.get(kind)
    if kind not in BACKEND_KINDS or not source.is_file():  # registered from elsewhere: what the registry says
        factory = BACKENDS.get(kind)
        return BackendKind(kind, _first_sentence(factory.__doc__), spec=f"{kind}:NAME")
    tree = ast.parse(source.read_text(encoding="utf-8"))
    constants = _constants(tree)
    defaults = _settings_defaults(tree, constants)
    execution = EXECUTION_OPTIONS.get(kind, frozenset())
    options = tuple(
        BackendOption(name, defaults.get(name), name in execution, NOTES.get((kind, name), ""))
        for name in constants.get("OPTIONS", ())
        if name not in HIDDEN_OPTIONS
    )
    packages = _packages(tree)
    solvers: tuple[tuple[str, str], ...] = ()
    if kind == "builtin":
        solvers = tuple((name, _first_sentence(factory.__doc__)) for name, factory in SOLVERS.items())
    return BackendKind(
        kind,
        _first_sentence(ast.get_docstring(tree)),
        options,
        extra,
        packages,
        tuple(p for p in packages if not _installed(p)),
        solvers,
        SPECS.get(kind, f"{kind}:NAME"),
    )


def describe_backends() -> list[BackendKind]:
    """Every backend kind: this package's, then any registered from elsewhere."""
    ours = [kind for kind in BACKEND_KINDS if kind in backend_kinds()]
    return [describe_kind(kind) for kind in [*ours, *(k for k in backend_kinds() if k not in ours)]]
