"""Backend kinds declared once (``backends.kinds``): the declaration is what checks ``-o``, what the resume rule
reads, what ``docs/backends.md`` shows; the house's map (``docs/architecture.md``) and public example hold."""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
from pathlib import Path

import pytest

import audioicl
from audioicl import AudioICLError
from audioicl.backends.base import KIND_PACKAGES, ModelSpec, answer_options, kind_of
from audioicl.backends.catalog import options_markdown
from audioicl.backends.kinds import Kind, Option, auto_or, choice, whole
from audioicl.inference.record import record_conflicts

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "audioicl"


def record(**options: str) -> dict:
    return {"model": "hf:ckpt", "settings": {"model": "hf:ckpt", "backend_options": options}}


@pytest.mark.parametrize("name", ["allocator", "decode_batches", "encode_ahead", "reuse", "pack", "fused"])
def test_a_resumed_run_may_change_an_option_that_keeps_the_answers(name):
    kind = kind_of("hf")
    assert kind.option(name).keeps_answers
    values = [v for v in ("auto", "1", "3", "on", "off", "default", "expandable", "prefix", "audio") if v]
    first, second = [v for v in values if _parses(kind.option(name), v)][:2]
    assert record_conflicts(record(**{name: first}), record(**{name: second})) == []


def _parses(option: Option, text: str) -> bool:
    try:
        option.value(text)
    except AudioICLError:
        return False
    return True


def test_a_resumed_run_that_changes_the_dtype_is_refused():
    assert record_conflicts(record(dtype="bf16"), record(dtype="fp32")) == [
        "backend_options: was {'dtype': 'bf16'}, now {'dtype': 'fp32'}"
    ]
    assert answer_options(ModelSpec("hf", "x"), {"dtype": "bf16", "allocator": "default"}) == {
        "dtype": "bf16"
    }


def test_options_are_parsed_by_their_declaration_with_one_message_form():
    kind = Kind(
        "toy",
        "A toy.",
        "toy:NAME",
        "nowhere:make",
        (
            Option("mode", choice("a", "b"), "a", "which"),
            Option("count", auto_or(whole(1)), "auto", "how many", keeps_answers=True),
        ),
    )
    settings = kind.parse({"count": "4"})
    assert (settings.mode, settings.count, settings.given) == ("a", 4, frozenset({"count"}))
    with pytest.raises(AudioICLError, match=r"backend option mode must be a or b, got 'c'"):
        kind.parse({"mode": "c"})
    with pytest.raises(AudioICLError, match=r"count must be auto or a whole number, at least 1, got '0'"):
        kind.parse({"count": "0"})
    with pytest.raises(AudioICLError, match=r"toy backend takes no option colour \(known: mode, count\)"):
        kind.parse({"colour": "red"})
    assert kind.answer_options({"mode": "b", "count": "2"}) == {"mode": "b"}


def test_every_kind_package_declares_its_kind_and_imports_nothing_heavy():
    for name in KIND_PACKAGES:
        code = f"import sys, audioicl.backends.{name} as k; print(k.KIND.name, 'torch' in sys.modules, 'httpx' in sys.modules)"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.split() == [name, "False", "False"]


def test_importing_the_backend_protocol_loads_fewer_than_ten_audioicl_modules():
    made = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import audioicl.backends.base"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {line.rsplit("|", 1)[-1].strip() for line in made.stderr.splitlines() if "audioicl" in line}
    assert "audioicl.backends.base" in loaded and len(loaded) < 10, sorted(loaded)


def test_the_options_tables_of_the_docs_are_generated_from_the_declarations():
    page = (ROOT / "docs" / "backends.md").read_text(encoding="utf-8")
    found = re.search(
        r"<!-- generated: audioicl backends --markdown -->\n(.*)<!-- end generated -->", page, re.S
    )
    assert found, "docs/backends.md lost its generated markers"
    assert found.group(1) == options_markdown(), (
        "docs/backends.md is stale: paste `audioicl backends --markdown`"
    )


def test_every_package_has_its_paragraph_in_the_architecture_page():
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    packages = sorted(p.parent.name for p in SRC.glob("*/__init__.py"))
    missing = [name for name in packages if f"**`{name}/`**" not in page]
    assert not missing, f"docs/architecture.md has no paragraph for {missing}"
    kinds = [name for name in KIND_PACKAGES if f"`{name}/`" not in page]
    assert not kinds, f"docs/architecture.md does not name the kind packages {kinds}"


def test_the_public_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    failures, tried = doctest.testmod(audioicl, optionflags=doctest.ELLIPSIS)
    assert tried > 0 and failures == 0
