"""`python3 tests/junit_summary.py REPORT.xml [...]`: prints "passed failed" summed over pytest's JUnit
reports (skipped tests are neither); a report that is missing or unreadable counts as one failure.
The test runners (run-tests.sh, run-gpu-tests.sh) end with these two numbers."""
import sys
import xml.etree.ElementTree as ET


def counts(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return 0, 1
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = sum(int(s.get("tests", 0)) for s in suites)
    failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
    skipped = sum(int(s.get("skipped", 0)) for s in suites)
    return total - failed - skipped, failed


if __name__ == "__main__":
    passed = failed = 0
    for report in sys.argv[1:]:
        p, f = counts(report)
        passed, failed = passed + p, failed + f
    print(passed, failed)
