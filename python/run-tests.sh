#!/usr/bin/env bash
# Runs the bridge's Python tests on Debian's python3 (CPU torch), installing what they need with apt
# when it is missing. Ends with one line "N passed, N failed"; exits non-zero on any failure, and
# also when no test ran at all (pytest's exit code 5 is a failure here).
set -uo pipefail
cd "$(dirname "$0")"
PYTHON=${MXSCOPE_PYTHON:-/usr/bin/python3}
PACKAGES="python3-torch python3-pytest"

if ! "$PYTHON" -c 'import torch, pytest' 2>/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "run-tests: $PYTHON lacks torch or pytest; install them: sudo apt-get install -y $PACKAGES" >&2
    echo "0 passed, 1 failed"
    exit 1
  fi
  echo "run-tests: installing $PACKAGES" >&2
  (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $PACKAGES) >&2 || { echo "run-tests: apt-get install $PACKAGES failed" >&2; echo "0 passed, 1 failed"; exit 1; }
fi

report=$(mktemp --suffix=.xml)
trap 'rm -f "$report"' EXIT
"$PYTHON" -m pytest -q -p no:cacheprovider --junitxml="$report" tests
status=$?
read -r passed failed < <("$PYTHON" tests/junit_summary.py "$report")
if [ "$status" = 5 ] || [ $((passed + failed)) = 0 ]; then
  echo "run-tests: no Python test ran (pytest exit $status): the tests folder or its collection is broken" >&2
  failed=$((failed > 0 ? failed : 1))
  status=1
fi
echo "$passed passed, $failed failed"
[ "$status" = 0 ] && [ "$failed" = 0 ]
