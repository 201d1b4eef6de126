"""The README's commands and docs/cli.md's after them, run as a reader would run them.

Every fenced ``bash`` block of README.md, then of docs/cli.md (the commands in detail), is cut into commands (one per line; a ``\\`` continuation or a here
document stays with its command), and the commands run in README order, each through ``bash -c`` in one
temporary folder (so a command sees what the commands above it wrote, as in a reader's session), with this
environment's ``bin`` first on PATH (what ``. .venv/bin/activate`` gives). A command that exits non-zero fails
the test, naming its README line.

What does not run is listed here, short and explicit, each with why:

- ``SKIP``: commands that install, download, need a GPU model or a server, or are the test suite itself;
- ``STAND_INS``: commands too long to run in a test, replaced by the same command on a smaller build (same
  outputs, fewer episodes);
- ``NEEDS_HF``: commands that need the ``hf`` extra (torch, transformers), skipped where it is not installed.

A SKIP or STAND_INS entry that no README command matches fails the test, so the lists cannot go stale.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, ROOT / "docs" / "cli.md")  # read in this order, as one session

SKIP: tuple[tuple[str, str], ...] = (
    (
        r"^python3 -m venv \.venv",
        "installs from the network (scripts/test.sh does; tests/e2e/test_demo_cli.py runs the demo)",
    ),
    (r"^bash scripts/test\.sh", "the test suite itself"),
    (r"\bpip install\b", "downloads packages"),
    (
        r"--model (hf:(Qwen/|/models/)|vllm:|openai:)",
        "a real model: weights from the hub, a GPU or an API server",
    ),
    (r"^vllm serve\b", "a vLLM server of a real checkpoint"),
    (r"^audioicl chat-template ckpt/", "needs a real checkpoint folder"),
    (r"^audioicl (fetch-sources|download)\b", "downloads corpora or the released dataset"),
    (r"--in results-orig\b", "scores the results of the released dataset (downloaded above)"),
)
STAND_INS: dict[str, str] = {
    # 9 x 300 episodes, 2.3 GB: 20-45 s, and every command after it would run over all of it
    "audioicl build --out bench": "audioicl build --out bench --episodes 2 --k 1,5",
}
NEEDS_HF = (r"audioicl\.testing", r"--model hf:tiny-")
HAS_HF = all(importlib.util.find_spec(name) is not None for name in ("torch", "transformers"))


def strip_comment(line: str) -> str:
    """The line without a trailing shell comment (a ``#`` at the start of a word, outside quotes)."""
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def readme_commands(text: str) -> list[tuple[int, str]]:
    """(line number, command) for every command of the README's ``bash`` blocks, in order."""
    commands: list[tuple[int, str]] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^(\s*)```bash\s*$", lines[index])
        index += 1
        if not fence:
            continue
        indent = len(fence.group(1))
        while index < len(lines) and lines[index].strip() != "```":
            start, line = index + 1, strip_comment(lines[index][indent:])
            index += 1
            while line.endswith("\\") and index < len(lines):
                line = line[:-1].rstrip() + " " + strip_comment(lines[index][indent:]).strip()
                index += 1
            if heredoc := re.search(r"<<-?\s*'?\"?(\w+)", line):
                body = []
                while index < len(lines) and lines[index][indent:] != heredoc.group(1):
                    body.append(lines[index][indent:])
                    index += 1
                line = "\n".join([line, *body, heredoc.group(1)])
                index += 1
            if line.strip():
                commands.append((start, line.strip()))
        index += 1
    return commands


def why_skipped(command: str) -> str | None:
    for pattern, reason in SKIP:
        if re.search(pattern, command):
            return reason
    if not HAS_HF and any(re.search(pattern, command) for pattern in NEEDS_HF):
        return "needs the hf extra (torch, transformers)"
    return None


# (page:line, command) of every page's commands, in order
COMMANDS = [
    (f"{page.relative_to(ROOT)}:{line}", command)
    for page in PAGES
    for line, command in readme_commands(page.read_text(encoding="utf-8"))
]


def test_the_readme_has_commands_and_the_lists_match_them():
    texts = [command for _, command in COMMANDS]
    assert len(texts) > 20 and "audioicl demo --out audioicl-demo" in texts[0]
    for pattern, reason in SKIP:
        assert any(re.search(pattern, text) for text in texts), (
            f"SKIP entry matches nothing: {pattern} ({reason})"
        )
    for command in STAND_INS:
        assert command in texts, f"STAND_INS entry is not a README command: {command}"
    # the first two commands (install + demo, install + tests) are the README's promise: keep them first
    assert texts[0].startswith("python3 -m venv .venv") and texts[1] == "bash scripts/test.sh"


def test_strip_comment_and_continuations():
    assert strip_comment("audioicl build --out bench   # 15,641 clips") == "audioicl build --out bench"
    assert strip_comment("pip install 'audioicl[hf]'  # torch") == "pip install 'audioicl[hf]'"
    assert strip_comment('echo "a # b"') == 'echo "a # b"'
    text = "x\n\n  ```bash\n  vllm serve a \\\n      --b c\n  cat > f <<'EOF'\n  k: 1\n  EOF\n  ```\n"
    assert readme_commands(text) == [(4, "vllm serve a --b c"), (6, "cat > f <<'EOF'\nk: 1\nEOF")]


def test_the_readme_commands_run_as_written(tmp_path):
    """The README's cheap commands, in order, in one folder: each exits 0."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("AUDIOICL_SOURCES_BASE_URL", None)
    ran = []
    for line, command in COMMANDS:
        if why_skipped(command):
            continue
        command = STAND_INS.get(command, command)
        done = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, (
            f"{line}: `{command}` exited {done.returncode}\n{done.stderr[-3000:]}\n{done.stdout[-1000:]}"
        )
        ran.append(command)
    assert any(command.startswith("audioicl compare") for command in ran)
    assert any(command.startswith("audioicl study") for command in ran)


def test_the_readme_first_screen_is_the_project_the_two_commands_the_picture_and_links():
    """What a newcomer sees first fits 40 lines: what audioicl is, the two commands, the pipeline and where to
    read on; the detail lives in docs/cli.md and ``--help``."""
    text = README.read_text(encoding="utf-8")
    first = text.split("\n## ", 1)[0].splitlines()
    assert len(first) <= 40, len(first)
    screen = "\n".join(first)
    assert "audioicl demo --out audioicl-demo" in screen and "bash scripts/test.sh" in screen
    assert "docs/cli.md" in screen and "docs/architecture.md" in screen and "─►" in screen


def test_the_inspect_extra_installs_the_client_of_every_provider_docs_inspect_names():
    """`pip install 'audioicl[inspect]'` then docs/inspect.md's `inspect eval --model openai/...` must not stop on
    "pip install openai": inspect_ai installs no provider's client, so the extra names it."""
    import tomllib

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][
        "inspect"
    ]
    packages = {re.split(r"[<>=\[ ]", requirement)[0] for requirement in extra}
    providers = set(re.findall(r"--model ([a-z-]+)/", (ROOT / "docs" / "inspect.md").read_text()))
    client_of = {
        "openai": "openai",
        "openai-api": "openai",
    }  # inspect_ai's providers → the package each imports
    assert providers and providers <= set(client_of), providers
    assert {client_of[p] for p in providers} <= packages
