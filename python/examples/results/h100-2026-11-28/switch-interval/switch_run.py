# Experiment: Python's GIL switch interval set from $SWITCH (seconds), then bench_bridge.py with the given args.
import os, runpy, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
sys.setswitchinterval(float(os.environ["SWITCH"]))
sys.argv = ["examples/bench_bridge.py"] + sys.argv[1:]
runpy.run_path("examples/bench_bridge.py", run_name="__main__")
