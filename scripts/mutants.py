"""Mutation testing of one module of ``audioicl``: small mutants of its source, each run against the tests that
exercise the module, counted killed (a test failed, or the run passed its time limit) or survived.

``python scripts/mutants.py scoring/rules.py [--tests PATH ...] [--jobs 2] [--coverage coverage.json]``
(``scripts/mutants.sh MODULE`` runs it in the test environment). The mutants, one change each:

- a comparison turned (``==``/``!=``, ``<``/``<=``, ``>``/``>=``, ``in``/``not in``, ``is``/``is not``);
- ``and``/``or`` swapped, a ``not`` dropped, an arithmetic or set operator swapped (``+``/``-``, ``*``/``/``,
  ``//``/``*``, ``|``/``&``), ``+=``/``-=``;
- a number moved by one, a bool flipped, a short string (not a docstring or message) changed;
- a branch dropped (an ``if``'s or ``while``'s test made ``False``), a ``return`` made ``return None``, a call
  made as a statement dropped, ``break``/``continue`` swapped, ``min``/``max`` and ``any``/``all`` swapped;
- the first two positional arguments of a call swapped.

Each mutant is written into a copy of ``src/`` that ``PYTHONPATH`` puts first (the CLI's subprocesses see it
too); the working tree is never touched. A first run of the unmutated module records which test runs each line
(pytest-cov's test contexts); a mutant is then run against the tests that reach its lines, or against the whole
selection where no test does in-process (a line run at import, or only by a CLI subprocess). With ``--coverage`` (coverage.py's JSON of the whole suite,
``scripts/coverage.sh``), a mutant on a line no test executes is counted survived without being run.
Writes ``mutants/<module>.json`` (every mutant: line, what changed, outcome) and prints the survivors.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import multiprocessing
import multiprocessing.util
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "audioicl"

# The tests that exercise each module, fastest first (``-x`` stops at the first failure).
TESTS = {
    "scoring/rules.py": [
        "tests/scoring/test_scoring.py",
        "tests/scoring/test_compliance.py",
        "tests/scoring/test_confusion.py",
        "tests/test_properties.py",
    ],
    "scoring/score.py": [
        "tests/scoring",
        "tests/test_properties.py",
        "tests/e2e/test_score_cli.py",
        "tests/e2e/test_output_paths_cli.py",
    ],
    "dataset/meta.py": [
        "tests/dataset/test_meta.py",
        "tests/dataset/test_meta_problems.py",
        "tests/dataset/test_validate.py",
        "tests/test_properties.py",
        "tests/e2e/test_validate_cli.py",
    ],
    "prompts/build.py": [
        "tests/prompts",
        "tests/backends/test_rendering.py",
        "tests/test_properties.py",
    ],
    "inference/results.py": [
        "tests/inference/test_results_log.py",
        "tests/inference/test_runner.py",
        "tests/inference/test_stopping.py",
        "tests/test_properties.py",
        "tests/e2e/test_run_cli.py",
    ],
}

COMPARISONS = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}
OPERATORS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.BitOr: ast.BitAnd,
    ast.BitAnd: ast.BitOr,
}
NAMES = {"min": "max", "max": "min", "any": "all", "all": "any"}
SHORT_STRING = 24  # longer strings are messages: a mutant of one tells little


@dataclass(frozen=True)
class Mutant:
    """One change: ``text`` replaces the source between (line, col) and (end_line, end_col)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str
    what: str


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed | survived | timeout | not covered
    seconds: float


