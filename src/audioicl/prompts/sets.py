"""The prompt's wording (SPEC §4): system prompts per model family, the instruction styles (``specific``: the
task's own, ``general``: one task-agnostic instruction, ``none``) and prompt files that replace any of them.

Instruction variants (``run --prompt-variants N``): variant 0 is the run's own wording; variants 1.. are our
paraphrases, one prompt file each (``variants/variant-<v>.yaml``: ``general`` and every task's instruction,
each keeping its task's answer-format sentence word for word), which replace the instructions only.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from audioicl.dataset.meta import json_limit_problem
from audioicl.errors import AudioICLError
from audioicl.tasks import TASKS

Style = Literal["specific", "general", "none"]

STYLES: tuple[str, ...] = ("specific", "general", "none")

# System prompts per model family (SPEC §4); "default" serves every other model, the built-ins included.
QWEN_OMNI_SYSTEM = (
    "You are Qwen, a virtual human developed by the Qwen Team, Alibaba Group, capable of perceiving "
    "auditory and visual inputs, as well as generating text and speech."
)
DEFAULT_SYSTEM = {
    "default": "You are a helpful assistant.",
    "qwen2-audio": "You are a helpful assistant.",
    "qwen2.5-omni": QWEN_OMNI_SYSTEM,
    "qwen3-omni": QWEN_OMNI_SYSTEM,
}
FAMILIES: tuple[str, ...] = tuple(DEFAULT_SYSTEM)

GENERAL_INSTRUCTION = (
    "Each audio clip below comes with a numeric label. A hidden rule, the same for every clip here, maps "
    "each clip to its label. Infer the rule from the labelled examples and apply it to the query clip. "
    "Answer with a single integer only."
)


def system_family(model_name: str) -> str:
    """The system-prompt family of a model name or path (``Qwen/Qwen2.5-Omni-7B`` → ``qwen2.5-omni``)."""
    name = model_name.lower().replace("_", "-")
    if "qwen3-omni" in name:
        return "qwen3-omni"
    if "qwen2.5-omni" in name or "qwen2-5-omni" in name:
        return "qwen2.5-omni"
    if "qwen2-audio" in name:
        return "qwen2-audio"
    return "default"


# --------------------------------------------------------------------------- prompt sets


@dataclass(frozen=True)
class PromptSet:
    """The wording: system prompt per family, the general instruction, specific instructions per task.
    Tasks missing from ``instructions`` use their ``TaskSpec.instruction``."""

    system: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SYSTEM))
    general: str = GENERAL_INSTRUCTION
    instructions: Mapping[str, str] = field(default_factory=dict)

    def instruction(self, task: str, style: Style) -> str | None:
        if style == "none":
            return None
        if style == "general":
            return self.general
        if task in self.instructions:
            return self.instructions[task]
        if task in TASKS:
            return TASKS.get(task).instruction
        return self.general

    def system_prompt(self, family: str) -> str:
        return self.system.get(family, self.system["default"])

    def sha256(self) -> str:
        """A digest of the wording every prompt of this set can use: each family's system prompt, the general
        instruction and every task's specific one (its own where the set has none), as canonical JSON; the
        built-in set has one too, so a run record names the wording whether or not a file gave it."""
        wording = {
            "system": dict(sorted(self.system.items())),
            "general": self.general,
            "instructions": {task: self.instruction(task, "specific") for task in sorted(TASKS.names())},
        }
        text = json.dumps(wording, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


PROMPT_FILE_KEYS = ("system", "general", "instructions")


def _string_map(value: Any, key: str, known: Sequence[str], kind: str, file: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise AudioICLError(f"{key!r} must be a mapping of {kind} to text", file=file)
    unknown = [name for name in value if name not in known]
    if unknown:
        raise AudioICLError(
            f"unknown {kind} in {key!r}: {', '.join(map(str, unknown))} (known: {', '.join(known)})",
            file=file,
        )
    for name, text in value.items():
        if not isinstance(text, str):
            raise AudioICLError(f"{key}.{name} must be a string, got {type(text).__name__}", file=file)
    return dict(value)


def read_structured_file(path: Path, what: str) -> Any:
    """Decode a JSON (``.json``) or YAML (anything else) file; errors name the file and line."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AudioICLError(f"cannot read {what}: {exc.strerror}", file=str(path)) from exc
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise AudioICLError(f"not UTF-8 text ({exc.reason})", file=str(path), line=line) from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise AudioICLError(f"malformed JSON: {exc.msg}", file=str(path), line=exc.lineno) from exc
        except (ValueError, RecursionError) as exc:  # a number past 4,300 digits, nesting past the stack
            raise AudioICLError(f"unreadable JSON: {json_limit_problem(exc)}", file=str(path)) from None
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        line = mark.line + 1 if mark is not None else None
        raise AudioICLError(f"malformed YAML: {problem}", file=str(path), line=line) from exc
    except RecursionError:
        raise AudioICLError("unreadable YAML: nested too deeply", file=str(path)) from None
    except (ValueError, TypeError, IndexError, OverflowError) as exc:
        # a value its tag cannot hold (2001-02-30, !!int "", !!float abc): PyYAML's constructors raise these
        raise AudioICLError(f"malformed YAML: {json_limit_problem(exc)}", file=str(path)) from None
    problem = _expansion_problem(loaded)
    if problem is not None:
        raise AudioICLError(f"unusable YAML: {problem}", file=str(path))
    return loaded


