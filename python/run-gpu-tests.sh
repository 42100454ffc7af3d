#!/usr/bin/env bash
# The Python tests on a GPU machine, one process per test class, JOBS at a time (default 8): Triton
# compiles a kernel at a time on the CPU within a process, so test_gpu_kernels alone took ~9.5 min in
# one process on an H100 machine (results/h100x2-2026-11-27c). Arguments: test files (default: all of
# tests/). Each class's output and JUnit report go to $LOGS (default: a fresh temporary folder). The
# golden-vector tests read the vectors from ../shared/testdata/mxfp4 or, where the checkout has no
# shared/ beside it (a device machine), from testdata/mxfp4 in the repository. Ends with one line
# "N passed, N failed" (after the last FAIL_TAIL lines, default 40, of each failing class's log) and
# exits non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")"
PYTHON=${MXSCOPE_PYTHON:-python3}
JOBS=${JOBS:-8}
LOGS=${LOGS:-$(mktemp -d)}
mkdir -p "$LOGS"
[ $# -gt 0 ] || set -- tests
# test_x.py::Class::test_y -> test_x.py::Class (module-level tests stay whole)
if ! "$PYTHON" -m pytest -q -p no:cacheprovider --collect-only "$@" >"$LOGS/collected.txt" 2>&1; then
  cat "$LOGS/collected.txt" >&2
  echo "run-gpu-tests: collecting $* failed" >&2
  echo "0 passed, 1 failed"
  exit 1
fi
grep '::' "$LOGS/collected.txt" | sed -E 's/^([^:]+::[^:]+)::.*/\1/' | sort -u >"$LOGS/classes.txt"
export PYTHON LOGS
xargs -P "$JOBS" -I{} sh -c 'name=$(printf %s "$1" | tr -c "A-Za-z0-9_.-" _); "$PYTHON" -m pytest -q -p no:cacheprovider --junitxml="$LOGS/$name.xml" "$1" >"$LOGS/$name.log" 2>&1' _ {} <"$LOGS/classes.txt"
reports=()
while read -r class; do reports+=("$LOGS/$(printf %s "$class" | tr -c 'A-Za-z0-9_.-' _).xml"); done <"$LOGS/classes.txt"
read -r passed failed < <("$PYTHON" tests/junit_summary.py "${reports[@]}")
grep -h '^FAILED\|^ERROR' "$LOGS"/*.log 2>/dev/null | sort
# The end of each failing class's log here too: a device machine returns only so many files, and the
# reason for a failure should not take another machine start to read.
for log in $(grep -l '^FAILED\|^ERROR' "$LOGS"/*.log 2>/dev/null); do
  echo "=== $(basename "$log" .log)"
  tail -n "${FAIL_TAIL:-40}" "$log"
done
[ $((passed + failed)) -gt 0 ] || failed=1
echo "$passed passed, $failed failed ($(wc -l <"$LOGS/classes.txt") classes; logs in $LOGS)"
[ "$failed" = 0 ]