def _span(node: ast.AST, text: str, what: str) -> Mutant:
    return Mutant(node.lineno, node.col_offset, node.end_lineno, node.end_col_offset, text, what)


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants (a module's, class's or function's first statement)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def _in_formatted(tree: ast.Module) -> set[int]:
    """ids of the nodes inside f-strings (their parts cannot be replaced one by one)."""
    return {
        id(inner) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for inner in ast.walk(node)
    }


def _annotations(tree: ast.Module) -> set[int]:
    """ids of the nodes inside type annotations (never evaluated: the modules use postponed annotations)."""
    roots = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            roots.append(node.returns)
    return {id(inner) for root in roots for inner in ast.walk(root)}


def mutants_of(source: str) -> Iterator[Mutant]:
    tree = ast.parse(source)
    skip = _docstrings(tree) | _in_formatted(tree) | _annotations(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        yield from _node_mutants(node, source)


def _node_mutants(node: ast.AST, source: str) -> Iterator[Mutant]:
    def again(changed: ast.AST, what: str) -> Mutant:
        return _span(node, f"({ast.unparse(changed)})", what)

    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            other = COMPARISONS.get(type(op))
            if other is not None:
                ops = [*node.ops[:i], other(), *node.ops[i + 1 :]]
                changed = ast.Compare(node.left, ops, node.comparators)
                yield again(changed, f"{type(op).__name__} -> {other.__name__}")
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield again(ast.BoolOp(other(), node.values), f"{type(node.op).__name__} -> {other.__name__}")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield again(node.operand, "not dropped")
    elif isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        other = OPERATORS[type(node.op)]
        yield again(
            ast.BinOp(node.left, other(), node.right), f"{type(node.op).__name__} -> {other.__name__}"
        )
    elif isinstance(node, ast.AugAssign) and type(node.op) in (ast.Add, ast.Sub):
        other = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
        changed = ast.AugAssign(node.target, other(), node.value)
        yield _span(node, ast.unparse(changed), f"augmented {type(node.op).__name__} -> {other.__name__}")
    elif isinstance(node, ast.Constant):
        yield from _constant_mutants(node)
    elif isinstance(node, ast.If | ast.While):
        yield _span(node.test, "(False)", f"{type(node).__name__.lower()} branch dropped")
    elif isinstance(node, ast.Return) and node.value is not None:
        if not (isinstance(node.value, ast.Constant) and node.value.value is None):
            yield _span(node, "return None", "return None")
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        yield _span(node.value, "None", "call dropped")
    elif isinstance(node, ast.Break):
        yield _span(node, "continue", "break -> continue")
    elif isinstance(node, ast.Continue):
        yield _span(node, "break", "continue -> break")
    elif isinstance(node, ast.Name) and node.id in NAMES and isinstance(node.ctx, ast.Load):
        yield _span(node, NAMES[node.id], f"{node.id} -> {NAMES[node.id]}")
    if isinstance(node, ast.Call):
        yield from _swapped_arguments(node, source)


def _constant_mutants(node: ast.Constant) -> Iterator[Mutant]:
    value = node.value
    if isinstance(value, bool):
        yield _span(node, repr(not value), f"{value} -> {not value}")
    elif isinstance(value, int):
        yield _span(node, repr(value + 1), f"{value} -> {value + 1}")
    elif isinstance(value, float):
        yield _span(node, repr(value * 2 if value else 1.0), f"{value} -> {value * 2 if value else 1.0}")
    elif isinstance(value, str) and len(value) <= SHORT_STRING:
        changed = value + "X" if value else "X"
        yield _span(node, repr(changed), f"{value!r} -> {changed!r}")


def _swapped_arguments(node: ast.Call, source: str) -> Iterator[Mutant]:
    args = node.args
    if len(args) < 2 or any(isinstance(a, ast.Starred) for a in args[:2]):
        return
    first, second = (ast.get_source_segment(source, a) for a in args[:2])
    if first is None or second is None or first == second or args[0].lineno != args[1].end_lineno:
        return
    yield Mutant(
        args[0].lineno,
        args[0].col_offset,
        args[1].end_lineno,
        args[1].end_col_offset,
        f"{second}, {first}",
        "first two arguments swapped",
    )


def apply(source: str, mutant: Mutant) -> str:
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line.encode()))
    data = source.encode()
    begin = starts[mutant.line - 1] + mutant.col
    end = starts[mutant.end_line - 1] + mutant.end_col
    return (data[:begin] + mutant.text.encode() + data[end:]).decode()


