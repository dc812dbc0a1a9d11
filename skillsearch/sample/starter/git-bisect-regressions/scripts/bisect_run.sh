#!/usr/bin/env bash
# Helper for `git bisect run`. Usage: bisect_run.sh <pytest node id> [tries]
# Exit codes follow git bisect conventions: 0 good, 1 bad, 125 skip.
set -u
TEST="${1:?pass a pytest node id, e.g. tests/test_x.py::test_y}"
TRIES="${2:-3}"

# Drop stale bytecode so old and new commits do not mix.
find . -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null

# If the project does not even install at this commit, skip it.
if ! python -m pip install -q -e . >/dev/null 2>&1; then
    echo "install failed, skipping $(git rev-parse --short HEAD)"
    exit 125
fi

# Flaky tests: the commit is good if any try passes.
for i in $(seq 1 "$TRIES"); do
    if python -m pytest -q -x "$TEST" >/dev/null 2>&1; then
        echo "good on try $i"
        exit 0
    fi
done
echo "bad after $TRIES tries"
exit 1
