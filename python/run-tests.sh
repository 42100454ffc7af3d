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
read -r passed failed < <("$PYTHON" - "$report" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print(0, 1)
    raise SystemExit
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(total - failed - skipped, failed)
PY
)
if [ "$status" = 5 ] || [ $((passed + failed)) = 0 ]; then
  echo "run-tests: no Python test ran (pytest exit $status): the tests folder or its collection is broken" >&2
  failed=$((failed > 0 ? failed : 1))
  status=1
fi
echo "$passed passed, $failed failed"
[ "$status" = 0 ] && [ "$failed" = 0 ]