def executed_lines(coverage_json: Path, module: str) -> set[int] | None:
    files = json.loads(coverage_json.read_text())["files"]
    for path, entry in files.items():
        if path.replace(os.sep, "/").endswith(f"audioicl/{module}"):
            return set(entry["executed_lines"])
    return None


class Sandbox:
    """A copy of ``src/`` in which one module is replaced by a mutant at a time."""

    def __init__(self, module: str):
        self.folder = Path(tempfile.mkdtemp(prefix="audioicl-mutants-"))
        shutil.copytree(ROOT / "src", self.folder / "src", ignore=shutil.ignore_patterns("__pycache__"))
        self.target = self.folder / "src" / "audioicl" / module
        self.env = {**os.environ, "PYTHONPATH": str(self.folder / "src"), "PYTHONDONTWRITEBYTECODE": "1"}

    def tests_by_line(self, source: str, tests: list[str]) -> tuple[bool, float, dict[int, set[str]]]:
        """The unmutated module under the tests (do they pass?), with coverage.py recording which test ran
        each of its lines (pytest-cov's test contexts). A line run only at import or in a CLI subprocess has
        no test: a mutant there gets the whole selection."""
        from coverage import CoverageData

        self.target.write_text(source)
        data_file, rc = self.folder / "contexts", self.folder / "coveragerc"
        rc.write_text("[run]\nbranch = false\n")
        started = time.monotonic()
        done = subprocess.run(
            [*PYTEST, f"--cov={self.target.parent}", f"--cov-config={rc}", "--cov-context=test",
             "--cov-report=", *tests],
            cwd=ROOT, env={**self.env, "COVERAGE_FILE": str(data_file)}, capture_output=True,
        )  # fmt: skip
        seconds = time.monotonic() - started
        data = CoverageData(basename=str(data_file))
        data.read()
        by_line = data.contexts_by_lineno(str(self.target))
        named = {line: {c.split("|")[0] for c in contexts if c} for line, contexts in by_line.items()}
        return done.returncode == 0, seconds, named

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]

# --- the worker: one sandbox, pytest imported once, a fork per mutant ------------------------------------

_SANDBOX: Sandbox | None = None


def _start_worker(module: str, tests: list[str]) -> None:
    """Make this worker's sandbox and import what the tests import (pytest, its plugins, numpy...) by
    collecting them once; then forget ``audioicl`` and the test modules, so that each fork imports them anew
    from the sandbox, the mutant included."""
    global _SANDBOX
    import pytest

    _SANDBOX = Sandbox(module)
    multiprocessing.util.Finalize(None, _SANDBOX.close, exitpriority=10)  # run as the worker exits
    os.environ.update(_SANDBOX.env)
    sys.path.insert(0, str(_SANDBOX.folder / "src"))
    os.chdir(ROOT)
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
        pytest.main([*PYTEST[3:], "--collect-only", *tests])
    tests_root = str(ROOT / "tests")
    for name, loaded in list(sys.modules.items()):
        origin = getattr(loaded, "__file__", None) or ""
        if name == "audioicl" or name.startswith("audioicl.") or origin.startswith(tests_root):
            del sys.modules[name]


