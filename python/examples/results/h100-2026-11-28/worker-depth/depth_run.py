# Experiment: the backward worker's queue depth (items) set from $DEPTH, then bench_bridge.py with the given args.
import os, runpy, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, os.path.join(os.getcwd(), "examples"))
from mxscope_bridge import backward_worker as bw
bw.BackwardWorker.__init__.__defaults__ = (int(os.environ["DEPTH"]),)
sys.argv = ["examples/bench_bridge.py"] + sys.argv[1:]
runpy.run_path("examples/bench_bridge.py", run_name="__main__")
