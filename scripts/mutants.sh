#!/usr/bin/env bash
# Mutation testing of one module in the test environment: `bash scripts/mutants.sh scoring/rules.py [ARGS]`
# (scripts/mutants.py says what a mutant is and which tests run; its report goes to mutants/). The environment
# is the one scripts/test.sh makes (installed on the first run). With coverage.json (scripts/coverage.sh) beside
# this checkout, mutants on lines no test executes are counted survived without running.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || AUDIOICL_SKIP_VLLM=1 . scripts/test_env.sh
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
coverage=()
[ -f coverage.json ] && coverage=(--coverage coverage.json)
.venv/bin/python -m pip install -q "coverage>=7.10,<8" "pytest-cov>=7,<8"
exec .venv/bin/python scripts/mutants.py "${coverage[@]}" "$@"