def _run_mutant(text: str, tests: list[str], timeout: float) -> tuple[str, float]:
    """The tests in a fork of this worker with the module replaced by ``text``: killed (a test failed or
    the collection did), timeout (counted killed), or survived."""
    import pytest

    assert _SANDBOX is not None
    _SANDBOX.target.write_text(text)
    started = time.monotonic()
    child = os.fork()
    if child == 0:  # pragma: no cover - the fork
        os.setsid()
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        try:
            code = pytest.main([*PYTEST[3:], *tests])
        except BaseException:
            code = 3
        os._exit(int(code))
    deadline = started + timeout
    while True:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.killpg(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return "timeout", time.monotonic() - started
        time.sleep(0.05)
    # 1: a test failed; 2: interrupted (an import failed); 3, 4: pytest's internal or usage errors
    return ("survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"), time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="a path under src/audioicl, e.g. scoring/rules.py")
    parser.add_argument("--tests", nargs="+", help="the tests to run (default: the module's in TESTS)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once")
    parser.add_argument(
        "--coverage", type=Path, help="coverage.py's JSON of the suite: skip unexecuted lines"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "mutants", help="where the JSON report goes")
    parser.add_argument("--lines", help="only mutants starting on these lines, e.g. 40-80")
    parser.add_argument(
        "--sample",
        type=int,
        help="only this many of the mutants, drawn with --seed (the same draw each time)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    module = args.module.removeprefix("src/audioicl/")
    tests = args.tests or TESTS.get(module)
    if not tests:
        parser.error(f"no tests known for {module}: name them with --tests")
    source = (PACKAGE / module).read_text()
    mutants = sorted(set(mutants_of(source)), key=lambda m: (m.line, m.col, m.what))
    if args.lines:
        low, _, high = args.lines.partition("-")
        mutants = [m for m in mutants if int(low) <= m.line <= int(high or low)]
    if args.sample is not None and args.sample < len(mutants):
        drawn = random.Random(args.seed).sample(range(len(mutants)), args.sample)
        mutants = [mutants[i] for i in sorted(drawn)]
    covered = executed_lines(args.coverage, module) if args.coverage else None

    tracer = Sandbox(module)
    try:
        passed, baseline, by_line = tracer.tests_by_line(source, tests)
    finally:
        tracer.close()
    if not passed:
        print("the tests fail on the unmutated module: fix them first", file=sys.stderr)
        return 2
    timeout = 3 * baseline + 30
    print(f"{module}: {len(mutants)} mutants, tests {' '.join(tests)} ({baseline:.0f} s unmutated, traced)")
    runs, outcomes = [], {}
    for mutant in mutants:
        lines = set(range(mutant.line, mutant.end_line + 1))
        if covered is not None and not covered & lines:
            outcomes[mutant] = Outcome(mutant, "not covered", 0.0)
        else:
            reaching = sorted(set().union(*(by_line.get(line, set()) for line in lines)))
            runs.append((mutant, reaching or tests))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, context, initializer=_start_worker, initargs=(module, tests)) as pool:
        futures = {
            pool.submit(_run_mutant, apply(source, mutant), selection, timeout): mutant
            for mutant, selection in runs
        }
        for done, future in enumerate(as_completed(futures), 1):
            mutant = futures[future]
            outcomes[mutant] = Outcome(mutant, *future.result())
            mark = {"killed": ".", "timeout": "t", "survived": "S"}[outcomes[mutant].status]
            print(mark, end="" if done % 80 else "\n", flush=True)
    print()
    return report(module, source, [outcomes[m] for m in mutants], args.out)


def report(module: str, source: str, outcomes: list[Outcome], out: Path) -> int:
    killed = sum(o.status in ("killed", "timeout") for o in outcomes)
    survivors = [o for o in outcomes if o.status in ("survived", "not covered")]
    out.mkdir(parents=True, exist_ok=True)
    record = out / f"{module.replace('/', '.')}.json"
    lines = source.splitlines()
    rows = [
        {
            **asdict(o.mutant),
            "source": lines[o.mutant.line - 1].strip(),
            "status": o.status,
            "seconds": round(o.seconds, 1),
        }
        for o in outcomes
    ]
    record.write_text(json.dumps({"module": module, "killed": killed, "mutants": rows}, indent=1) + "\n")
    for o in survivors:
        m = o.mutant
        print(
            f"  survived{' (line not executed)' if o.status == 'not covered' else ''}: "
            f"{module}:{m.line}: {m.what}: {lines[m.line - 1].strip()[:90]}"
        )
    share = 100 * killed / len(outcomes) if outcomes else 100.0
    print(f"{module}: {killed} of {len(outcomes)} mutants killed ({share:.1f} %); report {record}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