# What a YAML file may expand to once its aliases are followed: far past any prompt or config file (the shipped
# prompt variants reuse instructions by alias), far below what exhausts memory when a value is copied or
# written out (the "billion laughs": ten aliases of ten aliases ... expand to 10^9 values from 300 bytes).
MAX_YAML_VALUES = 100_000


def _expansion_problem(value: Any) -> str | None:
    """Why ``value`` (as ``yaml.safe_load`` made it: aliases are shared objects) cannot be used: it expands to
    more than ``MAX_YAML_VALUES`` values, or an alias holds itself. Each distinct object is counted once
    (linear in the file), its expanded size summed over the references to it."""
    sizes: dict[int, int | None] = {}  # None: being counted (met again below itself: a self-reference)

    def size(node: Any) -> int:
        if not isinstance(node, dict | list):
            return 1
        if id(node) in sizes:
            known = sizes[id(node)]
            if known is None:
                raise _SelfReference
            return known
        sizes[id(node)] = None
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        total = 1
        for child in children:
            total = min(total + size(child), MAX_YAML_VALUES + 1)
        sizes[id(node)] = total
        return total

    try:
        total = size(value)
    except _SelfReference:
        return "an alias refers to the value that holds it"
    except RecursionError:
        return "nested too deeply"
    if total > MAX_YAML_VALUES:
        return f"its aliases expand it to over {MAX_YAML_VALUES:,} values"
    return None


class _SelfReference(Exception):  # noqa: N818 (a signal between two functions, never raised out of them)
    """A list or mapping that holds itself (``&a [*a]``)."""


def load_prompt_set(path: str | os.PathLike) -> PromptSet:
    """A prompt file (YAML or JSON) over the defaults; any of ``system`` (family → text), ``general``
    (text) and ``instructions`` (task → text). Unknown keys, families or tasks are errors."""
    path = Path(path)
    data = read_structured_file(path, "prompt file")
    file = str(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise AudioICLError(f"prompt file must hold a mapping, got {type(data).__name__}", file=file)
    unknown = [key for key in data if key not in PROMPT_FILE_KEYS]
    if unknown:
        raise AudioICLError(
            f"unknown key(s) {', '.join(map(str, unknown))} (known: {', '.join(PROMPT_FILE_KEYS)})", file=file
        )
    base = PromptSet()
    system = dict(base.system)
    system.update(_string_map(data.get("system", {}), "system", FAMILIES, "model family", file))
    instructions = _string_map(data.get("instructions", {}), "instructions", TASKS.names(), "task", file)
    general = data.get("general", base.general)
    if not isinstance(general, str):
        raise AudioICLError(f"'general' must be a string, got {type(general).__name__}", file=file)
    return PromptSet(system=system, general=general, instructions=instructions)


# --------------------------------------------------------------------------- instruction variants

VARIANTS_DIR = Path(__file__).with_name("variants")


def variant_files() -> tuple[Path, ...]:
    """The shipped variant files, variant 1 first (numbered without gaps)."""
    files: list[Path] = []
    while (path := VARIANTS_DIR / f"variant-{len(files) + 1}.yaml").is_file():
        files.append(path)
    return tuple(files)


def prompt_variants(base: PromptSet, count: int) -> tuple[PromptSet, ...]:
    """Variants 0 .. ``count - 1`` of ``base``: ``base`` itself, then ``base`` with the general and specific
    instructions of each shipped variant file (its system prompts kept)."""
    files = variant_files()
    if not 1 <= count <= len(files) + 1:
        raise AudioICLError(
            f"--prompt-variants must be 1 to {len(files) + 1} (variant 0 and ours), got {count}"
        )
    variants = [load_prompt_set(path) for path in files[: count - 1]]
    return (base, *(replace(base, general=v.general, instructions=v.instructions) for v in variants))
