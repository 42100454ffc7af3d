"""examples/trace_gaps.py: GPU-busy time and the gaps between kernels of a profiler timeline, with the
thread whose launch came late."""
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))

from llama_mxfp4 import busy_floor  # noqa: E402
from trace_gaps import summarize  # noqa: E402


def kernel(ts, dur, name, correlation, stream=7):
    return {"cat": "kernel", "ph": "X", "ts": ts, "dur": dur, "name": name, "tid": stream, "args": {"correlation": correlation}}


def launch(ts, tid, correlation):
    return {"cat": "cuda_runtime", "ph": "X", "ts": ts, "dur": 2, "name": "cudaLaunchKernel", "tid": tid, "args": {"correlation": correlation}}


def thread(tid, name):
    return {"ph": "M", "name": "thread_name", "tid": tid, "args": {"name": name}}


class TraceGaps(unittest.TestCase):
    def test_busy_time_gaps_and_who_launched_late(self):
        events = [thread(1, "python3"), thread(2, "mxscope-backward"),
                  kernel(100, 50, "a", 1), launch(90, 1, 1),
                  kernel(120, 80, "b overlaps a", 2, stream=9), launch(95, 1, 2),
                  kernel(300, 10, "c after 100 µs", 3), launch(299, 2, 3),
                  kernel(315, 5, "d after 5 µs", 4), launch(250, 1, 4),
                  {"cat": "gpu_memcpy", "ph": "X", "ts": 100, "dur": 400, "name": "Memcpy HtoD", "tid": 8, "args": {}}]
        s = summarize(events)
        self.assertEqual(s["span_us"], 220)
        self.assertEqual(s["busy_us"], 100 + 10 + 5, "overlapping kernels count once")
        self.assertEqual(s["copies_us"], 400)
        self.assertEqual(s["by_stream_us"], {7: 65, 9: 80})
        self.assertEqual(s["gaps"], [(100, 100, "c after 100 µs", "mxscope-backward"), (5, 210, "d after 5 µs", "python3")])

    def test_the_busy_floor_adds_a_stats_a_pre_stats_and_the_idle_steps_excess_over_a_plain_step(self):
        busy = {"plain": 100.0, "pre": 150.0, "stats": 200.0, "off": 100.0}
        self.assertAlmostEqual(busy_floor(busy, 110.0, 10), (100 + 50) / 10 / 110)
        self.assertAlmostEqual(busy_floor({**busy, "off": 101.0}, 110.0, 10), (100 + 50 + 8 * 1) / 10 / 110)
        self.assertAlmostEqual(busy_floor(busy, 110.0, 100), (100 + 50) / 100 / 110)

    def test_a_trace_without_kernels_is_refused_with_the_reason(self):
        with self.assertRaisesRegex(ValueError, "no kernel events"):
            summarize([launch(0, 1, 1)])


if __name__ == "__main__":
    unittest.main()
