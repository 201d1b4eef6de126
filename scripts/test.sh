#!/usr/bin/env bash
# Install audioicl with its test tools into .venv and run lint, format check, the layers contract and the test suite.
# Used by the README and by CI (.ci/run). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/test_env.sh

ruff check .
ruff format --check .
# the layers contract in pyproject.toml: a circle or an import up the pipeline fails here, the import named
lint-imports --no-cache
set +e
# --dist loadfile: a file's tests on one worker, so that a module's fixtures (a vLLM engine's run, a server, the
# fast-path families' loaded backends, a demo) are made once, not once on each worker.
python -m pytest -q -n 2 --dist loadfile "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a failure of the suite, not a pass.
if [ "$status" = 5 ]; then
  echo "no tests were collected" >&2
  exit 1
fi
exit "$status"
