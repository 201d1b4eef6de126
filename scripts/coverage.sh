#!/usr/bin/env bash
# Line and branch coverage of src/audioicl under the whole suite (what scripts/test.sh runs), the CLI's
# subprocesses and the build's forked workers counted: `bash scripts/coverage.sh [PYTEST ARGS]`.
# Writes .coverage-data/ (the combined data), coverage.json, htmlcov/ and prints the table by package
# (scripts/coverage_table.py). Not part of CI: the tracer makes the suite about 1.5x slower.
# The vLLM tests' engine runs in .venv-vllm, which has no coverage installed: what it runs is not counted.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/test_env.sh
python -m pip install -q 'coverage>=7.10,<8'

rm -rf .coverage-data && mkdir .coverage-data
export COVERAGE_FILE="$PWD/.coverage-data/coverage"
set +e
python -m coverage run -m pytest -q -n 2 --dist loadfile -p no:cacheprovider "$@"
status=$?
set -e
python scripts/coverage_combine.py "$COVERAGE_FILE"
python -m coverage json -q -i --include="*/src/audioicl/*" -o coverage.json --data-file="$COVERAGE_FILE"
python -m coverage html -q -i --include="*/src/audioicl/*" -d htmlcov --data-file="$COVERAGE_FILE"
python scripts/coverage_table.py coverage.json
exit "$status"
