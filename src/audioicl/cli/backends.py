"""``audioicl backends``: the backend kinds a model spec may name, their options, and whether what each
needs is installed here (``--json``: the same as JSON)."""

from __future__ import annotations

import json
from typing import Any

from .options import command


def _add(sub):
    p = sub.add_parser(
        "backends",
        help="list the backend kinds: built-in solvers, -o options and defaults, the extra each needs",
        description=(
            "List the backend kinds of BACKEND:NAME (builtin and its solvers, hf, vllm, openai): how a spec "
            "reads, the -o KEY=VALUE options with what each takes and its default, as the kind declares them (* marks those a "
            "resumed run may change: they change how the answers are computed or fetched, not what they "
            "are), the extra that installs what the kind needs and whether that is installed here."
        ),
    )
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.add_argument(
        "--markdown",
        action="store_true",
        help="print each kind's options as the Markdown of docs/backends.md",
    )
    return p


def _plain(text: str) -> str:
    return text.replace("``", "")


def _default(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def format_backends(described) -> str:
    lines: list[str] = []
    for entry in described:
        kind = entry.kind
        if kind.extra is None:
            needs = "needs no extra"
        else:
            needs = f"extra '{kind.extra}' ({', '.join(kind.packages) or 'nothing more'})"
        state = "installed" if entry.installed else f"not installed (missing {', '.join(entry.missing)})"
        install = f"; pip install 'audioicl[{kind.extra}]'" if kind.extra and not entry.installed else ""
        lines.append(f"{kind.name}  {kind.spec}  {needs}: {state}{install}")
        if kind.summary:
            lines.append(f"  {_plain(kind.summary)}")
        for name, summary in entry.solvers:
            lines.append(f"    builtin:{name:<10} {_plain(summary)}")
        if kind.listed:
            lines.append("  options (-o KEY=VALUE): takes; default")
            width = max(len(o.name) for o in kind.listed) + 1
            for o in kind.listed:
                if o.default is None:
                    default = o.note or "-"
                else:
                    default = _default(o.default) + (f" ({o.note})" if o.note else "")
                name = o.name + ("*" if o.keeps_answers else "")
                lines.append(f"    {name:<{width}}  {o.parser.expected}; {default}")
                lines.append(f"    {'':<{width}}  {o.help}")
        lines.append("")
    lines.append(
        "*: may differ when a run resumes (changes how answers are computed or fetched, not what they are); "
        "-: none declared"
    )
    return "\n".join(lines)


@command(_add)
def run(args) -> int:
    from audioicl.backends.catalog import describe_backends, options_markdown

    if args.markdown:
        print(options_markdown(), end="")
        return 0
    kinds = describe_backends()
    if args.json:
        print(json.dumps([kind.to_json() for kind in kinds], indent=2, ensure_ascii=False))
    else:
        print(format_backends(kinds))
    return 0
