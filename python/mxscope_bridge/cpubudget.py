"""Holds a server thread to a share of one core, so that no client can take the GIL from the
training thread for long: the thread reports the CPU time its work took, and sleeps when it has
spent more than its share (a token bucket of CPU seconds, with a small burst for the odd big task)."""
from __future__ import annotations

import time


class CpuBudget:
    def __init__(self, share: float, burst_s: float = 0.05):
        self.share = share
        self.burst_s = burst_s
        self._tokens = burst_s
        self._refilled = time.monotonic()

    def charge(self, cpu_s: float) -> None:
        """Account `cpu_s` of work by this thread (time.thread_time deltas); sleep off any debt."""
        now = time.monotonic()
        self._tokens = min(self.burst_s, self._tokens + (now - self._refilled) * self.share) - cpu_s
        self._refilled = now
        if self._tokens < 0:
            time.sleep(min(-self._tokens / self.share, 10.0))  # sleeping refills the debt to zero
            self._tokens = 0.0
            self._refilled = time.monotonic()
